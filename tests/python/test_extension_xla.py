"""examples/extension-cpu through its third door: the same C++ functions as XLA FFI handlers
(<stridex/xla/ffi.hpp>), registered by stridex.jax.ffi_function and called inside jax.jit on JAX's
CPU backend. Results equal to the eager nanobind call, inputs zero-copy (the pointer the handler saw
is the array's), writes in place when the input is donated, every constraint refused at trace time
with the parameter, what it expects and what it was given, the handler's own run-time checks (a raw
jax.ffi.ffi_call), and repeated calls served by JAX's compilation cache. Both binding libraries'
modules export the targets; each is tested."""

from __future__ import annotations

import ctypes
import json

import numpy as np
import pytest

from example_build import build_example, import_built

jax = pytest.importorskip("jax", reason="jax is not installed (tests/requirements.txt installs jax[cpu])")
jnp = jax.numpy
import stridex.jax as sjax  # noqa: E402  (imports jax)

CPU = jax.devices("cpu")[0]
# Errors the handler returns surface as JAX's runtime error (XlaRuntimeError before JAX 0.5).
RUNTIME_ERROR = getattr(jax.errors, "JaxRuntimeError", None) or jax.lib.xla_client.XlaRuntimeError


@pytest.fixture(scope="session")
def built(tmp_path_factory):
    return build_example(tmp_path_factory, "extension-cpu")


@pytest.fixture(
    scope="module", params=["stridex_example_cpu_nb", "stridex_example_cpu_pb"], ids=["nanobind", "pybind11"]
)
def ext(request, built):
    module = import_built(request.param)
    if not hasattr(module, "xla"):
        pytest.fail(f"{request.param} was built without its XLA door although jax is installed")
    return module


def xla(ext, name, **kwargs):
    """The example's function `name` as a jax.jit-able callable; one target name per module (the
    two modules' handlers are different functions)."""
    return sjax.ffi_function(f"{ext.__name__}_{name}", ext.xla[name], **kwargs)


def on_cpu(x):
    """A jax array committed to the CPU: the example's handlers are registered for JAX's CPU backend,
    and a computation runs where its committed inputs are (the GPU is JAX's default where present)."""
    return jax.device_put(np.asarray(x), CPU)


def x64():
    """64-bit dtypes for the block (float64 results: c_total, row_sums; int64: address_of)."""
    enable = getattr(jax, "enable_x64", None)
    if enable is not None:
        return enable(True)
    from jax.experimental import enable_x64  # JAX < 0.7

    return enable_x64()


def refused(call, expected: str, found: str):
    with pytest.raises(TypeError) as info:
        call()
    message = str(info.value)
    assert expected in message, message
    assert found in message, message
    return message


# ---- results: the same as the eager nanobind call ---------------------------------------------------


def test_fill_inside_jit_equals_the_eager_call(ext):
    fill = xla(ext, "fill")
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    eager = x.copy()
    ext.fill(eager, 2.5)
    jitted = jax.jit(lambda a: fill(a, 2.5))(on_cpu(x))
    np.testing.assert_array_equal(np.asarray(jitted), eager)
    assert jitted.dtype == jnp.float32 and jitted.shape == (2, 3)
    np.testing.assert_array_equal(np.asarray(fill(on_cpu(x), value=-1.0)), np.full((2, 3), -1.0, np.float32))  # eager


def test_an_output_parameter_is_a_result_of_the_shape_given(ext):
    with x64():
        m = np.arange(12.0).reshape(4, 3)
        row_sums = xla(ext, "row_sums_into", result_shapes={"sums": lambda m: (m.shape[0],)})
        out = jax.jit(row_sums)(on_cpu(m))
        assert out.dtype == jnp.float64 and out.shape == (4,)
        np.testing.assert_array_equal(np.asarray(out), np.from_dlpack(ext.row_sums(m)))
        given = xla(ext, "row_sums_into", result_shapes={"sums": jax.ShapeDtypeStruct((4,), jnp.float64)})
        np.testing.assert_array_equal(np.asarray(jax.jit(given)(on_cpu(m))), [3.0, 12.0, 21.0, 30.0])
        empty = np.zeros((0, 3))
        assert jax.jit(row_sums)(on_cpu(empty)).shape == (0,)


