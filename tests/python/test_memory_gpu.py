"""stridex's stream-ordered pools on a GPU (docs/memory.md): a release never waits for another
stream, reuse across streams keeps the order, the same block comes back, out of memory leaves the
pool usable, graph capture, pinned results, and allocator='torch' / 'cupy' / 'rmm'; the host paths:
a reused cpu result page-locked and moved directly, strided pageable memory both ways, each ordered
after a sleeping producer and exact."""

from __future__ import annotations

import gc
import importlib.util
import time

import pytest

import stridex

pytestmark = pytest.mark.skipif(not stridex.cuda_available(), reason="needs a CUDA GPU")
torch = pytest.importorskip("torch") if stridex.cuda_available() else None

SLEEP_CYCLES = 2_000_000_000  # ~1 s on current GPUs: far longer than any host-side step below


def _sync() -> None:
    torch.cuda.synchronize()
    # A torch block that stridex recorded another stream for (record_stream at a hand-over) counts
    # as allocated until torch next looks at that stream's event; empty_cache does.
    torch.cuda.empty_cache()


def test_dropping_a_result_returns_at_once_while_another_stream_is_busy():
    x = torch.rand(4096, 4096, device="cuda")
    r = stridex.view(x).T.contiguous()
    _sync()
    other = torch.cuda.Stream()
    with torch.cuda.stream(other):
        torch.cuda._sleep(SLEEP_CYCLES)
    t = time.perf_counter()
    del r
    elapsed = time.perf_counter() - t
    busy = not other.query()
    other.synchronize()
    assert busy, "the sleeping stream finished before the check: the release waited for it"
    assert elapsed < 0.005, f"releasing took {elapsed * 1e3:.2f} ms"


