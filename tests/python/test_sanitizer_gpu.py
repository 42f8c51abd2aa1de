"""The hand-over race sanitizer on a GPU (docs/sanitizer.md): each report class triggered by a
seeded race, a ~0.5 s torch.cuda._sleep kernel keeping the window open, and silent on the
corrected program. Skips without a CUDA device or torch."""

from __future__ import annotations

import warnings

import pytest

import stridex
from stridex import _stridex
from conftest import cuda_device_count

pytestmark = pytest.mark.skipif(cuda_device_count() == 0, reason="no CUDA device (stridex.cuda_available() is False)")

SLEEP = 1_000_000_000  # GPU clock cycles: ~0.5 s, far longer than any host step below
N = 1 << 20


def load_kernels(torch):
    """Runs every kernel the tests launch once, idle: under CUDA's lazy module loading, a kernel
    loaded behind the sleep would wait for it on the host, and the race window would close."""
    side = torch.cuda.Stream()
    x = torch.ones(N, device="cuda")
    for stream in (torch.cuda.current_stream(), side):
        with torch.cuda.stream(stream):
            torch.cuda._sleep(1000)
            x.mul_(2)
            y = x * 2
            x.fill_(3.0)
            torch.zeros(N, device="cuda")
    del y
    torch.cuda.synchronize()


@pytest.fixture
def torch(torch_with_cuda):
    load_kernels(torch_with_cuda)
    _stridex._sanitizer_reset()
    yield torch_with_cuda
    torch_with_cuda.cuda.synchronize()
    _stridex._sanitizer_reset()


def recorded(fn):
    """Runs fn() with the sanitizer on; the StreamRaceWarning messages it gave."""
    with stridex.sanitize(), warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        fn()
    return [str(w.message) for w in record if issubclass(w.category, stridex.StreamRaceWarning)]


def test_no_sync_while_producer_busy(torch):
    x = torch.ones(N, device="cuda")
    side = torch.cuda.Stream()
    torch.cuda._sleep(SLEEP)  # the producer's stream (torch's current: the legacy default) is busy
    x.mul_(2)
    reports = recorded(lambda: stridex.view(x, stream=stridex.NO_SYNC))
    assert len(reports) == 1 and reports[0].startswith("stridex sanitizer: no_sync: handed over with stream=NO_SYNC")
    assert "producer torch.Tensor on legacy default stream" in reports[0]
    assert recorded(lambda: stridex.view(x, stream=side)) == []  # corrected: ordered on the consumer's stream
    torch.cuda.synchronize()
    assert recorded(lambda: stridex.view(x, stream=stridex.NO_SYNC)) == []  # corrected: nothing pending


def test_no_sync_export_while_view_busy(torch):
    side = torch.cuda.Stream()
    x = torch.ones(N, device="cuda")
    v = stridex.view(x, stream=side)
    with torch.cuda.stream(side):
        torch.cuda._sleep(SLEEP)
    reports = recorded(lambda: v.__dlpack__(stream=-1))
    assert len(reports) == 1 and "no ordering (stream=-1) while the View's stream" in reports[0]
    assert recorded(lambda: v.__dlpack__(stream=torch.cuda.current_stream().cuda_stream or 1)) == []
    side.synchronize()  # v is released idle (the sanitizer may stay on: STRIDEX_SANITIZE)


@pytest.fixture
def cupy(torch):
    """CuPy, whose memory pool takes no stream from stridex (docs/memory.md): its races are the
    sanitizer's to report."""
    cp = pytest.importorskip("cupy", reason="cupy is not installed")
    cp.ones(N, dtype=cp.float32) * 2  # CuPy's kernels loaded while idle (see load_kernels)
    cp.cuda.Device().synchronize()
    return cp


def test_reuse_after_release(torch, cupy):
    side = torch.cuda.Stream()

    def seeded(keep_until_read):
        holder = [cupy.ones(N, dtype=cupy.float32)]
        before = holder[0].data.ptr
        cupy.cuda.Device().synchronize()

        def hand_over():
            x = holder.pop()
            v = stridex.view(x, stream=side)  # the consumer reads on its side stream ...
            with torch.cuda.stream(side):
                torch.cuda._sleep(SLEEP)
                y = torch.from_dlpack(v) * 2  # ... behind a long kernel
            if keep_until_read:
                side.synchronize()  # the corrected program: the memory outlives the reads
            del v, x  # dropped while the side stream still reads it
            z = cupy.empty(N, dtype=cupy.float32)  # CuPy's pool's next block, on CuPy's stream
            holder.append((z.data.ptr, y, z))
            stridex.view(z)

        reports = recorded(hand_over)
        reused = holder[0][0] == before
        torch.cuda.synchronize()
        return reused, reports

    reused, reports = seeded(keep_until_read=False)
    assert reused, "CuPy's pool did not hand the block out again (the seeded race needs it)"
    assert [r for r in reports if r.startswith("stridex sanitizer: reuse_after_release")], reports
    text = next(r for r in reports if "reuse_after_release" in r)
    assert "earlier hand-over (owner released): stridex.view, producer cupy.ndarray" in text
    assert "this hand-over: stridex.view" in text and text.count("in hand_over") == 2
    reused, reports = seeded(keep_until_read=True)
    assert reports == []