def test_a_returned_value_is_a_0d_result(ext):
    c_total, f_total = xla(ext, "c_total"), xla(ext, "f_total")
    m = np.arange(12, dtype=np.float32).reshape(3, 4)
    with x64():
        total = jax.jit(c_total)(on_cpu(m))
        assert total.shape == () and total.dtype == jnp.float64
        assert float(total) == ext.c_total(m) == 66.0
        row = m[:1]  # (1, 4): F-contiguous too, by NumPy's rules
        assert float(jax.jit(f_total)(on_cpu(row))) == ext.f_total(row) == 6.0


def test_the_function_sees_xlas_memory_zero_copy(ext):
    address_of = xla(ext, "address_of")
    with x64():
        a = on_cpu(np.arange(100, dtype=np.float32))
        seen = int(jax.jit(address_of)(a))
        assert seen == a.unsafe_buffer_pointer()  # the array's own buffer, not a copy
        assert int(address_of(a)) == a.unsafe_buffer_pointer()  # eagerly too
        x = np.arange(3, dtype=np.float32)
        assert ext.address_of(x) == x.__array_interface__["data"][0]  # the nanobind door, the same function


def test_written_in_place_when_the_input_is_donated(ext):
    fill = xla(ext, "fill")
    # XLA's own buffer (device_put may alias a NumPy array's memory, which cannot be donated)
    x = jnp.zeros(1000, jnp.float32, device=CPU)
    before = x.unsafe_buffer_pointer()
    y = jax.jit(lambda a: fill(a, 3.0), donate_argnums=0)(x)
    # XLA's donation is may-alias (docs/extensions.md): JAX 0.10's CPU runtime took it every time,
    # JAX 0.11.2's in some calls only (a copy first in the others), so the claim is JAX < 0.11's
    if tuple(int(p) for p in jax.__version__.split(".")[:2]) < (0, 11):
        assert y.unsafe_buffer_pointer() == before  # the donated buffer, written where it is
    assert x.is_deleted()
    np.testing.assert_array_equal(np.asarray(y), np.full(1000, 3.0, np.float32))
    kept = on_cpu(np.zeros(4, np.float32))
    out = jax.jit(lambda a: fill(a, 3.0))(kept)  # not donated: XLA copies, the input stays
    np.testing.assert_array_equal(np.asarray(kept), np.zeros(4, np.float32))
    np.testing.assert_array_equal(np.asarray(out), np.full(4, 3.0, np.float32))


def test_repeated_calls_hit_the_compilation_cache(ext):
    with x64():
        row_sums = jax.jit(xla(ext, "row_sums_into", result_shapes={"sums": lambda m: (m.shape[0],)}))
        for k in range(5):
            m = np.arange(12.0).reshape(4, 3) * (k + 1)
            np.testing.assert_array_equal(np.asarray(row_sums(on_cpu(m))), m.sum(axis=1))  # the handler ran again
        assert row_sums._cache_size() == 1  # traced and compiled once
        row_sums(on_cpu(np.ones((2, 3))))
        assert row_sums._cache_size() == 2  # a new shape is a new program


def test_interleaved_with_jax_computations(ext):
    fill = xla(ext, "fill")

    def step(x):
        y = jnp.sin(x) * 2.0
        z = fill(y[:4], 1.0)
        return jnp.concatenate([z, y[4:]]) + x

    x = on_cpu(np.linspace(0, 1, 10, dtype=np.float32))
    got = jax.jit(step)(x)
    ref = np.sin(np.asarray(x)) * 2.0
    ref[:4] = 1.0
    np.testing.assert_allclose(np.asarray(got), ref + np.asarray(x), rtol=1e-6)


# ---- every constraint, refused at trace time ------------------------------------------------------


