"""examples/extension-cpu, built against the installed package and called the way users call it:
with numpy, jax and warp arrays, through both binding libraries (one set of C++ functions bound
with nanobind and with pybind11). Every constraint's refusal, read-only rejection, the device of
returned arrays, aliasing, the explicit copy, and like= returns."""

from __future__ import annotations

import numpy as np
import pytest

import stridex
from example_build import build_example, import_built
from quirky_producers import AI
from export_support import optional

jax = optional("jax")
wp = optional("warp")

BINDINGS = ["stridex_example_cpu_nb", "stridex_example_cpu_pb"]


@pytest.fixture(scope="session")
def built(tmp_path_factory):
    return build_example(tmp_path_factory, "extension-cpu")


@pytest.fixture(params=BINDINGS, ids=["nanobind", "pybind11"])
def ext(request, built):
    return import_built(request.param)


def on_cpu(x):
    """A jax array on the CPU: these functions take host memory, and JAX puts arrays on the GPU
    by default where it has one."""
    return jax.device_put(x, jax.devices("cpu")[0])


def expect_refusal(call, expected: str, given: str):
    """The binding library's overload TypeError: the parameter's constraints, and what was given."""
    with pytest.raises(TypeError, match="incompatible function arguments") as info:
        call()
    message = str(info.value)
    assert expected in message, message
    assert given in message, message


def given_numpy(ext) -> str:
    # nanobind names the type of each argument, pybind11 shows its repr.
    return "Invoked with types: ndarray" if ext.__name__.endswith("_nb") else "Invoked with: array("


# ---- arguments: aliasing and layout -------------------------------------------------------------


def test_writes_reach_the_callers_numpy_array_through_any_strides(ext):
    x = np.zeros((3, 4), np.float32)
    ext.fill(x[::2, ::-3], 7.0)  # negative and non-unit strides, no copy
    expected = np.zeros((3, 4), np.float32)
    expected[::2, ::-3] = 7.0
    np.testing.assert_array_equal(x, expected)


@pytest.mark.skipif(wp is None, reason="warp is not installed")
def test_writes_reach_a_warp_array(ext):
    wp.init()
    a = wp.zeros(5, dtype=wp.float32, device="cpu")
    ext.fill(a, 2.5)
    np.testing.assert_array_equal(a.numpy(), np.full(5, 2.5, np.float32))


def test_the_function_sees_the_callers_memory(ext):
    x = np.arange(6, dtype=np.float32)
    ptr, device, readonly, stream = ext.info(x[1:])
    assert ptr == x[1:].__array_interface__["data"][0]
    assert (device, readonly, stream) == ("cpu", False, -1)  # host memory: no stream (-1)
    x.flags.writeable = False
    assert ext.info(x)[2] is True


def test_noconvert_takes_stridex_views_only(ext):
    x = np.arange(3, dtype=np.float32)
    with pytest.raises(TypeError, match="incompatible function arguments"):
        ext.info_strict(x)
    assert ext.info_strict(stridex.view(x))[0] == x.__array_interface__["data"][0]


# ---- every constraint's refusal ---------------------------------------------------------------


def test_dtype(ext):
    expect_refusal(
        lambda: ext.fill(np.zeros(3, np.float64), 1.0),
        "x: stridex.View[dtype=float32, device=cpu, writable]",
        given_numpy(ext),
    )
    expect_refusal(
        lambda: ext.row_sums(np.zeros((2, 3), np.float32)),
        "stridex.View[dtype=float64, shape=(*, 3), device=cpu]",
        given_numpy(ext),
    )


def test_shape_with_wildcards(ext):
    np.testing.assert_array_equal(np.from_dlpack(ext.row_sums(np.ones((5, 3)))), np.full(5, 3.0))
    np.testing.assert_array_equal(np.from_dlpack(ext.row_sums(np.ones((0, 3)))), np.zeros(0))
    expect_refusal(lambda: ext.row_sums(np.ones((3, 4))), "shape=(*, 3)", given_numpy(ext))
    expect_refusal(lambda: ext.row_sums(np.ones(3)), "shape=(*, 3)", given_numpy(ext))


def test_an_output_parameter_is_a_writable_argument(ext):
    m = np.arange(6.0).reshape(2, 3)
    sums = np.full(2, np.nan)
    ext.row_sums_into(m, sums)  # arg::output: the caller's array, written
    np.testing.assert_array_equal(sums, [3.0, 12.0])
    sums.flags.writeable = False
    expect_refusal(
        lambda: ext.row_sums_into(m, sums),
        "sums: stridex.View[dtype=float64, ndim=1, device=cpu, writable, output]",
        given_numpy(ext),
    )
    with pytest.raises(ValueError, match="sums has 3 elements, m 2 rows"):
        ext.row_sums_into(m, np.zeros(3))


def test_rank(ext):
    expect_refusal(
        lambda: ext.c_total(np.ones(4, np.float32)),
        "stridex.View[dtype=float32, ndim=2, device=cpu, order=C]",
        given_numpy(ext),
    )


def test_contiguity(ext):
    c = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert ext.c_total(c) == 15.0 and ext.f_total(c.T) == 15.0
    expect_refusal(lambda: ext.c_total(c.T), "order=C", given_numpy(ext))
    expect_refusal(lambda: ext.f_total(c), "order=F", given_numpy(ext))
    expect_refusal(lambda: ext.c_total(c[:, ::2]), "order=C", given_numpy(ext))