def test_reuse_on_another_stream_never_overtakes_an_earlier_reader():
    n = 1 << 22
    a, b = torch.cuda.Stream(), torch.cuda.Stream()
    ones = stridex.view(torch.ones(n, device="cuda"))
    twos = stridex.view(torch.full((n,), 2.0, device="cuda"))
    out = torch.zeros(n, device="cuda")
    _sync()
    src = stridex.empty((n,), "float32", device="cuda:0", stream=a.cuda_stream)
    stridex.copy(src, ones, stream=a.cuda_stream)
    with torch.cuda.stream(a):
        torch.cuda._sleep(SLEEP_CYCLES // 4)  # the reader below is held back by this kernel
    stridex.copy(out, src, stream=a.cuda_stream)
    old = src.ptr
    del src  # freed on stream a, after the read
    fresh = stridex.empty((n,), "float32", device="cuda:0", stream=b.cuda_stream)
    stridex.copy(fresh, twos, stream=b.cuda_stream)  # a writer on stream b
    _sync()
    assert bool((out == 1).all()), "a later writer on another stream overwrote memory an earlier reader still read"
    print(f"reused the block: {fresh.ptr == old}")


def test_a_copy_on_another_stream_orders_the_release_after_it():
    n = 1 << 22
    a, b = torch.cuda.Stream(), torch.cuda.Stream()
    src = stridex.empty((n,), "float32", device="cuda:0", stream=a.cuda_stream)
    # Named, not temporaries: torch would hand a dropped tensor's block to the next allocation on
    # its own stream while stream a still reads it (the race test_sanitizer_gpu seeds on purpose).
    ones, threes = torch.ones(n, device="cuda"), torch.full((n,), 3.0, device="cuda")
    stridex.copy(src, stridex.view(ones), stream=a.cuda_stream)
    out = torch.zeros(n, device="cuda")
    _sync()
    with torch.cuda.stream(b):
        torch.cuda._sleep(SLEEP_CYCLES // 4)
    stridex.copy(out, src, stream=b.cuda_stream)  # read on b, not on src's allocation stream a
    del src
    again = stridex.empty((n,), "float32", device="cuda:0", stream=a.cuda_stream)
    stridex.copy(again, stridex.view(threes), stream=a.cuda_stream)
    _sync()
    assert bool((out == 1).all())
    del ones, threes


def test_the_same_block_comes_back_on_reuse():
    s = torch.cuda.Stream()
    v = stridex.empty((1 << 20,), "uint8", device="cuda:0", stream=s.cuda_stream)
    ptr = v.ptr
    del v
    w = stridex.empty((1 << 20,), "uint8", device="cuda:0", stream=s.cuda_stream)
    assert w.ptr == ptr


def test_memory_stats_count_in_use_and_empty_cache_returns_the_cache():
    before = stridex.memory_stats(0)
    v = stridex.empty((64 << 20,), "uint8", device="cuda:0")
    during = stridex.memory_stats("cuda:0")
    assert during["in_use"] == before["in_use"] + (64 << 20)
    assert during["reserved"] >= during["in_use"] and during["peak_in_use"] >= during["in_use"]
    assert during["created"] and during["device"] == "cuda:0"
    del v
    _sync()
    assert stridex.memory_stats(0)["in_use"] == before["in_use"]
    stridex.empty_cache(0)
    assert stridex.memory_stats(0)["reserved"] < during["reserved"]
    print("pool:", stridex.memory_stats(0))


def test_out_of_memory_names_device_bytes_and_pool_and_the_pool_stays_usable():
    asked = 1 << 50
    with pytest.raises(MemoryError, match=rf"cuda:0: out of memory allocating {asked} bytes \(stridex's pool holds"):
        stridex.empty((asked,), "uint8", device="cuda:0")
    before = stridex.memory_stats(0)["in_use"]
    v = stridex.empty((1 << 20,), "uint8", device="cuda:0")
    stridex.copy(v, stridex.view(torch.ones(1 << 20, dtype=torch.uint8, device="cuda")))
    assert int(torch.from_dlpack(v).sum()) == 1 << 20
    del v
    assert stridex.memory_stats(0)["in_use"] == before


def test_an_allocation_on_a_capturing_stream_is_memory_the_graph_keeps():
    x = torch.arange(256 * 512, dtype=torch.float32, device="cuda").reshape(256, 512)
    # A View with no pending stream: the copy waits for nothing outside the capture, so only the
    # allocation is under test here.
    src = stridex.from_pointer(x.data_ptr(), (256, 512), "float32", device="cuda:0", owner=x)
    _sync()
    in_use = stridex.memory_stats(0)["in_use"]
    s = torch.cuda.Stream()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.stream(s):
        with torch.cuda.graph(g, stream=s):
            out = src.T.contiguous(stream=s.cuda_stream)
    # A block of the pool (docs/memory.md), allocated outside the graph: no allocation node
    assert stridex.memory_stats(0)["in_use"] == in_use + 256 * 512 * 4
    x.mul_(2)
    g.replay()
    _sync()
    assert torch.equal(torch.from_dlpack(out), x.T)
    del out  # the graph keeps it ...
    assert stridex.memory_stats(0)["in_use"] == in_use + 256 * 512 * 4
    del g  # ... until it is destroyed
    gc.collect()
    _sync()
    deadline = time.time() + 5
    while stridex.memory_stats(0)["in_use"] != in_use and time.time() < deadline:
        time.sleep(0.01)  # the driver releases the graph's user objects on its own thread
    assert stridex.memory_stats(0)["in_use"] == in_use


def test_pinned_results_come_from_the_pinned_pool():
    x = torch.arange(1 << 20, dtype=torch.float32, device="cuda")
    h = stridex.view(x).to("cuda_host")
    ptr = h.ptr
    assert stridex.memory_stats("cuda_host")["in_use"] >= 4 << 20
    torch.cuda.synchronize()
    del h
    h2 = stridex.view(x).to("cuda_host")
    _sync()
    assert h2.ptr == ptr
    back = torch.empty_like(x)
    stridex.copy(back, h2, stream=stridex.NO_SYNC)
    assert torch.equal(back, x)


def test_allocator_torch_memory_is_torchs_and_returns_to_its_pool():
    x = stridex.view(torch.rand(1024, 1024, device="cuda"))
    _sync()
    before = torch.cuda.memory_allocated()
    r = x.T.contiguous(allocator="torch")
    assert torch.cuda.memory_allocated() >= before + (4 << 20)
    assert torch.equal(torch.from_dlpack(r), torch.from_dlpack(x).T)
    del r
    gc.collect()
    assert torch.cuda.memory_allocated() == before
    with stridex.using_allocator("torch"):
        e = stridex.empty((1 << 20,), "uint8", device="cuda:0")
        assert torch.cuda.memory_allocated() >= before + (1 << 20)
    del e
    t = torch.empty(10, device="cuda")
    r2 = stridex.view(torch.rand(64, 64, device="cuda")).T.contiguous(like=t)
    assert torch.cuda.memory_allocated() > before
    del r2


@pytest.mark.skipif(importlib.util.find_spec("cupy") is None, reason="needs CuPy")
def test_allocator_cupy_memory_is_cupys_and_returns_to_its_pool():
    import cupy

    pool = cupy.get_default_memory_pool()
    x = stridex.view(torch.rand(1024, 1024, device="cuda"))
    _sync()
    before = pool.used_bytes()
    r = x.T.contiguous(allocator="cupy")
    assert pool.used_bytes() >= before + (4 << 20)
    assert torch.equal(torch.from_dlpack(r), torch.from_dlpack(x).T)
    del r
    gc.collect()
    assert pool.used_bytes() == before


@pytest.mark.skipif(importlib.util.find_spec("rmm") is None, reason="needs RMM (not installed on this machine)")
def test_allocator_rmm_allocates_from_rmms_resource_and_returns_to_it():
    import rmm
    import rmm.statistics

    previous = rmm.mr.get_current_device_resource()
    rmm.statistics.enable_statistics()  # a statistics adaptor over RMM's current resource
    try:
        x = stridex.view(torch.rand(512, 512, device="cuda"))
        before = rmm.statistics.get_statistics()
        r = x.T.contiguous(allocator="rmm")
        during = rmm.statistics.get_statistics()
        assert during.current_bytes >= before.current_bytes + 512 * 512 * 4  # RMM's memory
        assert during.total_count == before.total_count + 1
        assert torch.equal(torch.from_dlpack(r), torch.from_dlpack(x).T)
        del r
        gc.collect()
        assert rmm.statistics.get_statistics().current_bytes == before.current_bytes  # returned to RMM
    finally:
        rmm.mr.set_current_device_resource(previous)


# ---- host <-> device paths at pinned speed (docs/memory.md, "Host memory") ------------------------


def _produced_late(values):
    """A GPU tensor written with `values` on its own stream behind a sleeping kernel, and a View of it
    that records that stream."""
    producer = torch.cuda.Stream()
    out = torch.full_like(values, -7)
    _sync()
    with torch.cuda.stream(producer):
        torch.cuda._sleep(SLEEP_CYCLES // 2)
        out.copy_(values)  # written only after the sleep
    return producer, out, stridex.view(out)._with_stream(producer.cuda_stream)


def test_a_reused_cpu_result_is_page_locked_waits_for_its_producer_and_is_complete():
    np = pytest.importorskip("numpy")
    n = 1 << 22  # 16 MiB
    expected = torch.arange(n, dtype=torch.float32, device="cuda")
    stridex.empty_cache("cpu")
    producer, _, src = _produced_late(expected)
    r = src.to("cpu")
    assert r.stream is None, "a copy into a cpu result completes before returning"
    assert producer.query(), "the copy returned before the producer's work it waited for"
    np.testing.assert_array_equal(np.from_dlpack(r), np.arange(n, dtype=np.float32))
    assert stridex.memory_stats("cpu")["registered"] == 0, "a fresh block's first copy is staged"
    ptr = r.ptr
    del r
    producer, _, src = _produced_late(expected * 2)
    r2 = src.to("cpu")  # the same block again: page-locked now, moved by the DMA engine directly
    assert r2.ptr == ptr
    assert r2.stream is None
    assert producer.query()
    assert stridex.memory_stats("cpu")["registered"] >= 4 * n
    np.testing.assert_array_equal(np.from_dlpack(r2), np.arange(n, dtype=np.float32) * 2)
    # From the block back to the GPU: direct, exact, and the block was read before returning.
    back = torch.zeros(n, device="cuda")
    stridex.copy(back, r2, stream=torch.cuda.Stream().cuda_stream)
    _sync()
    assert torch.equal(back, expected * 2)
    del r2
    stridex.empty_cache("cpu")
    assert stridex.memory_stats("cpu")["registered"] == 0


@pytest.mark.parametrize("layout", ["column block", "every other row"])
@pytest.mark.parametrize("setting", ["", "stage_mib=4,stages=8,threads=5,pack_streaming=1", "streaming=0"])
def test_strided_pageable_both_ways_exact_and_ordered(layout, setting, monkeypatch):
    np = pytest.importorskip("numpy")
    if setting:
        monkeypatch.setenv("STRIDEX_HOST_COPY", setting)
    rows, cols = 2048, 3072  # 24 MiB of float32 host memory
    host = np.zeros((rows, cols), dtype=np.float32)
    part = host[:, : cols // 2] if layout == "column block" else host[::2]
    expected = torch.arange(part.size, dtype=torch.float32, device="cuda").reshape(part.shape)
    producer, _, src = _produced_late(expected)
    stridex.copy(part, src, stream=torch.cuda.Stream().cuda_stream)
    assert producer.query(), "the copy into pageable memory returned before its producer finished"
    np.testing.assert_array_equal(part, expected.cpu().numpy())
    rest = host[:, cols // 2 :] if layout == "column block" else host[1::2]
    assert not rest.any(), "the copy wrote outside the strided destination"
    # To the GPU: into a tensor another stream still writes first (behind a sleep); the copy must
    # come after that writer.
    part[...] = np.arange(part.size, dtype=np.float32).reshape(part.shape)[::-1]
    target_stream = torch.cuda.Stream()
    target = torch.empty(part.shape, dtype=torch.float32, device="cuda")
    _sync()
    with torch.cuda.stream(target_stream):
        torch.cuda._sleep(SLEEP_CYCLES // 2)
        target.fill_(-5)
    dst = stridex.view(target)._with_stream(target_stream.cuda_stream)
    stridex.copy(dst, part, stream=torch.cuda.Stream().cuda_stream)
    part[...] = 0  # the source was read before returning
    _sync()
    assert torch.equal(
        target.cpu(), torch.from_numpy(np.arange(part.size, dtype=np.float32).reshape(part.shape)[::-1].copy())
    )