def test_dtype_refused_at_trace_time(ext):
    fill = xla(ext, "fill")
    message = refused(
        lambda: jax.jit(lambda a: fill(a, 1.0))(on_cpu(np.zeros(3, np.int32))),
        "expected stridex.View[dtype=float32, device=cpu, writable]",
        "found int32, shape=(3,), device=cpu",
    )
    assert message.startswith(f"{ext.__name__}_fill: parameter 0 (x): ")


def test_a_64_bit_dtype_without_x64_says_so(ext):
    row_sums = xla(ext, "row_sums_into", result_shapes={"sums": lambda m: (m.shape[0],)})
    refused(
        lambda: jax.jit(row_sums)(on_cpu(np.ones((2, 3), np.float32))),
        "dtype=float64",
        "found float32, shape=(2, 3), device=cpu (JAX has 64-bit dtypes only with jax_enable_x64)",
    )
    refused(
        lambda: jax.jit(xla(ext, "c_total"))(on_cpu(np.ones((2, 2), np.float32))),
        "returns float64, which JAX has only with jax_enable_x64",
        "",
    )
    # a NumPy float64 array, eagerly: checked as what JAX makes of it
    refused(lambda: row_sums(np.ones((2, 3))), "dtype=float64", "found float32, shape=(2, 3), device=cpu (JAX has")


def test_rank_refused(ext):
    with x64():
        refused(
            lambda: jax.jit(xla(ext, "c_total"))(on_cpu(np.ones(4, np.float32))),
            "parameter 0 (m): expected stridex.View[dtype=float32, ndim=2, device=cpu, order=C]",
            "found float32, shape=(4,), device=cpu",
        )


def test_shape_with_wildcards_refused(ext):
    with x64():
        row_sums = xla(ext, "row_sums_into", result_shapes={"sums": lambda m: (m.shape[0],)})
        refused(
            lambda: jax.jit(row_sums)(on_cpu(np.ones((3, 4)))),
            "stridex.View[dtype=float64, shape=(*, 3), device=cpu]",
            "found float64, shape=(3, 4), device=cpu",
        )
        refused(lambda: jax.jit(row_sums)(on_cpu(np.ones(3))), "shape=(*, 3)", "found float64, shape=(3,)")


def test_contiguity_refused_where_a_row_major_buffer_cannot_meet_it(ext):
    with x64():
        refused(
            lambda: jax.jit(xla(ext, "f_total"))(on_cpu(np.ones((2, 3), np.float32))),
            "stridex.View[dtype=float32, ndim=2, device=cpu, order=F]",
            "found float32, shape=(2, 3), device=cpu (XLA buffers are row-major)",
        )


def test_device_refused(ext):
    with x64():
        refused(
            lambda: jax.jit(xla(ext, "cuda0_size"))(on_cpu(np.ones(3, np.float32))),
            "parameter 0 (x): expected stridex.View[device=cuda:0]",
            "found float32, shape=(3,), device=cpu",
        )


def test_output_shapes_given_are_checked_and_required(ext):
    with x64():
        m = on_cpu(np.ones((4, 3)))
        refused(
            lambda: jax.jit(xla(ext, "row_sums_into"))(m),
            "parameter 1 (sums) is an output of stridex.View[dtype=float64, ndim=1, device=cpu, writable, output], "
            "whose shape the constraints do not fix: give result_shapes={'sums': ...}",
            "",
        )
        wrong = xla(ext, "row_sums_into", result_shapes={"sums": lambda m: (m.shape[0], 2)})
        refused(
            lambda: jax.jit(wrong)(m),
            "parameter 1 (sums): expected stridex.View[dtype=float64, ndim=1",
            "found float64, shape=(4, 2), device=cpu",
        )
        wrong_dtype = xla(ext, "row_sums_into", result_shapes={"sums": jax.ShapeDtypeStruct((4,), jnp.float32)})
        refused(lambda: jax.jit(wrong_dtype)(m), "dtype=float64", "found float32, shape=(4,)")
    with pytest.raises(TypeError, match=r"result_shapes names \['m'\], which are no output parameters"):
        xla(ext, "row_sums_into", result_shapes={"m": (4,)})


