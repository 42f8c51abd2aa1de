"""Views across processes on a GPU machine (stridex.ipc): torch allocations through legacy CUDA
IPC handles, VirtualBuffer chunks through fds, stream order through interprocess events, and
lifetime when the producer leaves first. Skips without a CUDA device or torch."""

import gc
import pickle
import time

import pytest

import stridex
import stridex.ipc
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


def _buffers(torch, kind):
    if kind == "torch":
        t = torch.zeros(N, device="cuda", dtype=torch.float32)
        return t, stridex.view(t)
    buf = stridex.VirtualBuffer(N * 4, shareable=True)
    return buf, buf.view("float32", (N,))


@pytest.mark.parametrize("kind", ["torch", "vmm"])
def test_writes_are_visible_both_ways(torch, worker, kind):
    keep, v = _buffers(torch, kind)
    t = torch.from_dlpack(v)
    t.fill_(1.0)
    assert worker("sum", v)[0] == N
    assert worker("fill", v, 2.0) == "ok"
    assert float(t.double().sum()) == 2.0 * N  # the worker's write, seen here
    assert worker("hold", v) == "ok"
    t.fill_(3.0)
    torch.cuda.synchronize()
    assert worker("sum_held", 0) == 3.0 * N  # ours, seen there
    assert worker("drop") == 0  # every opened handle closed with the last View
    assert stridex.ipc.wait_released(30)


@pytest.mark.parametrize("kind", ["torch", "vmm"])
def test_pending_producer_kernel_is_ordered_before_the_consumer(torch, worker, kind):
    keep, v = _buffers(torch, kind)
    t = torch.from_dlpack(v)
    torch.cuda._sleep(200_000_000)  # ~0.1 s of GPU time on the default stream, then the write
    t.fill_(5.0)
    total, device, order = worker("sum", v)  # pickled while the kernel still runs
    assert total == 5.0 * N and device.startswith("cuda")
    # Unpickled with no stream and the producer's event pending, waited for by nobody; taken by
    # torch on its legacy default stream, which then waited for it (docs/distributed.md). VMM
    # memory too: its View carries this process's relay of the event, whose exporter may destroy
    # it once the import returned.
    assert order == (None, True, False, True)


def test_view_attributes_and_offset_travel(torch, worker):
    t = torch.arange(4096, device="cuda", dtype=torch.float32).reshape(64, 64)
    v = stridex.view(t[3:, 5::2])
    assert worker("sum", v)[0] == float(t[3:, 5::2].double().sum())


@pytest.mark.parametrize("kind", ["torch", "vmm"])
def test_producer_exits_first_memory_valid_until_released(torch, kind):
    w = ipc_harness.Worker(ipc_gpu_worker.serve, timeout=60)
    p = w.process
    v = w("make", kind, N, 4.0)
    assert float(torch.from_dlpack(v).double().sum()) == 4.0 * N
    w.stop()
    if kind == "torch":
        # Legacy IPC memory dies with its process: the producer waits at exit for our release.
        time.sleep(2.0)
        assert p.is_alive()
        assert float(torch.from_dlpack(v).double().sum()) == 4.0 * N
        del v
        gc.collect()
        p.join(timeout=60)
        assert p.exitcode == 0
    else:
        # VMM chunks are held by our mapping: the producer leaves, the memory stays.
        p.join(timeout=60)
        assert p.exitcode == 0
        assert float(torch.from_dlpack(v).double().sum()) == 4.0 * N


