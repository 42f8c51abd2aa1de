"""stridex.refit on GPUs (docs/refit.md): torch trainer processes publish row shards carved from one
allocation each, this process pulls them into another tensor-parallel layout, and every element is
checked. Single-GPU variants put every process and shard on cuda:0 (several shards on one device);
the 2- and 4-GPU variants skip with a reason on fewer GPUs. The CPU variants: test_refit.py."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import threading
import time

import pytest

import stridex
import stridex.ipc
from stridex import ShardedView, ShardLayout
from stridex.refit import PublisherGone, Slots, Subscriber

import ipc_harness
from conftest import cuda_device_count

pytest.importorskip("torch", reason="the GPU refit tests run torch trainer processes")
import refit_gpu_worker  # noqa: E402 - imports torch

SHAPES = refit_gpu_worker.SHAPES
SLEEP = 2_000_000_000  # torch.cuda._sleep cycles: about a second on an H200


def gpus_needed(n: int) -> None:
    have = cuda_device_count()
    if have < n:
        pytest.skip(f"needs {n} GPUs, this machine has {have}")


@pytest.fixture
def trainers(torch_with_cuda):
    made = []

    def make(ranks: int, devices: list[int]) -> list[ipc_harness.Worker]:
        ws = [
            ipc_harness.Worker(refit_gpu_worker.serve, r, ranks, devices[r % len(devices)], timeout=120)
            for r in range(ranks)
        ]
        made.extend(ws)
        return ws

    yield make
    for w in made:
        if w.process.is_alive():
            w.stop()
    for w in made:
        w.process.join(60)


@pytest.fixture
def subscribe(trainers):
    """Subscriber(...), closed at teardown before the trainers stop, even when the test failed: a
    subscriber left open (a failed assert's traceback holds it) keeps the trainers' memory mapped,
    and their exit would wait for it (stridex.ipc's exit wait)."""
    made = []
    before = (stridex._stridex._ipc_open_handles(), stridex._stridex._ipc_open_pools())

    def make(addresses, **kw) -> Subscriber:
        made.append(Subscriber(addresses, **kw))
        return made[-1]

    yield make
    for s in made:
        s.close()
    # close() dropped every mapping of the trainers' memory (else their exit would wait for it)
    assert (stridex._stridex._ipc_open_handles(), stridex._stridex._ipc_open_pools()) == before


def columns(torch, devices: list[int]) -> dict[str, ShardedView]:
    """Destinations: every weight cut along its last dimension over `devices` (repeats allowed)."""
    out = {}
    for name, (shape, dtype) in SHAPES.items():
        grid = [1] * (len(shape) - 1) + [len(devices)]
        layout = ShardLayout.grid(shape, grid, [f"cuda:{d}" for d in devices])
        arrays = [
            torch.full([s.stop - s.start for s in i], -1, dtype=dtype, device=str(dev)) for i, dev in layout.shards
        ]
        out[name] = ShardedView.from_arrays(arrays, [[s.start for s in i] for i, _ in layout.shards], shape)
    return out


def check(torch, dest: dict[str, ShardedView], version: int) -> None:
    torch.cuda.synchronize()
    for k, (name, sv) in enumerate(dest.items()):
        want = refit_gpu_worker.value(version, k)
        for _, t in sv.to_torch():
            assert bool((t == want).all()), f"{name}: expected every element == {want}, found {t.unique()[:8]}"


def run_refits(torch, trainers, subscribe, ranks: int, trainer_devices: list[int], dest_devices: list[int]) -> None:
    ws = trainers(ranks, trainer_devices)
    for w in ws:
        w("publish", 1, 0)
    sub = subscribe([w("address") for w in ws])
    dest = columns(torch, dest_devices)
    for v in range(1, 6):
        if v > 1:
            for w in ws:
                w("publish", v, 0)
        assert sub.pull(v, into=dest) == v
        check(torch, dest, v)
    for w in ws:
        s = w("stats")
        assert s["regions"] == 1 and s["bucket_bytes"] == 0, s  # one allocation, one handle, no bucket
        assert s["exports"] == 1 and s["epochs"] == 1
    sub.close()


def test_one_gpu_two_trainers_rows_to_three_columns(torch_with_cuda, trainers, subscribe):
    run_refits(torch_with_cuda, trainers, subscribe, 2, [0], [0, 0, 0])


@pytest.mark.parametrize("n", [2, 4])
def test_n_gpus_rows_to_columns(torch_with_cuda, trainers, subscribe, n):
    gpus_needed(n)
    run_refits(torch_with_cuda, trainers, subscribe, n, list(range(n)), list(reversed(range(n))))


def test_publish_and_pull_never_wait_on_the_host(torch_with_cuda, trainers, subscribe):
    torch = torch_with_cuda
    (w,) = trainers(1, [0])
    w("publish", 1, 0)
    w("sync")
    sub = subscribe(w("address"))
    dest = columns(torch, [0, 0])
    sub.pull(1, into=dest)
    r = w("publish", 2, SLEEP)  # the update and the publish sit behind a one-second kernel
    assert r["host_s"] < 0.5 and not r["done"], r
    s = torch.cuda.Stream(0)
    t0 = time.monotonic()
    assert sub.pull(2, into=dest, stream=s) == 2
    assert time.monotonic() - t0 < 0.5  # enqueued behind the trainer's event, not waited for
    s.synchronize()
    check(torch, dest, 2)
    sub.close()


def test_a_slow_pull_is_never_overwritten(torch_with_cuda, trainers, subscribe):
    torch = torch_with_cuda
    (w,) = trainers(1, [0])
    w("publish", 1, 0)
    sub = subscribe(w("address"))
    dest = columns(torch, [0])
    s = torch.cuda.Stream(0)
    with torch.cuda.stream(s):
        torch.cuda._sleep(SLEEP)  # the pull's copies wait behind this
    sub.pull(1, into=dest, stream=s)
    assert not s.query()
    took = w("publish", 2, 0)  # begin_update returns at once; the trainer's stream waits on the GPU
    assert took["host_s"] < 0.5
    s.synchronize()
    check(torch, dest, 1)  # all of version 1, although version 2 was written during the pull
    w("sync")
    sub.pull(2, into=dest)
    check(torch, dest, 2)
    sub.close()


def test_readers_hammering_during_refits_never_see_a_mix(torch_with_cuda, trainers, subscribe):
    """Two reader threads read a Slots on their own streams while the main thread refits into it:
    every read is all of one version, and readers go on reading the front set while a pull refills
    the back set (reads that began while a pull was in progress, its copies not yet complete, are
    counted and must occur; those of the front set, the version before the one pulled, are reported)."""
    torch = torch_with_cuda
    ws = trainers(2, [0])
    for w in ws:
        w("publish", 1, 0)
    sub = subscribe([w("address") for w in ws])
    slots = Slots(columns(torch, [0, 0]), columns(torch, [0]))
    sub.pull(1, into=slots)
    stop, errors = threading.Event(), []
    reads, overlapped, front = [0, 0], [0, 0], [0, 0]
    pulling = [0]  # the version being pulled until its copies completed; 0 between pulls

    def reader(me: int) -> None:
        s = torch.cuda.Stream(0)
        try:
            while not stop.is_set():
                during = pulling[0]
                with slots.read(stream=s) as (version, weights):
                    with torch.cuda.stream(s):
                        oks = [
                            (t == refit_gpu_worker.value(version, k)).all()
                            for k, sv in enumerate(weights.values())
                            for _, t in sv.to_torch()
                        ]
                s.synchronize()
                if not all(bool(o) for o in oks):
                    errors.append(version)
                reads[me] += 1
                if during:  # began while a pull was in progress
                    overlapped[me] += 1
                    if version < during:  # the front set, read while the back set was refilled
                        front[me] += 1
        except Exception as e:  # noqa: BLE001 - reported by the main thread
            errors.append(repr(e))

    threads = [threading.Thread(target=reader, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    pull_stream = torch.cuda.Stream(0)
    try:
        for v in range(2, 40):
            for w in ws:
                w("publish", v, SLEEP // 50)  # the trainers' update sits behind a ~20 ms kernel
            pulling[0] = v
            sub.pull(v, into=slots, stream=pull_stream)  # enqueued behind the trainers' events
            pull_stream.synchronize()  # the copies completed: readers may now get version v
            pulling[0] = 0
    finally:
        stop.set()
        for t in threads:
            t.join(60)
    assert not errors, f"readers saw mixed versions or failed: {errors[:5]}"
    assert sum(reads) > 20 and all(reads), f"reads per reader: {reads}"
    assert sum(overlapped) > 0, f"no read began during a pull (reads {reads}, of the front set {front})"


def test_killed_subscriber_and_killed_publisher(torch_with_cuda, trainers, subscribe):
    torch = torch_with_cuda
    (w,) = trainers(1, [0])
    address = w("address")
    w("publish", 1, 0)
    ctx = mp.get_context("spawn")
    held = ctx.Queue()
    victim = ctx.Process(target=refit_gpu_worker.hold_open, args=(address, 0, held), daemon=True)
    victim.start()
    assert held.get(timeout=120) == 1
    sub = subscribe(address)
    os.kill(victim.pid, signal.SIGKILL)
    victim.join(30)
    assert w("begin_update") < 10
    w("publish", 2, 0)
    dest = columns(torch, [0, 0])
    sub.pull(2, into=dest)
    check(torch, dest, 2)
    assert w("stats")["subscribers"] == 1
    os.kill(w.process.pid, signal.SIGKILL)
    w.process.join(30)
    t0 = time.monotonic()
    with pytest.raises(PublisherGone):
        sub.pull(2, into=dest)
    assert time.monotonic() - t0 < 5
    sub.close()


def test_no_leak_over_200_refits(torch_with_cuda, trainers, subscribe):
    torch = torch_with_cuda
    (w,) = trainers(1, [0])
    w("publish", 1, 0)
    sub = subscribe(w("address"))
    dest = columns(torch, [0, 0])
    for v in range(2, 12):
        w("publish", v, 0)
        sub.pull(v, into=dest)
    torch.cuda.synchronize()

    def counts():
        with open("/proc/self/maps") as f:
            maps = sum(1 for _ in f)
        return len(os.listdir("/proc/self/fd")), maps, torch.cuda.memory_allocated(0), stridex.ipc.pending()

    before, pub_before = counts(), w("stats")
    for v in range(12, 212):
        w("publish", v, 0)
        sub.pull(v, into=dest)
    check(torch, dest, 211)
    after, pub_after = counts(), w("stats")
    assert after == before
    for key in ("exports", "epochs", "regions", "bucket_bytes", "fds", "allocated", "pending"):
        assert pub_after[key] == pub_before[key], key
    sub.close()
