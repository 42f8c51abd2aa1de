"""The contracts at the boundaries, on a GPU, each through at least two frameworks' own APIs:

- memory handed to a stream stridex was told about (an export with a stream, an import for a stream,
  a copy) is never handed to another stream while that stream may still read it: stridex's pool
  orders the free after it, and torch's caching allocator is told of it when stridex's last
  reference to the tensor goes;
- a graph that captured stridex calls launches any number of times whatever API instantiated it
  (CuPy, raw CUDA with flags 0, torch), its kept results rewritten by every launch; capture/launch/
  destroy cycles leave the memory where it started; the interpreter exits cleanly after a failed
  and a successful capture;
- a producer that deletes its array while a View of it lives (JAX on the GPU) does not abort.

Every stream test holds the reading stream busy with a sleeping kernel and asserts the host call
returned while it slept. Skips without a CUDA GPU."""

from __future__ import annotations

import ctypes
import gc
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import stridex
from export_support import cuda_device_count, torch_and_cupy

if cuda_device_count() == 0:
    pytest.skip("no CUDA GPU (these contracts are about CUDA streams and graphs)", allow_module_level=True)

torch, cupy, needs_torch, needs_cupy = torch_and_cupy()

N = 1 << 22  # 16 MiB of int32: the reading kernel is still queued when the next writer comes
SLEEP_CYCLES = 1_000_000_000  # about half a second on an H200
rng = np.random.default_rng(33)
_libcuda = ctypes.CDLL("libcuda.so.1")


def busy(stream) -> bool:
    return not stream.query()


def filled(value: int):
    buf = stridex.empty((N,), "int32", device="cuda:0")
    torch.from_dlpack(buf).fill_(value)
    torch.cuda.synchronize()
    return buf


MARKER = None


def overwrite_on(stream):
    """A new allocation on `stream` (another stream than the reader's), written at once with -1."""
    with torch.cuda.stream(stream):
        return stridex.view(MARKER, stream=stream).contiguous(stream=stream)


@pytest.fixture(autouse=True)
def _marker():
    global MARKER
    if torch is not None and torch.cuda.is_available():
        MARKER = torch.full((N,), -1, dtype=torch.int32, device="cuda")
        torch.cuda.synchronize()
    yield
    MARKER = None


# ---- 1. no reuse while an announced stream may read --------------------------------------------


@needs_torch
@pytest.mark.parametrize("door", ["torch.from_dlpack (View.__dlpack__(stream=A))", "stridex.view(buf, stream=A)"])
def test_pool_memory_is_not_reused_while_the_announced_stream_reads(door):
    a, b = torch.cuda.Stream(), torch.cuda.Stream()
    buf = filled(7)
    out = torch.empty(N, dtype=torch.int32, device="cuda")
    with torch.cuda.stream(a):
        torch.cuda._sleep(SLEEP_CYCLES)
        source = torch.from_dlpack(buf) if door.startswith("torch") else torch.from_dlpack(stridex.view(buf, stream=a))
        out.copy_(source)
    del source, buf  # the last reference: the pool frees the block
    t0 = time.perf_counter()
    fresh = overwrite_on(b)  # without the ordering, the pool hands b the same block now
    assert busy(a), "the host waited for the reader"
    assert time.perf_counter() - t0 < 0.25
    torch.cuda.synchronize()
    assert torch.equal(out, torch.full((N,), 7, dtype=torch.int32, device="cuda"))
    assert torch.equal(torch.from_dlpack(fresh), torch.full((N,), -1, dtype=torch.int32, device="cuda"))


@needs_torch
@needs_cupy
def test_pool_memory_read_by_cupy_on_its_stream_is_not_reused():
    a = cupy.cuda.Stream(non_blocking=True)
    b = torch.cuda.Stream()
    buf = filled(5)
    out = cupy.empty(N, dtype=cupy.int32)  # allocated first: a fresh cudaMalloc may synchronize the device
    cupy.cuda.Device().synchronize()
    with a:
        torch.cuda._sleep(1)  # make torch's context current
        sleeper = torch.cuda.ExternalStream(a.ptr)
        with torch.cuda.stream(sleeper):
            torch.cuda._sleep(SLEEP_CYCLES)
        src = cupy.from_dlpack(buf)  # CuPy asks __dlpack__(stream=a)
        cupy.copyto(out, src)
    del src, buf
    fresh = overwrite_on(b)
    assert a.done is False
    a.synchronize()
    torch.cuda.synchronize()
    assert int((out == 5).sum()) == N
    assert torch.equal(torch.from_dlpack(fresh), torch.full((N,), -1, dtype=torch.int32, device="cuda"))


