"""CUDA graphs (docs/graphs.md) on a GPU: every hand-over, copy and extension call stridex makes inside
a captured graph, replayed REPLAYS times with the inputs changed in place between replays (host-side
random numbers) and every result checked; the capture status checked after each step; the refusals
(a clear RuntimeError, the capture still valid and the graph still replaying afterwards); owners
kept alive by the graph after every Python reference is dropped, and released once the graph goes.
Under torch.cuda.graph and under CuPy's own capture API. Skips without a CUDA GPU."""

from __future__ import annotations

import ctypes
import gc
import shutil
import time
import weakref

import numpy as np
import pytest

import stridex
from export_support import cuda_device_count, torch_and_cupy

if cuda_device_count() == 0:
    pytest.skip("no CUDA GPU (CUDA graphs are captured on GPU machines)", allow_module_level=True)

torch, cupy, needs_torch, needs_cupy = torch_and_cupy()

REPLAYS = 100
N = 4096
rng = np.random.default_rng(26)

_libcuda = ctypes.CDLL("libcuda.so.1")


def capture_status(handle: int) -> int:
    """cuStreamIsCapturing: 0 none, 1 active, 2 invalidated (the driver's own answer)."""
    status = ctypes.c_int(-1)
    r = _libcuda.cuStreamIsCapturing(ctypes.c_void_p(handle), ctypes.byref(status))
    assert r == 0, f"cuStreamIsCapturing returned {r}"
    return status.value


def assert_capturing(handle: int) -> None:
    assert capture_status(handle) == 1, "the capture is no longer active (invalidated?)"