def test_device_type_and_ordinal(ext):
    expect_refusal(lambda: ext.cuda0_size(np.ones(3)), "x: stridex.View[device=cuda:0]", given_numpy(ext))


def test_read_only_numpy_is_refused_where_the_function_writes(ext):
    x = np.zeros(3, np.float32)
    x.flags.writeable = False
    expect_refusal(lambda: ext.fill(x, 1.0), "writable", given_numpy(ext))
    assert not x.any()


@pytest.mark.skipif(jax is None, reason="jax is not installed")
def test_jax_arrays_are_read_only_inputs(ext):
    with pytest.raises(TypeError, match="writable"):
        ext.fill(on_cpu(jax.numpy.zeros(3, jax.numpy.float32)), 1.0)
    m = on_cpu(jax.numpy.ones((4, 3), jax.numpy.float32))
    assert ext.c_total(m) == 12.0  # read-only is fine where nothing is written
    assert ext.info(m)[1:3] == ("cpu", True)


def test_objects_that_are_no_arrays(ext):
    for bad in (None, 3, "abc", [1.0, 2.0]):
        with pytest.raises(TypeError, match="incompatible function arguments"):
            ext.c_total(bad)


# ---- the one explicit copy ----------------------------------------------------------------------


def test_may_copy_copies_only_what_is_not_contiguous(ext):
    c = np.arange(6, dtype=np.float32).reshape(2, 3)
    same = ext.as_c_contiguous(c)
    assert same.ptr == c.__array_interface__["data"][0]  # contiguous already: the caller's memory
    copied = ext.as_c_contiguous(c.T)
    assert copied.ptr != c.__array_interface__["data"][0] and copied.is_c_contiguous
    np.testing.assert_array_equal(np.from_dlpack(copied), c.T)
    expect_refusal(lambda: ext.as_c_contiguous(c.astype(np.float64).T), "may_copy", given_numpy(ext))  # never a dtype


def test_a_copy_the_engine_cannot_make_is_refused_clearly(ext):
    # Host memory tagged with a device the CUDA driver cannot judge (taken as given): the copy engine
    # allocates only where it can, so the argument is refused with the reason, not copied.
    c = np.arange(6, dtype=np.float32).reshape(2, 3)
    v = stridex.from_pointer(c.ctypes.data, (3, 2), "float32", device="rocm:0", owner=c, strides=(1, 3))
    # The caster raises the copy's refusal as a BufferError (this argument, refused), whatever the engine's kind.
    with pytest.raises(BufferError, match="stridex allocates on cpu, cuda:N, cuda_host and cuda_managed, not rocm:0"):
        ext.as_c_contiguous(v)
    same = ext.as_c_contiguous(v.T)  # C-contiguous already: no copy needed, none refused
    assert same.ptr == c.ctypes.data and same.device == "rocm:0"


# ---- returns: owning arrays on their device, and like= --------------------------------------------


def test_returned_array_is_a_host_view_that_owns_its_memory(ext):
    out = ext.row_sums(np.arange(6.0).reshape(2, 3))
    assert isinstance(out, stridex.View)
    assert out.device == "cpu" and out.__dlpack_device__() == (1, 0) and not out.readonly
    arr = np.from_dlpack(out)
    del out
    np.testing.assert_array_equal(arr, [3.0, 12.0])
    arr[0] = 1.0  # the consumer keeps the C++ allocation alive


def test_like_returns_the_callers_framework(ext):
    out = ext.scaled(np.ones(3, np.float32), 2.0)
    assert type(out) is np.ndarray and out.flags.writeable
    np.testing.assert_array_equal(out, [2.0, 2.0, 2.0])
    assert isinstance(ext.scaled(stridex.view(np.ones(2, np.float32)), 2.0), stridex.View)


def test_like_a_subclass_defined_elsewhere_returns_its_frameworks_array(ext):
    # The subclass's own module has no from_dlpack: the framework of its nearest base that has one.
    class Sub(np.ndarray):
        pass

    out = ext.scaled(np.ones(3, np.float32).view(Sub), 2.0)
    assert type(out) is np.ndarray
    np.testing.assert_array_equal(out, [2.0, 2.0, 2.0])


def test_like_an_array_of_no_framework_is_a_type_error(ext):
    a = np.ones(3, np.float32)
    Interface = type("Interface", (AI,), {"__module__": "mylib.arrays"})  # not even imported
    with pytest.raises(TypeError, match="no package of its type or its bases has a from_dlpack"):
        ext.scaled(Interface(a, **a.__array_interface__), 2.0)


@pytest.mark.skipif(jax is None, reason="jax is not installed")
def test_like_jax_in_jax_out(ext):
    out = ext.scaled(on_cpu(jax.numpy.arange(4, dtype=jax.numpy.float32)), 3.0)
    assert isinstance(out, jax.Array)
    assert list(out.devices())[0].platform == "cpu"
    np.testing.assert_array_equal(np.asarray(out), np.arange(4, dtype=np.float32) * 3)


@pytest.mark.skipif(wp is None, reason="warp is not installed")
def test_like_warp_in_warp_out(ext):
    wp.init()
    out = ext.scaled(wp.array(np.arange(3, dtype=np.float32), device="cpu"), 2.0)
    assert isinstance(out, wp.array) and out.device.is_cpu
    np.testing.assert_array_equal(out.numpy(), [0.0, 2.0, 4.0])