@needs_torch
def test_a_torch_tensor_handed_to_another_stream_is_recorded_with_torchs_allocator():
    a = torch.cuda.Stream()
    t = torch.full((N,), 9, dtype=torch.int32, device="cuda")  # allocated on the current stream
    torch.cuda.synchronize()
    out = torch.empty(N, dtype=torch.int32, device="cuda")
    with torch.cuda.stream(a):
        torch.cuda._sleep(SLEEP_CYCLES)
        v = stridex.view(t, stream=a)  # the hand-over names stream a
        out.copy_(torch.from_dlpack(v))
    del v, t  # torch's block goes back to its pool: stridex told torch's allocator of stream a
    again = torch.full((N,), -1, dtype=torch.int32, device="cuda")
    assert busy(a)
    torch.cuda.synchronize()
    assert torch.equal(out, torch.full((N,), 9, dtype=torch.int32, device="cuda"))
    assert int(again.sum()) == -N


@needs_torch
@needs_cupy
def test_a_torch_tensor_handed_to_a_cupy_stream_that_goes_first_is_released_safely():
    # torch's allocator is told of the CuPy stream when stridex's last reference goes (through a
    # private torch stream), never by record_stream on the CuPy stream itself, which would crash at
    # the tensor's free once that stream is destroyed.
    t = torch.full((N,), 4, dtype=torch.int32, device="cuda")
    torch.cuda.synchronize()
    s = cupy.cuda.Stream(non_blocking=True)
    v = stridex.view(t, stream=s)
    with s:
        out = cupy.from_dlpack(v).copy()
    s.synchronize()
    del v
    del s  # the consumer's stream is destroyed first
    gc.collect()
    del t
    torch.cuda.synchronize()
    again = torch.empty(N, dtype=torch.int32, device="cuda")
    assert int((out == 4).sum()) == N
    del again


@needs_torch
@needs_cupy
def test_a_torch_tensor_exported_to_a_bare_stream_handle_that_goes_first_is_released_safely():
    # cupy.from_dlpack sends __dlpack__(stream=<int>): a stream stridex cannot keep alive, so
    # torch's allocator is not told of it (it would order after a destroyed stream at the release).
    t = torch.full((N,), 6, dtype=torch.int32, device="cuda")
    torch.cuda.synchronize()
    v = stridex.view(t)
    s = cupy.cuda.Stream(non_blocking=True)
    with s:
        out = cupy.from_dlpack(v).copy()
    s.synchronize()
    del s
    gc.collect()
    del v, t
    torch.cuda.synchronize()
    assert int((out == 6).sum()) == N


@needs_torch
@needs_cupy
def test_a_torch_tensor_released_inside_a_capture_of_its_consumer_stream_is_told_after_it():
    # The last reference goes while the consumer's stream captures: ordering a stream outside the
    # capture after it then would break the capture, so torch's allocator is told once the capture
    # ended (at the next import of a torch tensor), and until then the tensor is kept.
    t = torch.full((N,), 5, dtype=torch.int32, device="cuda")
    ptr = t.data_ptr()
    torch.cuda.synchronize()
    cs = cupy.cuda.Stream(non_blocking=True)
    y = cupy.zeros(N, dtype=cupy.int32)
    v = stridex.view(t, stream=cs)
    del t
    with cs:
        cs.begin_capture()
        try:
            x = cupy.from_dlpack(v)
            cupy.multiply(x, 2, out=y)
            del x, v  # stridex's last reference to the tensor goes inside the capture
        finally:
            graph = cs.end_capture()
    for _ in range(3):
        graph.launch(stream=cs)
    cs.synchronize()
    assert int((y == 10).sum()) == N
    kept = torch.empty(N, dtype=torch.int32, device="cuda")
    assert kept.data_ptr() != ptr, "torch reused the tensor's block before its release was ordered"
    stridex.view(torch.zeros(1, device="cuda"), stream=torch.cuda.Stream())  # the deferred release runs
    torch.cuda.synchronize()
    del graph, kept