def test_attributes_are_static_scalars_of_the_parameters_dtype(ext):
    fill = xla(ext, "fill")
    x = on_cpu(np.zeros(3, np.float32))
    refused(
        lambda: jax.jit(fill)(x, 1.0),
        "parameter 1 (value): expected a float32 attribute, known at trace time",
        "found a traced value",
    )
    refused(lambda: fill(x, "a"), "expected a float32 attribute", "found str 'a'")
    refused(lambda: fill(x, np.ones(2)), "expected a float32 attribute", "found ndarray of shape (2,)")
    refused(lambda: fill(x, 1j), "expected a float32 attribute", "found complex 1j")
    # static where jax.jit is told so: a new value, a new program
    jitted = jax.jit(fill, static_argnames="value")
    np.testing.assert_array_equal(np.asarray(jitted(x, value=4.0)), [4.0, 4.0, 4.0])


def test_arguments_are_bound_like_a_python_call(ext):
    fill = xla(ext, "fill")
    x = on_cpu(np.zeros(2, np.float32))
    with pytest.raises(TypeError, match="is missing value"):
        fill(x)
    with pytest.raises(TypeError, match=r"takes 2 arguments \(x, value\), 3 given"):
        fill(x, 1.0, 2.0)
    with pytest.raises(TypeError, match="got an unexpected argument 'y': no parameter"):
        fill(x, 1.0, y=2)
    with pytest.raises(TypeError, match="got several values for 'x'"):
        fill(x, 1.0, x=x)
    with x64(), pytest.raises(TypeError, match="unexpected argument 'sums': an output"):
        xla(ext, "row_sums_into", result_shapes={"sums": (4,)})(on_cpu(np.ones((4, 3))), sums=np.zeros(4))


# ---- the handler's own checks: a raw jax.ffi.ffi_call, without stridex.jax -----------------------


def raw(ext, name, result, *operands, aliases=None, **attrs):
    xla(ext, name)  # registered
    return jax.ffi.ffi_call(f"{ext.__name__}_{name}", result, input_output_aliases=aliases)(*operands, **attrs)


def test_the_handler_checks_every_buffer_itself(ext):
    ints = on_cpu(np.zeros(3, np.int32))
    with pytest.raises(
        RUNTIME_ERROR,
        match=r"stridex XLA handler: parameter 0 \(x\): expected stridex.View"
        r"\[dtype=float32, device=cpu, writable\], found int32, shape=\(3,\), "
        r"strides=\(1,\), device=cpu, writable",
    ):
        raw(ext, "fill", jax.ShapeDtypeStruct((3,), jnp.int32), ints, aliases={0: 0}, value=np.float32(1))
    floats = on_cpu(np.zeros(3, np.float32))
    with pytest.raises(
        RUNTIME_ERROR,
        match=r"parameter 0 \(x\) is written in place, but its operand 0 and result 0 "
        r"are different buffers: call with input_output_aliases=\{0: 0\}",
    ):
        raw(ext, "fill", jax.ShapeDtypeStruct((3,), jnp.float32), floats, value=np.float32(1))
    with pytest.raises(
        RUNTIME_ERROR,
        match=r"parameter 1 \(value\): expected an attribute `value` of dtype float32, "
        r"found float64",
    ):
        raw(ext, "fill", jax.ShapeDtypeStruct((3,), jnp.float32), floats, aliases={0: 0}, value=1.0)  # float64
    with pytest.raises(RUNTIME_ERROR, match=r"parameter 1 \(value\): expected an attribute `value`, found none"):
        raw(ext, "fill", jax.ShapeDtypeStruct((3,), jnp.float32), floats, aliases={0: 0})
    with pytest.raises(RUNTIME_ERROR, match=r"unexpected attribute `other`: the attributes are the scalar parameters"):
        raw(
            ext,
            "fill",
            jax.ShapeDtypeStruct((3,), jnp.float32),
            floats,
            aliases={0: 0},
            value=np.float32(1),
            other=np.float32(1),
        )
    with pytest.raises(RUNTIME_ERROR, match=r"parameter 1 \(value\): the attribute `value` is no scalar"):
        raw(ext, "fill", jax.ShapeDtypeStruct((3,), jnp.float32), floats, aliases={0: 0}, value="text")
    with pytest.raises(RUNTIME_ERROR, match="expected 1 operands and 1 results, found 1 and 2"):
        raw(ext, "fill", (jax.ShapeDtypeStruct((3,), jnp.float32),) * 2, floats, aliases={0: 0}, value=np.float32(1))
    with x64(), pytest.raises(RUNTIME_ERROR, match=r"the return value is a 0-d float64 result, found float32"):
        raw(ext, "c_total", jax.ShapeDtypeStruct((), jnp.float32), on_cpu(np.ones((2, 2), np.float32)))


