"""Memory of stridex's stream-ordered pools across processes (stridex.ipc): fresh results
(``stridex.empty``, ``View.copy()``) pickle as the pool's fd plus the allocation's export data, alias
in a spawned child both ways, keep their producer's stream order without a host wait at unpickle,
import their pool once per child, and stay allocated in the exporter until the child released
them. Skips without a CUDA device or torch."""

import gc
import pickle
import time

import pytest

import stridex
import stridex.ipc
from stridex.ipc import broker
from conftest import cuda_device_count

import ipc_gpu_worker
import ipc_harness

pytestmark = pytest.mark.skipif(cuda_device_count() == 0, reason="no CUDA device (stridex.cuda_available() is False)")

N = 1 << 20


@pytest.fixture(scope="module")
def torch(torch_with_cuda):
    return torch_with_cuda


@pytest.fixture(scope="module")
def worker(gpu_worker):
    return gpu_worker


def _shareable_pool():
    stridex.empty(1, "uint8", device="cuda")  # creates the pool
    stats = stridex.memory_stats(device=0)
    if not stats["shareable"]:
        pytest.skip(f"this driver made stridex's pool without a shareable handle: {stats['not_shareable']}")


def _pool_view(torch, how):
    _shareable_pool()
    if how == "empty":
        return stridex.empty(N, "float32", device="cuda")
    src = torch.zeros(N, device="cuda", dtype=torch.float32)
    return stridex.view(src).copy()  # a fresh allocation of the pool, not torch's


def test_a_pickled_pool_view_carries_the_pools_fd_not_a_legacy_handle(torch):
    _shareable_pool()
    v = stridex.empty(N, "float32", device="cuda")
    payload = stridex.ipc._reduce(v)[1][0]
    # A reduction nobody loads keeps its View (4 MiB of the pool) until exit: released here, or
    # the later tests' memory counts and pending() would see it.
    broker.current().release(payload["ticket"])
    assert stridex.ipc.pending() == {}
    assert payload["kind"] == "cuda_pool"
    assert len(payload["pool"]) == 64 and payload["offset"] == 0 and payload["extent"] >= 4 * N
    assert "handle" not in payload


@pytest.mark.parametrize("how", ["empty", "copy"])
def test_pool_memory_writes_are_visible_both_ways(torch, worker, how):
    v = _pool_view(torch, how)
    t = torch.from_dlpack(v)
    t.fill_(1.0)
    assert worker("sum", v)[0] == N
    assert worker("fill", v, 2.0) == "ok"
    assert float(t.double().sum()) == 2.0 * N  # the child's write, read here through torch
    assert worker("hold", v) == "ok"
    t.fill_(3.0)
    torch.cuda.synchronize()
    assert worker("sum_held", 0) == 3.0 * N  # ours, read there
    assert worker("drop") == 0
    assert worker("pools") == 0  # the imported pool went with its last allocation
    assert stridex.ipc.wait_released(30)


def test_a_busy_producer_stream_orders_the_childs_read_without_a_host_wait_at_unpickle(torch, worker):
    v = _pool_view(torch, "empty")
    t = torch.from_dlpack(v)
    torch.cuda._sleep(200_000_000)  # ~0.1 s of GPU time on the default stream, then the write
    t.fill_(5.0)
    total, device, order = worker("sum", v)  # pickled while the kernel still runs
    assert total == 5.0 * N and device.startswith("cuda")
    # Unpickled with no stream and the producer's event pending, waited for by nobody; taken by
    # torch on its legacy default stream, which then waited for it (as for a legacy handle).
    assert order == (None, True, False, True)
    assert stridex.ipc.wait_released(30)


def test_many_views_of_one_pool_import_it_once(torch, worker):
    _shareable_pool()
    views = [stridex.empty(4096, "float32", device="cuda") for _ in range(8)]
    for i, v in enumerate(views):
        torch.from_dlpack(v).fill_(float(i))
    views.append(views[3][100:200])  # a slice: the same allocation, at an offset
    torch.cuda.synchronize()
    for v in views:
        assert worker("hold", v) == "ok"
    assert worker("pools") == 1
    for i in range(8):
        assert worker("sum_held", i) == float(i) * 4096
    assert worker("sum_held", 8) == 3.0 * 100
    assert worker("drop") == 0
    assert worker("pools") == 0
    del views
    gc.collect()
    assert stridex.ipc.wait_released(30)


def test_the_exporter_keeps_the_allocation_while_the_child_holds_it(torch, worker):
    _shareable_pool()
    before = stridex.memory_stats(device=0)["in_use"]
    v = stridex.empty(N, "float32", device="cuda")
    torch.from_dlpack(v).fill_(4.0)
    torch.cuda.synchronize()
    assert worker("hold", v) == "ok"
    del v
    gc.collect()
    assert stridex.memory_stats(device=0)["in_use"] >= before + 4 * N  # the ticket keeps it
    # New allocations of the same size must not reuse the held block.
    fresh = [stridex.empty(N, "float32", device="cuda") for _ in range(4)]
    for f in fresh:
        torch.from_dlpack(f).fill_(9.0)
    torch.cuda.synchronize()
    assert worker("sum_held", 0) == 4.0 * N
    del fresh, f  # the loop variable too: it holds the last fresh allocation
    assert worker("drop") == 0
    assert stridex.ipc.wait_released(30)
    # Freed once the child released it (the broker thread drops the ticket's View just after).
    deadline = time.monotonic() + 10
    while stridex.memory_stats(device=0)["in_use"] != before and time.monotonic() < deadline:
        gc.collect()
        time.sleep(0.05)
    assert stridex.memory_stats(device=0)["in_use"] == before
    assert stridex.ipc.pending() == {}


def test_a_producer_that_exits_first_waits_for_the_importers_release(torch):
    w = ipc_harness.Worker(ipc_gpu_worker.serve, timeout=60)
    p = w.process
    v = w("make", "pool", N, 4.0)
    assert float(torch.from_dlpack(v).double().sum()) == 4.0 * N
    w.stop()
    # The exporter must not free pool memory an importer still uses: it waits at exit.
    time.sleep(2.0)
    assert p.is_alive()
    assert float(torch.from_dlpack(v).double().sum()) == 4.0 * N
    del v
    gc.collect()
    p.join(timeout=60)
    assert p.exitcode == 0


def test_a_plain_pickle_round_trip_in_one_process_is_the_same_memory(torch):
    _shareable_pool()
    v = stridex.empty(16, "float32", device="cuda")
    w = pickle.loads(pickle.dumps(v))
    assert w.ptr == v.ptr  # taken back locally, not imported