def test_torchs_allocator_is_told_the_stream_so_nothing_races(torch):
    # The same program with torch's memory: stridex records the side stream with torch's allocator
    # at the hand-over (handover.hpp), so the block is not handed out again and nothing is reported.
    side = torch.cuda.Stream()
    x = torch.ones(N, device="cuda")
    before = x.data_ptr()

    def hand_over():
        nonlocal x
        v = stridex.view(x, stream=side)
        with torch.cuda.stream(side):
            torch.cuda._sleep(SLEEP)
            y = torch.from_dlpack(v) * 2
        del v, x
        z = torch.empty(N, device="cuda")
        assert z.data_ptr() != before, "torch reused the block while the side stream reads it"
        assert not side.query()
        stridex.view(z)
        hand_over.kept = (y, z)

    assert recorded(hand_over) == []
    torch.cuda.synchronize()
    assert torch.equal(hand_over.kept[0], torch.full((N,), 2.0, device="cuda"))


def test_release_with_pending_consumer_work(torch, cupy):
    side = torch.cuda.Stream()

    def seeded(wait):
        def hand_over():
            v = stridex.view(cupy.ones(N, dtype=cupy.float32), stream=side)  # the View holds the only reference
            with torch.cuda.stream(side):
                torch.cuda._sleep(SLEEP)
                torch.from_dlpack(v).mul_(2)
            if wait:
                side.synchronize()  # the corrected program
            del v  # the array goes back to CuPy's pool, which knows nothing of `side`

        return recorded(hand_over)

    reports = seeded(wait=False)
    assert len(reports) == 1 and reports[0].startswith("stridex sanitizer: release_pending: View released")
    assert "hand-over: stridex.view, producer cupy.ndarray" in reports[0]
    torch.cuda.synchronize()
    assert seeded(wait=True) == []

    # torch's allocator was told the stream: the same release of a torch tensor is no race
    def torch_hand_over():
        v = stridex.view(torch.ones(N, device="cuda"), stream=side)
        with torch.cuda.stream(side):
            torch.cuda._sleep(SLEEP)
            torch.from_dlpack(v).mul_(2)
        del v

    assert recorded(torch_hand_over) == []


def test_raise_mode_on_gpu(torch):
    torch.cuda._sleep(SLEEP)
    x = torch.ones(N, device="cuda")
    with stridex.sanitize(raise_=True), pytest.raises(stridex.StreamRaceError, match="no_sync"):
        stridex.view(x, stream=stridex.NO_SYNC)


@pytest.mark.parametrize("memory", ["torch", "pool"])
def test_ipc_view_used_before_its_event(torch, memory):
    import ipc_harness
    import sanitizer_gpu_worker

    if memory == "pool":  # stridex's own pool memory travels as the pool's fd (docs/distributed.md)
        stridex.empty(1, "uint8", device="cuda")
        if not stridex.memory_stats(device=0)["shareable"]:
            pytest.skip("this driver made stridex's pool without a shareable handle")
    w = ipc_harness.Worker(sanitizer_gpu_worker.serve, timeout=60)
    try:
        # The worker's CUDA context, torch and its first IPC import before the race: those take
        # longer than the sleep the first time.
        assert w("ordered", stridex.view(torch.ones(N, device="cuda"))) == []
        if memory == "torch":
            x = torch.zeros(N, device="cuda")
            v = stridex.view(x)
        else:
            v = stridex.empty(N, "float32", device="cuda")
            x = torch.from_dlpack(v)
        torch.cuda.synchronize()
        torch.cuda._sleep(4 * SLEEP)  # ~2 s: the pickle, the worker's unpickle and its use fall inside
        x.fill_(3.0)  # the producer's write, behind the kernel: the event sent with v follows it
        reports = w("no_sync", v)  # pickled while the kernel runs
        assert [r for r in reports if r.startswith("stridex sanitizer: ipc_unwaited")], reports
        torch.cuda.synchronize()
        torch.cuda._sleep(4 * SLEEP)
        x.fill_(4.0)
        assert w("ordered", v) == []  # the corrected program: used on a stream, ordered after the event
    finally:
        w.stop()
        w.process.join(timeout=60)


def test_the_driver_answers_pending(torch):
    # the real stream query, no test seam: a busy stream, then an idle one
    side = torch.cuda.Stream()
    x = torch.ones(N, device="cuda")
    v = stridex.view(x, stream=side)
    with torch.cuda.stream(side):
        torch.cuda._sleep(SLEEP)
    assert recorded(lambda: stridex.view(v, stream=stridex.NO_SYNC))
    side.synchronize()
    assert recorded(lambda: stridex.view(v, stream=stridex.NO_SYNC)) == []