def test_what_the_function_throws_is_the_calls_error(ext):
    with x64():
        off_by_one = xla(ext, "row_sums_into", result_shapes={"sums": lambda m: (m.shape[0] + 1,)})
        with pytest.raises(RUNTIME_ERROR, match="sums has 5 elements, m 4 rows"):
            jax.jit(off_by_one)(on_cpu(np.ones((4, 3)))).block_until_ready()


# ---- the target: what the module exports, and its registration ---------------------------------


def test_the_signature_describes_every_parameter_as_the_casters_print_it(ext):
    target = sjax.read_target(ext.xla["fill"])
    assert target.platform == "cpu" and target.returns is None
    x, value = target.params
    assert (x.name, x.kind, x.dtype, x.device, x.order) == ("x", "inout", "float32", "cpu", "any")
    assert x.constraints == "stridex.View[dtype=float32, device=cpu, writable]"
    assert x.constraints in ext.fill.__doc__  # the binding library's signature shows the same text
    assert (value.name, value.kind, value.dtype) == ("value", "attr", "float32")
    rows = sjax.read_target(ext.xla["row_sums_into"])
    assert [(p.name, p.kind, p.shape, p.ndim) for p in rows.params] == [
        ("m", "in", (-1, 3), 2),
        ("sums", "out", None, 1),
    ]
    assert sjax.read_target(ext.xla["c_total"]).returns == "float64"
    assert json.loads(target.signature)["abi"] == 1


def test_targets_are_read_from_a_capsule_or_an_address(ext):
    capsule = ext.xla["c_total"]
    get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
    get_pointer.restype, get_pointer.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    address = get_pointer(capsule, b"stridex.xla_target")
    assert sjax.read_target(address) == sjax.read_target(capsule)  # what a ctypes user hands over
    with pytest.raises(TypeError, match="expected a capsule named 'stridex.xla_target', found a capsule named 'other'"):
        sjax.read_target(_capsule(address, b"other"))
    with pytest.raises(TypeError, match="expected a capsule named 'stridex.xla_target', found an unnamed capsule"):
        sjax.read_target(jax.ffi.pycapsule(address))
    with pytest.raises(ValueError, match="found NULL"):
        sjax.read_target(0)
    with pytest.raises(TypeError, match="found str"):
        sjax.read_target("fill")


_CAPSULE_NAMES: list[bytes] = []  # a capsule keeps its name's pointer: the bytes must outlive it


def _capsule(address, name):
    new = ctypes.pythonapi.PyCapsule_New
    new.restype, new.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    _CAPSULE_NAMES.append(name)
    return new(address, name, None)


def test_a_name_is_registered_once_and_never_for_two_handlers(ext):
    first = xla(ext, "c_total")
    again = xla(ext, "c_total")  # the same handler: nothing to register
    assert again.target == first.target
    with pytest.raises(ValueError, match=r"'[\w]+_c_total' is registered for cpu with another handler already"):
        sjax.ffi_function(f"{ext.__name__}_c_total", ext.xla["f_total"])