@pytest.mark.parametrize("kind", ["torch", "vmm"])
def test_a_worker_that_numbers_the_gpus_otherwise_finds_the_memory_on_its_own_ordinal(torch, kind):
    # The worker sees the GPUs in the other order (CUDA_VISIBLE_DEVICES=1,0): our cuda:1 is its
    # cuda:0. A View carries the GPU's UUID, not our ordinal, so it arrives on the right GPU.
    if cuda_device_count() < 2:
        pytest.skip(f"needs 2 CUDA devices, found {cuda_device_count()}")
    import os

    saved = os.environ.get("CUDA_VISIBLE_DEVICES")
    os.environ["CUDA_VISIBLE_DEVICES"] = "1,0"  # read by the spawned child only: ours is initialised
    try:
        w = ipc_harness.Worker(ipc_gpu_worker.serve, timeout=60)
    finally:
        if saved is None:
            del os.environ["CUDA_VISIBLE_DEVICES"]
        else:
            os.environ["CUDA_VISIBLE_DEVICES"] = saved
    try:
        if kind == "torch":
            keep = torch.full((N,), 3.0, device="cuda:1", dtype=torch.float32)
            v = stridex.view(keep)
        else:
            keep = stridex.VirtualBuffer(N * 4, shareable=True, device=1)
            v = keep.view("float32", (N,))
            torch.from_dlpack(v).fill_(3.0)
            torch.cuda.synchronize(1)
        assert str(v.device) == "cuda:1"
        total, device, _ = w("sum", v)
        assert (total, device) == (3.0 * N, "cuda:0")
        assert w("fill", v, 6.0) == "ok"
        assert float(torch.from_dlpack(v).double().sum()) == 6.0 * N  # its write, on our cuda:1
        del v
        gc.collect()
        assert stridex.ipc.wait_released(30)
    finally:
        w.stop()
        w.process.join(timeout=60)


def test_memory_without_ipc_support_is_refused(torch):
    buf = stridex.VirtualBuffer(1 << 21)  # not shareable: no fd handle type
    with pytest.raises(BufferError, match="cannot share"):
        pickle.dumps(buf.view("uint8", (16,)))
    assert stridex.ipc.pending() == {}


def test_dask_serializers_pack_non_contiguous_device_views(torch):
    pytest.importorskip("distributed")
    from stridex.ipc import dask as d

    t = torch.arange(4096, device="cuda", dtype=torch.float32).reshape(64, 64)
    v = stridex.view(t[3:, 5::2])
    expect = t[3:, 5::2].cpu()
    for serialize, deserialize in (
        (d.cuda_serialize_view, d.cuda_deserialize_view),
        (d.dask_serialize_view, d.dask_deserialize_view),
    ):
        header, frames = serialize(v)
        out = deserialize(header, frames)
        assert (out.shape, out.dtype, str(out.device)) == (v.shape, v.dtype, "cuda:0") and out.is_c_contiguous
        torch.cuda.synchronize()
        assert torch.equal(torch.from_dlpack(out).cpu(), expect)


def test_dask_over_ucx_moves_device_views_between_two_gpus(torch):
    if cuda_device_count() < 2:
        pytest.skip(f"needs 2 CUDA devices, found {cuda_device_count()}")
    pytest.importorskip("distributed_ucxx")
    from distributed import Client, Nanny, Scheduler, SpecCluster

    workers = {
        f"gpu{i}": {"cls": Nanny, "options": {"nthreads": 1, "env": {"CUDA_VISIBLE_DEVICES": str(i)}}} for i in range(2)
    }
    scheduler = {"cls": Scheduler, "options": {"protocol": "ucxx", "dashboard_address": None}}
    import dask

    # UCX finds its CUDA transports only with a context made before it starts (as dask-cuda does);
    # the Nannies pass this configuration on to their workers.
    with (
        dask.config.set({"distributed-ucxx.create-cuda-context": True}),
        SpecCluster(workers=workers, scheduler=scheduler) as cluster,
        Client(cluster) as client,
    ):
        a, b = list(client.scheduler_info()["workers"])

        def make():
            import torch

            import stridex

            return stridex.view(torch.arange(1 << 20, device="cuda", dtype=torch.float32))

        def check(v):
            import torch

            import stridex

            return str(v.device), float(torch.from_dlpack(v).double().sum()), stridex.device_uuid(0)

        def uuid():
            import stridex

            return stridex.device_uuid(0)

        made = client.submit(make, workers=[a], pure=False)
        device, total, where = client.submit(check, made, workers=[b]).result(timeout=120)
        assert device == "cuda:0" and total == float(sum(range(1 << 20)))
        assert where != client.submit(uuid, workers=[a], pure=False).result()  # another GPU