@needs_torch
def test_a_torch_tensor_made_from_pool_memory_is_found_by_address():
    a, b = torch.cuda.Stream(), torch.cuda.Stream()
    buf = filled(3)
    as_torch = torch.from_dlpack(buf)  # torch's tensor owns the View now
    del buf
    out = torch.empty(N, dtype=torch.int32, device="cuda")
    with torch.cuda.stream(a):
        torch.cuda._sleep(SLEEP_CYCLES)
        out.copy_(torch.from_dlpack(stridex.view(as_torch, stream=a)))
    del as_torch
    fresh = overwrite_on(b)
    assert busy(a)
    torch.cuda.synchronize()
    assert torch.equal(out, torch.full((N,), 3, dtype=torch.int32, device="cuda"))
    del fresh


# ---- 2. graphs that relaunch under every API ------------------------------------------------------

M = 512


def expected_transpose(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(x.T) * 2


@needs_cupy
@pytest.mark.parametrize("keep", [True, False], ids=["result kept", "result dropped inside"])
def test_a_cupy_graph_relaunches(keep):
    x = cupy.zeros((M, M), dtype=cupy.float32)
    y = cupy.zeros((M, M), dtype=cupy.float32)
    cs = cupy.cuda.Stream(non_blocking=True)
    cupy.cuda.Device().synchronize()
    kept = None
    with cs:
        cs.begin_capture()
        try:
            r = stridex.view(x.T, stream=cs).contiguous(stream=cs)
            cupy.multiply(cupy.from_dlpack(r), 2, out=y)
            if keep:
                kept = r
            del r
        finally:
            graph = cs.end_capture()
    for _ in range(100):
        host = rng.standard_normal((M, M)).astype(np.float32)
        x.set(host, stream=cs)
        graph.launch(stream=cs)
        cs.synchronize()
        np.testing.assert_array_equal(y.get(), expected_transpose(host))
        if keep:  # the graph's memory: every launch rewrites it
            np.testing.assert_array_equal(np.from_dlpack(kept.to("cpu")), np.ascontiguousarray(host.T))
    del graph, kept


class Driver:
    """The CUDA driver through ctypes: capture, instantiate with flags 0, launch, destroy."""

    def __init__(self):
        self.lib = _libcuda

    def __call__(self, name, *args):
        r = getattr(self.lib, name)(*args)
        assert r == 0, f"{name} returned {r}"


@needs_torch
def test_a_raw_cuda_graph_instantiated_with_flags_0_relaunches():
    cu = Driver()
    stream = torch.cuda.Stream()
    h = stream.cuda_stream
    x = torch.zeros((M, M), device="cuda")
    y = torch.zeros((M, M), device="cuda")
    torch.cuda.synchronize()
    graph, exe = ctypes.c_void_p(), ctypes.c_void_p()
    cu("cuStreamBeginCapture_v2", ctypes.c_void_p(h), 0)  # CU_STREAM_CAPTURE_MODE_GLOBAL
    try:
        r = stridex.view(x.T, stream=h).contiguous(stream=h)
        stridex.copy(y, r, stream=h)
        del r
    finally:
        cu("cuStreamEndCapture", ctypes.c_void_p(h), ctypes.byref(graph))
    cu("cuGraphInstantiateWithFlags", ctypes.byref(exe), graph, ctypes.c_ulonglong(0))
    for _ in range(100):
        host = rng.standard_normal((M, M)).astype(np.float32)
        x.copy_(torch.from_numpy(host))
        torch.cuda.synchronize()
        cu("cuGraphLaunch", exe, ctypes.c_void_p(h))
        cu("cuStreamSynchronize", ctypes.c_void_p(h))
        np.testing.assert_array_equal(y.cpu().numpy(), np.ascontiguousarray(host.T))
    cu("cuGraphExecDestroy", exe)
    cu("cuGraphDestroy", graph)


@needs_torch
def test_a_torch_graph_keeps_its_result_and_relaunches():
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    x = torch.zeros((M, M), device="cuda")
    torch.cuda.synchronize()
    with torch.cuda.graph(g, stream=s):
        r = stridex.view(x.T).contiguous(stream=s.cuda_stream)
    for _ in range(100):
        host = rng.standard_normal((M, M)).astype(np.float32)
        x.copy_(torch.from_numpy(host))
        g.replay()
        torch.cuda.synchronize()
        np.testing.assert_array_equal(np.from_dlpack(r.to("cpu")), np.ascontiguousarray(host.T))


def free_memory() -> int:
    free, total = ctypes.c_size_t(), ctypes.c_size_t()
    assert _libcuda.cuMemGetInfo_v2(ctypes.byref(free), ctypes.byref(total)) == 0
    return free.value


@needs_cupy
def test_capture_launch_destroy_cycles_leave_memory_where_it_started():
    x = cupy.zeros((M, M), dtype=cupy.float32)
    cs = cupy.cuda.Stream(non_blocking=True)

    def cycle():
        with cs:
            cs.begin_capture()
            try:
                r = stridex.view(x.T, stream=cs).contiguous(stream=cs)
                kept = r.contiguous(stream=cs)  # a temporary, and a result kept past the capture
                del r
            finally:
                graph = cs.end_capture()
        graph.launch(stream=cs)
        cs.synchronize()
        del graph, kept

    for _ in range(10):  # warm up: the pool keeps what it cached
        cycle()
    cupy.cuda.Device().synchronize()
    time.sleep(0.2)  # the driver releases a graph's user objects on its own thread
    start_pool, start_free = stridex.memory_stats(0)["in_use"], free_memory()
    for _ in range(1000):
        cycle()
    cupy.cuda.Device().synchronize()
    deadline = time.time() + 5
    while stridex.memory_stats(0)["in_use"] != start_pool and time.time() < deadline:
        time.sleep(0.05)
        stridex.view(np.zeros(1))  # any call lets the pending releases drain
    assert stridex.memory_stats(0)["in_use"] == start_pool
    assert abs(free_memory() - start_free) <= 64 << 20


EXIT_SCRIPT = textwrap.dedent(
    """
    import ctypes, numpy as np, torch, cupy, stridex
    x = cupy.zeros((256, 256), dtype=cupy.float32)
    cs = cupy.cuda.Stream(non_blocking=True)
    with cs:
        cs.begin_capture()
        try:
            r = stridex.view(x.T, stream=cs).contiguous(stream=cs)
            try:
                stridex.view(np.zeros(4)).to("cuda:0", stream=cs)  # refused: pageable memory in a capture
            except RuntimeError:
                pass
        finally:
            g1 = cs.end_capture()
    g1.launch(stream=cs); g1.launch(stream=cs); cs.synchronize()
    g = torch.cuda.CUDAGraph(); s = torch.cuda.Stream()
    t = torch.zeros((256, 256), device="cuda"); torch.cuda.synchronize()
    with torch.cuda.graph(g, stream=s):
        kept = stridex.view(t.T).contiguous(stream=s.cuda_stream)
    g.replay(); torch.cuda.synchronize()
    print("ok")
    """
)


@needs_torch
@needs_cupy
def test_the_interpreter_exits_cleanly_with_graphs_pools_and_views_alive():
    proc = subprocess.run([sys.executable, "-c", EXIT_SCRIPT], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().endswith("ok")


# ---- 3. a producer deletes its array --------------------------------------------------------------


def test_jax_deletes_an_array_a_view_holds_on_the_gpu(jax_gpu):
    jax, gpu = jax_gpu
    y = jax.device_put(np.arange(1024.0, dtype=np.float32), gpu)
    v = stridex.view(y)
    consumer = np.from_dlpack(v.to("cpu"))
    y.delete()  # jaxlib keeps the buffer for its external reference, as for its own __dlpack__
    np.testing.assert_array_equal(np.from_dlpack(v.to("cpu")), np.arange(1024.0, dtype=np.float32))
    np.testing.assert_array_equal(consumer, np.arange(1024.0, dtype=np.float32))