def host(shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


# ---- torch: capture helper ---------------------------------------------------------------------


class TorchCapture:
    """torch.cuda.graph on a side stream; `step()` checks the capture after each step. The capture is
    ended by the context manager in every case (the guide's `finally`)."""

    def __init__(self):
        self.graph = torch.cuda.CUDAGraph()
        self.stream = torch.cuda.Stream()

    def __enter__(self):
        torch.cuda.synchronize()
        self._ctx = torch.cuda.graph(self.graph, stream=self.stream)
        self._ctx.__enter__()
        return self

    def __exit__(self, *exc):
        return self._ctx.__exit__(*exc)

    @property
    def handle(self) -> int:
        return self.stream.cuda_stream

    def step(self):
        assert_capturing(self.handle)

    def replay(self):
        self.graph.replay()
        torch.cuda.synchronize()


def replay_checked(cap: TorchCapture, update, check):
    for _ in range(REPLAYS):
        expected = update()
        cap.replay()
        check(expected)


# ---- imports and exports with torch ---------------------------------------------------------------


@needs_torch
@pytest.mark.parametrize("request_kind", ["explicit stream", "default request"])
def test_torch_import_on_the_capturing_stream(request_kind):
    x = torch.zeros(N, device="cuda")
    y = torch.zeros(N, device="cuda")
    with TorchCapture() as cap:
        v = stridex.view(x, stream=cap.stream) if request_kind == "explicit stream" else stridex.view(x)
        cap.step()
        # The default request while torch's current stream captures means that stream (docs/graphs.md).
        assert v.stream == cap.handle
        y.copy_(torch.from_dlpack(v) * 2 + 1)
        cap.step()

    def update():
        h = host(N)
        x.copy_(torch.from_numpy(h))
        return h * 2 + 1

    replay_checked(cap, update, lambda e: np.testing.assert_allclose(y.cpu().numpy(), e, rtol=1e-6))


@needs_torch
def test_export_to_torch_of_a_view_imported_before_the_capture():
    # The View's data is ready on another stream, before the capture began: the graph waits for it
    # as an external event (CUDA_ERROR_STREAM_CAPTURE_ISOLATION, once).
    other = torch.cuda.Stream()
    x = torch.zeros(N, device="cuda")
    v = stridex.view(x, stream=other)
    y = torch.zeros(N, device="cuda")
    with TorchCapture() as cap:
        t = torch.from_dlpack(v)  # v.__dlpack__(stream=<the capturing stream>)
        cap.step()
        y.copy_(t - 3)
        cap.step()

    def update():
        h = host(N)
        x.copy_(torch.from_numpy(h))
        return h - 3

    replay_checked(cap, update, lambda e: np.testing.assert_allclose(y.cpu().numpy(), e, rtol=1e-6))


@needs_torch
@needs_cupy
def test_torch_to_cupy_and_back_inside_a_torch_capture():
    x = torch.zeros(N, device="cuda")
    y = torch.zeros(N, device="cuda")
    c2 = cupy.zeros(N, dtype=cupy.float32)
    with TorchCapture() as cap:
        with cupy.cuda.ExternalStream(cap.handle):
            c = cupy.from_dlpack(stridex.view(x))  # torch -> CuPy, on the capturing stream
            cap.step()
            cupy.multiply(c, 3, out=c2)  # out=: CuPy's pool would cudaMalloc inside the capture
            cap.step()
            back = torch.from_dlpack(stridex.view(c2))  # CuPy -> torch
            cap.step()
        y.copy_(back + 1)
        cap.step()

    def update():
        h = host(N)
        x.copy_(torch.from_numpy(h))
        return h * 3 + 1

    replay_checked(cap, update, lambda e: np.testing.assert_allclose(y.cpu().numpy(), e, rtol=1e-6))


# ---- stridex.copy inside a torch capture ---------------------------------------------------------

LAYOUTS = {
    "contiguous": lambda t: t,
    "transposed": lambda t: t.T,
    "strided": lambda t: t[::2, 1::3],
}


@needs_torch
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("imported", ["before the capture", "inside the capture"])
def test_copy_device_to_device(layout, imported):
    base = torch.zeros(64, 96, device="cuda")
    src_t = LAYOUTS[layout](base)
    dst_t = torch.zeros(src_t.shape, device="cuda")
    if imported == "before the capture":
        src, dst = stridex.view(src_t), stridex.view(dst_t)
    with TorchCapture() as cap:
        if imported == "inside the capture":
            src, dst = stridex.view(src_t, stream=cap.stream), stridex.view(dst_t, stream=cap.stream)
        stridex.copy(dst, src, stream=cap.stream)
        cap.step()

    def update():
        h = host((64, 96))
        base.copy_(torch.from_numpy(h))
        return LAYOUTS[layout](h)

    replay_checked(cap, update, lambda e: np.testing.assert_array_equal(dst_t.cpu().numpy(), e))


@needs_torch
def test_copy_from_pinned_host_memory():
    pinned = torch.zeros(N, pin_memory=True)
    dst_t = torch.zeros(N, device="cuda")
    with TorchCapture() as cap:
        stridex.copy(dst_t, pinned, stream=cap.stream)
        cap.step()

    def update():
        h = host(N)
        pinned.copy_(torch.from_numpy(h))  # the host writes the pinned buffer in place
        return h

    replay_checked(cap, update, lambda e: np.testing.assert_array_equal(dst_t.cpu().numpy(), e))


@needs_torch
def test_copy_default_request_runs_on_the_capturing_stream():
    x = torch.zeros(N, device="cuda")
    y = torch.zeros(N, device="cuda")
    with TorchCapture() as cap:
        stridex.copy(y, x)  # both imported with the default request: the capturing stream
        cap.step()

    def update():
        h = host(N)
        x.copy_(torch.from_numpy(h))
        return h

    replay_checked(cap, update, lambda e: np.testing.assert_array_equal(y.cpu().numpy(), e))


@needs_torch
@pytest.mark.parametrize("method", ["contiguous", "to", "copy"])
def test_contiguous_to_and_copy_with_graph_temporaries(method):
    # The fresh View's memory is a graph allocation (stream-ordered pool).
    base = torch.zeros(64, 96, device="cuda")
    y = torch.zeros(96, 64, device="cuda")
    with TorchCapture() as cap:
        v = stridex.view(base.T, stream=cap.stream)
        if method == "contiguous":
            fresh = v.contiguous(stream=cap.stream)
        elif method == "to":
            fresh = v.to("cuda:0", stream=cap.stream).contiguous(stream=cap.stream)
        else:
            fresh = v.copy(stream=cap.stream)
        cap.step()
        y.copy_(torch.from_dlpack(fresh))
        cap.step()

    def update():
        h = host((64, 96))
        base.copy_(torch.from_numpy(h))
        return h.T

    replay_checked(cap, update, lambda e: np.testing.assert_array_equal(y.cpu().numpy(), e))


# ---- refusals: a clear error, the capture still valid ----------------------------------------------


def _graph_still_replays(cap, x, y):
    def update():
        h = host(N)
        x.copy_(torch.from_numpy(h))
        return h + 1

    for _ in range(3):
        e = update()
        cap.replay()
        np.testing.assert_allclose(y.cpu().numpy(), e, rtol=1e-6)


@needs_torch
@pytest.mark.parametrize(
    "refused",
    [
        "copy into pageable memory",
        "copy from pageable memory",
        "export to a stream outside the capture",
    ],
)
def test_refusals_leave_the_capture_valid(refused):
    x = torch.zeros(N, device="cuda")
    y = torch.zeros(N, device="cuda")
    pageable = np.zeros(N, np.float32)
    outside = torch.cuda.Stream()
    with TorchCapture() as cap:
        y.copy_(x + 1)
        with pytest.raises(RuntimeError) as info:
            if refused == "copy into pageable memory":
                stridex.copy(pageable, x, stream=cap.stream)
            elif refused == "copy from pageable memory":
                stridex.copy(x, pageable, stream=cap.stream)
            else:
                v = stridex.view(x, stream=cap.stream)
                v.__dlpack__(stream=outside.cuda_stream)
        message = str(info.value)
        assert "cannot run inside a CUDA graph capture" in message
        assert hex(cap.handle) in message or f"{cap.handle:#x}" in message
        assert "Nothing was enqueued: the capture is still valid" in message
        cap.step()  # still active
    _graph_still_replays(cap, x, y)


@needs_torch
def test_a_host_copy_naming_the_capturing_stream_runs_now_and_leaves_the_capture_valid():
    # Host to host enqueues nothing: it runs on the CPU at the call (docs/graphs.md).
    x = torch.zeros(N, device="cuda")
    y = torch.zeros(N, device="cuda")
    pageable = np.zeros(N, np.float32)
    with TorchCapture() as cap:
        y.copy_(x + 1)
        stridex.copy(pageable, np.ones(N, np.float32), stream=cap.stream)
        assert (pageable == 1).all()
        cap.step()  # still active
    _graph_still_replays(cap, x, y)


@needs_torch
def test_a_host_reader_of_pinned_memory_still_being_captured_is_refused():
    x = torch.zeros(N, device="cuda")
    y = torch.zeros(N, device="cuda")
    pinned = stridex.empty((N,), "float32", device="cuda_host")  # allocated before the capture
    with TorchCapture() as cap:
        y.copy_(x + 1)
        stridex.copy(pinned, x, stream=cap.stream)  # captured: the pinned View is pending on the capture
        assert pinned.stream == cap.handle
        with pytest.raises(RuntimeError) as info:
            np.from_dlpack(pinned)  # NumPy reads on the host: it would wait for work not yet run
        assert "exporting a View to a host reader cannot run inside a CUDA graph capture" in str(info.value)
        assert "Nothing was enqueued: the capture is still valid" in str(info.value)
        cap.step()
    _graph_still_replays(cap, x, y)


# ---- lifetime: the graph keeps what it uses ------------------------------------------------------


@needs_torch
def test_owners_outlive_their_views_while_a_graph_uses_them():
    src = torch.from_numpy(host(N)).cuda()
    expected = src.cpu().numpy()
    mid = torch.zeros(N, device="cuda")
    out = torch.zeros(N, device="cuda")
    alive = [weakref.ref(src), weakref.ref(mid)]
    with TorchCapture() as cap:
        stridex.copy(stridex.view(mid, stream=cap.stream), stridex.view(src, stream=cap.stream), stream=cap.stream)
        out.copy_(mid * 1)  # read mid through a raw pointer torch recorded at capture
        cap.step()
    mid_ptr = mid.data_ptr()
    del src, mid
    gc.collect()
    assert all(r() is not None for r in alive), "the graph must keep the producers alive"
    # Reuse freed blocks if there were any: the replay must still read the original values.
    garbage = [torch.full((N,), -7.0, device="cuda") for _ in range(8)]
    assert all(g.data_ptr() != mid_ptr for g in garbage)
    for _ in range(REPLAYS):
        out.zero_()
        cap.replay()
        np.testing.assert_array_equal(out.cpu().numpy(), expected)
    del cap, garbage
    gc.collect()
    torch.cuda.synchronize()
    deadline = time.monotonic() + 5
    while any(r() is not None for r in alive) and time.monotonic() < deadline:
        time.sleep(0.01)  # the graph's release reaches Python as a pending call
        gc.collect()
    assert all(r() is None for r in alive), "the graph's owners must be released once it is destroyed"


# ---- CuPy's own capture API ------------------------------------------------------------------------


class CupyCapture:
    def __init__(self, non_blocking: bool = True):
        self.stream = cupy.cuda.Stream(non_blocking=non_blocking)
        self.graph = None

    def __enter__(self):
        cupy.cuda.Device().synchronize()
        self.stream.__enter__()
        self.stream.begin_capture()
        return self

    def __exit__(self, *exc):
        try:
            self.graph = self.stream.end_capture()
        finally:
            self.stream.__exit__(*exc)
        return False

    @property
    def handle(self) -> int:
        return self.stream.ptr

    def step(self):
        assert_capturing(self.handle)

    def replay(self):
        self.graph.launch(stream=self.stream)
        self.stream.synchronize()


@needs_cupy
@pytest.mark.parametrize("request_kind", ["explicit stream", "default request"])
def test_cupy_capture_import_and_export(request_kind):
    x = cupy.zeros(N, dtype=cupy.float32)
    y = cupy.zeros(N, dtype=cupy.float32)
    with CupyCapture() as cap:
        v = stridex.view(x, stream=cap.stream) if request_kind == "explicit stream" else stridex.view(x)
        cap.step()
        assert v.stream == cap.handle
        t = cupy.from_dlpack(v)  # export to a CuPy consumer on its current (capturing) stream
        cap.step()
        cupy.multiply(t, 2, out=y)
        cupy.subtract(y, 1, out=y)
        cap.step()
    for _ in range(REPLAYS):
        h = host(N)
        x.set(h, stream=cap.stream)
        cap.replay()
        np.testing.assert_allclose(y.get(), h * 2 - 1, rtol=1e-6)


@needs_cupy
@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
def test_cupy_capture_copy(layout):
    base = cupy.zeros((64, 96), dtype=cupy.float32)
    src_c = base if layout == "contiguous" else base.T
    dst_c = cupy.zeros(src_c.shape, dtype=cupy.float32)
    with CupyCapture() as cap:
        stridex.copy(dst_c, src_c, stream=cap.stream)
        cap.step()
    for _ in range(REPLAYS):
        h = host((64, 96))
        base.set(h, stream=cap.stream)
        cap.replay()
        np.testing.assert_array_equal(dst_c.get(), h if layout == "contiguous" else h.T)


@needs_cupy
def test_cupy_capture_refusal_leaves_the_capture_valid():
    x = cupy.zeros(N, dtype=cupy.float32)
    y = cupy.zeros(N, dtype=cupy.float32)
    with CupyCapture() as cap:
        cupy.add(x, 1, out=y)
        with pytest.raises(RuntimeError, match="cannot run inside a CUDA graph capture"):
            stridex.copy(np.zeros(N, np.float32), x, stream=cap.stream)
        cap.step()
    for _ in range(3):
        h = host(N)
        x.set(h, stream=cap.stream)
        cap.replay()
        np.testing.assert_allclose(y.get(), h + 1, rtol=1e-6)


# ---- the CUDA extension example inside a capture ----------------------------------------------------


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not installed: the example's kernels cannot be built")
    from example_build import build_example

    return build_example(tmp_path_factory, "extension-cuda")


@pytest.fixture(params=["stridex_example_cuda_nb", "stridex_example_cuda_pb"], ids=["nanobind", "pybind11"])
def ext(request, built):
    from example_build import import_built

    return import_built(request.param)


@needs_torch
def test_extension_saxpy_inside_a_torch_capture(ext):
    x = torch.zeros(N, device="cuda")
    y = torch.zeros(N, device="cuda")
    y0 = torch.zeros(N, device="cuda")
    with TorchCapture() as cap:
        y.copy_(y0)
        ext.saxpy(2.5, x, y)  # on the caller's stream: the capturing one
        cap.step()

    def update():
        hx, hy = host(N), host(N)
        x.copy_(torch.from_numpy(hx))
        y0.copy_(torch.from_numpy(hy))
        return 2.5 * hx + hy

    replay_checked(cap, update, lambda e: np.testing.assert_allclose(y.cpu().numpy(), e, rtol=1e-5, atol=1e-6))


@needs_cupy
def test_extension_saxpy_inside_a_cupy_capture(ext):
    x = cupy.zeros(N, dtype=cupy.float32)
    y = cupy.zeros(N, dtype=cupy.float32)
    y0 = cupy.zeros(N, dtype=cupy.float32)
    with CupyCapture() as cap:
        cupy.copyto(y, y0)
        ext.saxpy(-1.5, x, y)
        cap.step()
    for _ in range(REPLAYS):
        hx, hy = host(N), host(N)
        x.set(hx, stream=cap.stream)
        y0.set(hy, stream=cap.stream)
        cap.replay()
        np.testing.assert_allclose(y.get(), -1.5 * hx + hy, rtol=1e-5, atol=1e-6)


@needs_cupy
def test_the_legacy_stream_is_refused_while_a_blocking_stream_captures():
    # A blocking stream's capture makes the legacy default stream part of it (implicitly): stridex
    # refuses to use it, and the default request of CuPy arrays means the capturing stream instead.
    x = cupy.zeros(N, dtype=cupy.float32)
    y = cupy.zeros(N, dtype=cupy.float32)
    with CupyCapture(non_blocking=False) as cap:
        with pytest.raises(RuntimeError) as info:
            stridex.copy(y, x, stream=1)
        assert "the legacy default stream (implicitly part of a CUDA graph capture" in str(info.value)
        assert "Nothing was enqueued: the capture is still valid" in str(info.value)
        cap.step()
        stridex.copy(y, x)  # the default request: the capturing stream
        cap.step()
    for _ in range(REPLAYS):
        h = host(N)
        x.set(h, stream=cap.stream)
        cap.replay()
        np.testing.assert_array_equal(y.get(), h)
