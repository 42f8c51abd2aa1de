"""examples/extension-cuda on a GPU: saxpy kernels bound with nanobind and with pybind11, called with
torch, CuPy and JAX arrays (numpy is refused: the kernels need device memory), writes reaching the
caller's memory, kernels queued on the caller's stream, and C++-allocated device memory arriving
in torch as cuda:0; and the same kernels inside jax.jit through their XLA FFI handlers, on XLA's
stream between JAX computations. Skips without a CUDA GPU or without nvcc (the kernels need it to build)."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

import stridex
from example_build import build_example, import_built
from export_support import cuda_device_count, optional, torch_and_cupy

if cuda_device_count() == 0:
    pytest.skip("no CUDA GPU (the CUDA extension example runs on GPU machines)", allow_module_level=True)
if shutil.which("nvcc") is None:
    pytest.skip("nvcc is not installed: the example's kernels cannot be built", allow_module_level=True)

torch, cupy, needs_torch, needs_cupy = torch_and_cupy()
jax = optional("jax")
needs_jax = pytest.mark.skipif(
    jax is None or not any(d.platform == "gpu" for d in jax.devices()), reason="jax with a GPU backend is not installed"
)


@pytest.fixture(scope="session")
def built(tmp_path_factory):
    return build_example(tmp_path_factory, "extension-cuda")


@pytest.fixture(params=["stridex_example_cuda_nb", "stridex_example_cuda_pb"], ids=["nanobind", "pybind11"])
def ext(request, built):
    return import_built(request.param)


@needs_torch
def test_saxpy_torch_1d_strided_in_place(ext):
    x = torch.arange(20, dtype=torch.float32, device="cuda")[::2]
    y = torch.ones(10, dtype=torch.float32, device="cuda")
    y_ptr = y.data_ptr()
    ext.saxpy(2.0, x, y)
    assert y.data_ptr() == y_ptr  # in place: the caller's memory
    torch.testing.assert_close(y, 2.0 * torch.arange(0, 20, 2, dtype=torch.float32, device="cuda") + 1)


@needs_torch
def test_saxpy_torch_2d_transposed_and_sliced(ext):
    base = torch.arange(24, dtype=torch.float32, device="cuda").reshape(4, 6)
    x = base.T[::2]  # (3, 4), strides (2, 6)
    y = torch.zeros(4, 3, dtype=torch.float32, device="cuda").T  # (3, 4), F order
    ext.saxpy_2d(3.0, x, y)
    torch.testing.assert_close(y, 3.0 * x)


@needs_torch
def test_kernels_run_on_the_callers_current_stream(ext):
    s = torch.cuda.Stream()
    x = torch.ones(1 << 20, device="cuda")
    with torch.cuda.stream(s):
        assert ext.stream_of(x) == s.cuda_stream
        y = torch.zeros(1 << 20, device="cuda")
        ext.saxpy(1.0, x, y)
        # torch's next operation on s sees the kernel's result: no host synchronization needed.
        assert float(y.sum()) == float(1 << 20)
    assert ext.stream_of(x) == (torch.cuda.current_stream().cuda_stream or 1)


@needs_torch
def test_device_memory_from_cpp_arrives_in_torch_as_cuda0(ext):
    v = ext.arange(1000, 0)
    assert isinstance(v, stridex.View)
    assert v.device == "cuda:0" and v.__dlpack_device__() == (2, 0)
    t = torch.from_dlpack(v)
    assert t.device == torch.device("cuda:0")
    del v
    torch.testing.assert_close(t, torch.arange(1000, dtype=torch.float32, device="cuda"))
    t += 1  # the tensor owns the C++ allocation now


@needs_torch
def test_arange_like_torch_in_torch_out(ext):
    out = ext.arange_like(torch.empty(1, device="cuda:0"), 5)
    assert isinstance(out, torch.Tensor) and out.device == torch.device("cuda:0")
    torch.testing.assert_close(out, torch.arange(5, dtype=torch.float32, device="cuda"))


@needs_torch
def test_refusals(ext):
    y = torch.zeros(4, device="cuda")
    with pytest.raises(TypeError, match=r"device=cuda"):
        ext.saxpy(1.0, np.ones(4, np.float32), y)  # host memory
    with pytest.raises(TypeError, match=r"dtype=float32"):
        ext.saxpy(1.0, torch.ones(4, device="cuda", dtype=torch.float64), y)
    with pytest.raises(TypeError, match=r"ndim=1"):
        ext.saxpy(1.0, torch.ones(2, 2, device="cuda"), y)
    with pytest.raises(ValueError, match="differ in shape"):
        ext.saxpy(1.0, torch.ones(3, device="cuda"), y)


@needs_cupy
def test_saxpy_cupy(ext):
    x = cupy.arange(8, dtype=cupy.float32)[::-1]
    y = cupy.ones(8, dtype=cupy.float32)
    ext.saxpy(0.5, x, y)
    cupy.testing.assert_allclose(y, 0.5 * cupy.arange(8, dtype=cupy.float32)[::-1] + 1)
    m = cupy.ones((3, 5), dtype=cupy.float32)
    ext.saxpy_2d(2.0, cupy.arange(15, dtype=cupy.float32).reshape(5, 3).T, m)
    cupy.testing.assert_allclose(m, 2.0 * cupy.arange(15, dtype=cupy.float32).reshape(5, 3).T + 1)
    out = ext.arange_like(x, 4)
    assert isinstance(out, cupy.ndarray)
    cupy.testing.assert_allclose(out, cupy.arange(4, dtype=cupy.float32))


@needs_jax
def test_jax_inputs_are_read_only(ext):
    x = jax.numpy.arange(6, dtype=jax.numpy.float32, device=jax.devices("gpu")[0])
    if torch is not None and torch.cuda.is_available():
        y = torch.zeros(6, device="cuda")
        ext.saxpy(1.0, x, y)  # x is only read: a JAX array is fine
        torch.testing.assert_close(y.cpu(), torch.arange(6, dtype=torch.float32))
    with pytest.raises(TypeError, match="writable"):
        ext.saxpy(1.0, x, jax.numpy.zeros(6, dtype=jax.numpy.float32, device=jax.devices("gpu")[0]))
    out = ext.arange_like(x, 3)
    assert isinstance(out, jax.Array) and list(out.devices())[0].platform == "gpu"
    np.testing.assert_array_equal(np.asarray(out), [0.0, 1.0, 2.0])


# ---- the third door: the same kernels inside jax.jit (XLA FFI, <stridex/xla/ffi.hpp>) -------------


@pytest.fixture(scope="module")
def xla_door(built):
    """(stridex.jax, the nanobind module, JAX's first GPU); the module must export its XLA targets."""
    if jax is None or not any(d.platform == "gpu" for d in jax.devices()):
        pytest.skip("jax with a GPU backend is not installed")
    import stridex.jax as sjax

    module = import_built("stridex_example_cuda_nb")
    if not hasattr(module, "xla"):
        pytest.fail("stridex_example_cuda_nb was built without its XLA door although jax is installed")
    return sjax, module, jax.devices("gpu")[0]


def x64():
    enable = getattr(jax, "enable_x64", None)
    if enable is not None:
        return enable(True)
    from jax.experimental import enable_x64  # JAX < 0.7

    return enable_x64()


def test_saxpy_inside_jit_on_the_gpu_repeatedly(xla_door):
    sjax, ext, gpu = xla_door
    saxpy = sjax.ffi_function("example_cuda_saxpy", ext.xla["saxpy"])
    f = jax.jit(lambda x, y: saxpy(2.0, x, y))
    for k in range(10):
        x = jax.device_put(np.arange(1000, dtype=np.float32) * (k + 1), gpu)
        y = jax.device_put(np.full(1000, float(k), np.float32), gpu)
        out = f(x, y)
        assert list(out.devices()) == [gpu]
        np.testing.assert_array_equal(np.asarray(out), 2.0 * np.arange(1000, dtype=np.float32) * (k + 1) + k)
    assert f._cache_size() == 1
    saxpy_2d = sjax.ffi_function("example_cuda_saxpy_2d", ext.xla["saxpy_2d"])
    m = jax.device_put(np.arange(12, dtype=np.float32).reshape(3, 4), gpu)
    out = jax.jit(lambda m: saxpy_2d(3.0, m.T, jnp_ones(m.T.shape)))(m)  # XLA materializes m.T row-major
    np.testing.assert_array_equal(np.asarray(out), 3.0 * np.arange(12, dtype=np.float32).reshape(3, 4).T + 1)


def jnp_ones(shape):
    return jax.numpy.ones(shape, jax.numpy.float32)


def test_saxpy_is_ordered_on_xlas_stream_between_jax_computations(xla_door):
    # x comes out of a matmul that takes milliseconds and y0 out of a reduction, both queued on XLA's
    # stream just before the kernel; the kernel's result feeds more XLA work. A kernel launched
    # anywhere but XLA's stream (without an event) would read x before the matmul wrote it.
    sjax, ext, gpu = xla_door
    saxpy = sjax.ffi_function("example_cuda_saxpy", ext.xla["saxpy"])
    n = 4096

    def step(a, b, k):
        x = (a @ b)[0]  # every element: n * 1.0 * 0.5, exact in float32 and TF32
        y0 = jax.numpy.full((n,), 1.0, jax.numpy.float32) * k
        y = saxpy(2.0, x, y0)
        return y * 3.0 + jax.numpy.sum(x) / n

    f = jax.jit(step)
    a = jax.device_put(np.ones((n, n), np.float32), gpu)
    b = jax.device_put(np.full((n, n), 0.5, np.float32), gpu)
    for k in range(5):
        out = np.asarray(f(a, b, np.float32(k)))
        np.testing.assert_array_equal(out, np.full(n, (2.0 * n * 0.5 + k) * 3.0 + n * 0.5, np.float32))


def test_the_kernel_stream_is_xlas_own(xla_door):
    sjax, ext, gpu = xla_door
    stream_of = sjax.ffi_function("example_cuda_stream_of", ext.xla["stream_of"])
    with x64():
        x = jax.device_put(np.ones(4, np.float32), gpu)
        first, second = jax.jit(lambda x: (stream_of(x), stream_of(x * 2)))(x)
        # a CUstream handle (not -1, nor the legacy 1 or per-thread 2 a Python caller gets without
        # an exchange API): the stream XLA gave the handler, the same for both calls of the program
        assert int(first) > 2 and int(first) == int(second)


def test_a_parameter_without_caller_stream_is_ordered_through_the_legacy_stream(xla_door):
    # arange_into launches on the legacy default stream; the handler makes it wait for XLA's stream
    # and XLA's stream wait for it, so the multiplication after it reads the values.
    sjax, ext, gpu = xla_door
    n = 1 << 22
    arange = sjax.ffi_function("example_cuda_arange_into", ext.xla["arange_into"], result_shapes={"out": (n,)})
    f = jax.jit(lambda z: arange() * 2.0 + z)
    z = jax.device_put(np.float32(0), gpu)  # a committed input: the program runs on the GPU
    for _ in range(5):
        np.testing.assert_array_equal(np.asarray(f(z)), np.arange(n, dtype=np.float32) * 2.0)
