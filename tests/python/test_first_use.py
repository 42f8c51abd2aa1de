"""What a new user meets first: the version, stridex.dtype of a scalar type, and View()."""

import re
from pathlib import Path

import numpy as np
import pytest

import stridex

ROOT = Path(__file__).resolve().parents[2]


def test_one_version_string():
    cmake = (ROOT / "CMakeLists.txt").read_text()
    (version,) = re.findall(r"project\(stridex VERSION ([0-9.]+)", cmake)
    assert stridex.__version__ == version == stridex._stridex.__version__
    assert 'dynamic = ["version"]' in (ROOT / "pyproject.toml").read_text()  # the wheel reads CMake's


@pytest.mark.parametrize(
    "spec, name",
    [
        (np.float32, "float32"),
        (np.int8, "int8"),
        (np.complex64, "complex64"),
        (np.bool_, "bool"),
        (bool, "bool"),
        (float, "float64"),
        (np.dtype("uint16"), "uint16"),
        ("float16", "float16"),
        (np.zeros(2, dtype=np.int64), "int64"),
    ],
)
def test_dtype_takes_types_dtypes_arrays_and_names(spec, name):
    assert stridex.dtype(spec) == stridex.Dtype(name)
    assert stridex.dtype(stridex.Dtype(name)) == stridex.Dtype(name)


def test_dtype_of_ml_dtypes_scalar_types():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    assert stridex.dtype(ml_dtypes.bfloat16).name == "bfloat16"
    assert stridex.dtype(ml_dtypes.float8_e4m3fn).name == "float8_e4m3fn"


@pytest.mark.parametrize("spec", [object, 3, None])
def test_dtype_refuses_what_is_not_a_dtype(spec):
    with pytest.raises(TypeError):
        stridex.dtype(spec)


@pytest.mark.parametrize("args", [(), (np.zeros(3),), ("x", 1)])
def test_view_constructor_points_at_stridex_view(args):
    with pytest.raises(TypeError, match=r"stridex.View cannot be created directly: call stridex.view\(obj\)"):
        stridex.View(*args)


# ---- the habits NumPy, array-API and cuda.core users bring ---------------------------------------


# Made in each test, not at import: a stridex object a module or a test id keeps alive until the
# interpreter's end is reported by nanobind's leak check at exit.
def f32():
    return stridex.Dtype("float32")


@pytest.mark.parametrize("spelling", ["float32", "f4", "<f4", "torch.float32", np.float32, np.dtype("float32"), f32])
def test_a_dtype_equals_every_spelling_the_entries_take(spelling):
    spelling = spelling() if spelling is f32 else spelling
    v = stridex.view(np.zeros(2, dtype=np.float32))
    assert v.dtype == spelling and spelling == v.dtype and not (v.dtype != spelling)
    assert stridex.empty(2, spelling).dtype == v.dtype  # the same spellings as the entry points


def test_a_dtype_differs_from_another_dtype_and_ignores_unrelated_objects():
    F32 = f32()
    assert F32 != "float64" and F32 != np.int32 and F32 != "f8"
    # Not a dtype at all (None, a number): unrelated, so == is False and containers still work.
    assert F32 != None and F32 != 3 and F32 in [None, 3, "float32"]  # noqa: E711 - the operator is the test


def test_a_misspelt_dtype_raises_instead_of_comparing_false():
    F32 = f32()
    with pytest.raises(TypeError) as e:
        F32 == "flaot32"  # noqa: B015 - the comparison itself raises
    assert str(e.value).startswith("Dtype.__eq__(): other: unknown dtype name 'flaot32' (expected a name such as")


def test_a_dtype_hashes_as_its_canonical_name():
    F32 = f32()
    assert hash(F32) == hash("float32") and {F32: 1}["float32"] == 1 and {"float32": 1}[F32] == 1


@pytest.mark.parametrize("spelling", ["cpu", "cpu:0", (1, 0), "Device('cpu')"])
def test_a_device_equals_every_spelling_the_entries_take(spelling):
    spelling = stridex.Device("cpu") if spelling == "Device('cpu')" else spelling
    v = stridex.view(np.zeros(2))
    assert v.device == spelling and spelling == v.device and not (v.device != spelling)


def test_a_device_differs_from_another_and_raises_on_a_misspelt_name():
    cpu = stridex.Device("cpu")
    assert cpu != "cuda:0" and cpu != (2, 0) and cpu != None and cpu != 0  # noqa: E711
    with pytest.raises(ValueError) as e:
        cpu == "gpu"  # noqa: B015
    assert str(e.value) == (
        "Device.__eq__(): other: invalid device 'gpu' (expected a type name with an optional non-negative "
        "ordinal, such as cpu, cuda, cuda:1, cuda_host or rocm:0)"
    )
    assert hash(cpu) == hash("cpu")


@pytest.mark.parametrize("spelling", ["cpu:1", "cuda_host:2", (1, 3)])
def test_a_second_host_memory_is_refused(spelling):
    v = stridex.view(np.zeros(2))
    with pytest.raises(ValueError) as e:
        v.to(spelling)
    name = "cuda_host" if "cuda_host" in str(spelling) else "cpu"
    text = f"'{spelling}'" if isinstance(spelling, str) else "(1, 3)"
    assert str(e.value) == (
        f"View.to(): device: invalid device {text}: {name} has one memory space, so its only ordinal is 0 "
        f"({name} or {name}:0)"
    )


@pytest.mark.parametrize("call", ["to", "copy", "empty"])
def test_a_device_stridex_cannot_serve_is_a_value_error_everywhere(call):
    v = stridex.view(np.zeros(2))
    with pytest.raises(
        ValueError, match=r"^stridex allocates on cpu, cuda:N, cuda_host and cuda_managed, not metal:0$"
    ):
        if call == "to":
            v.to("metal")
        elif call == "copy":
            v.copy(device="metal")
        else:
            stridex.empty(2, "float32", device="metal")


def test_0d_views_convert_like_numpy_0d_arrays():
    assert float(stridex.view(np.array(1.5))) == 1.5
    assert int(stridex.view(np.array(2.7))) == 2  # truncates, as int(2.7)
    assert complex(stridex.view(np.array(1 + 2j))) == 1 + 2j
    assert bool(stridex.view(np.array(0))) is False and bool(stridex.view(np.array([3]))) is True
    assert [10, 20, 30][stridex.view(np.array(2, dtype=np.uint8))] == 30
    for a in (np.array(7, dtype=np.int16), np.array(True), np.array(2.5, dtype=np.float16), np.array(1j, np.complex64)):
        item = stridex.view(a).item()
        assert item == a.item() and type(item) is type(a.item())
        assert stridex.view(a).tolist() == a.tolist()


@pytest.mark.parametrize("dtype", ["bfloat16", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e8m0fnu"])
def test_small_floats_become_python_floats_as_ml_dtypes_reads_them(dtype):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    a = np.array([0.5, -1.75, 3.0, 448.0, 1e-3], dtype=np.float64).astype(getattr(ml_dtypes, dtype))
    got = stridex.view(a).tolist()
    assert all(type(x) is float for x in got)
    np.testing.assert_array_equal(np.array(got), a.astype(np.float64))  # NaNs (out of range) compare equal


def test_tolist_of_every_rank_and_layout():
    a = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
    for x in (a, a[:, ::-1, ::2], a.transpose(2, 0, 1), a[0, 0], a[:0]):
        assert stridex.view(x).tolist() == x.tolist()


def test_iteration_walks_the_first_axis_and_refuses_0d():
    a = np.arange(6).reshape(2, 3)
    assert [r.tolist() for r in stridex.view(a)] == a.tolist()
    with pytest.raises(TypeError, match=r"^iteration over a 0-d view$"):
        iter(stridex.view(np.array(1)))


def test_conversions_refuse_what_numpy_refuses():
    v = stridex.view(np.zeros((2, 3)))
    with pytest.raises(TypeError) as e:
        float(v)
    assert str(e.value) == (
        "float(): only a 0-d view converts to a Python scalar, found shape (2, 3) with strides (3, 1) "
        "(v.item() takes any view of one element)"
    )
    with pytest.raises(ValueError) as e:
        v.item()
    assert str(e.value) == (
        "item(): only a view of one element converts to a Python scalar, found shape (2, 3) with strides (3, 1)"
    )
    with pytest.raises(ValueError) as e:
        bool(v)
    assert str(e.value) == (
        "the truth value of a view of 6 elements is ambiguous (convert it with np.asarray(v) and use .any() or .all())"
    )
    with pytest.raises(ValueError, match=r"^the truth value of an empty view is ambiguous \(test v.size == 0\)$"):
        bool(stridex.view(np.zeros(0)))
    with pytest.raises(TypeError, match=r"^operator.index\(\): only an integer 0-d view is an index, found float64$"):
        [1, 2][stridex.view(np.array(1.0))]
    ints4 = stridex.from_pointer(np.zeros(1, np.uint8).ctypes.data, (2,), "int4", owner=None)
    with pytest.raises(TypeError) as e:
        ints4.tolist()
    assert str(e.value) == (
        "tolist(): int4 elements have no Python scalar (numbers and booleans of 8 bits or more, one lane); "
        "np.asarray(view) reads them, with ml_dtypes for the small floats"
    )


# ---- the constraints of a C++ Arg<...>, from Python ---------------------------------------------


def test_view_checks_the_constraints_a_cpp_arg_checks():
    a = np.zeros((3, 2), dtype=np.float32)
    v = stridex.view(a, dtype="float32", ndim=2, shape=(None, 2), device="cpu", writable=True, contiguous="C")
    assert v.ptr == a.ctypes.data and v.shape == (3, 2)  # the same memory: nothing is ever copied
    assert stridex.view(a.T, contiguous="F").strides == (1, 2)


@pytest.mark.parametrize(
    "kwargs, expected",
    [
        ({"dtype": "float64"}, "stridex.View[dtype=float64]"),
        ({"ndim": 1}, "stridex.View[ndim=1]"),
        ({"shape": (None, 3)}, "stridex.View[shape=(*, 3)]"),
        ({"device": "cuda"}, "stridex.View[device=cuda]"),
        ({"device": "cuda:1"}, "stridex.View[device=cuda:1]"),
        ({"contiguous": "F"}, "stridex.View[order=F]"),
        ({"dtype": np.int32, "ndim": 2, "contiguous": True}, "stridex.View[dtype=int32, ndim=2, order=C]"),
    ],
)
def test_a_constraint_refusal_reads_as_the_casters_do(kwargs, expected):
    with pytest.raises(TypeError) as e:
        stridex.view(np.zeros((3, 2), dtype=np.float32), **kwargs)
    assert str(e.value) == (
        f"view(): expected {expected}, found float32, shape=(3, 2), strides=(2, 1), device=cpu, writable"
    )


def test_read_only_views_from_python():
    a = np.zeros(3)
    ro = stridex.view(a, writable=False)
    assert ro.readonly and ro.ptr == a.ctypes.data and not stridex.view(a).readonly
    assert not np.from_dlpack(ro).flags.writeable and not np.asarray(ro).flags.writeable
    assert stridex.view(ro).readonly  # a View of it stays read-only
    with pytest.raises(TypeError) as e:
        stridex.view(ro, writable=True)
    assert str(e.value) == (
        "view(): expected stridex.View[writable], found float64, shape=(3,), strides=(1,), device=cpu, read-only"
    )
    with pytest.raises(BufferError, match=r"^cannot copy into a read-only view$"):
        stridex.copy(ro, np.ones(3))


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"ndim": 2, "shape": (3,)}, ValueError, "view(): ndim=2 contradicts shape=(3,)"),
        ({"ndim": 99}, ValueError, "view(): ndim must be in [0, 64], found 99"),
        ({"shape": (-1,)}, ValueError, "view(): shape extents are >= 0 or None, found -1"),
        ({"shape": "3"}, TypeError, "view(): shape must be a sequence of ints and None (any extent), found str"),
        ({"writable": 1}, TypeError, "view(): writable must be True, False or None, found int"),
        ({"contiguous": "K"}, ValueError, "view(): contiguous must be 'C', 'F', True or None, found 'K'"),
    ],
)
def test_constraint_arguments_are_checked_before_the_import(kwargs, error, message):
    with pytest.raises(error) as e:
        stridex.view(np.zeros(3), **kwargs)
    assert str(e.value) == message


# ---- errors in the user's words ----------------------------------------------------------------


def test_copy_names_dst_and_src_in_plain_tuples():
    with pytest.raises(ValueError) as e:
        stridex.copy(np.empty(3), np.ones(4))
    assert str(e.value) == (
        "copy between different shapes: dst has shape (3,) with strides (1,), src has shape (4,) with strides (1,)"
    )
    with pytest.raises(ValueError) as e:
        stridex.copy(np.empty(3, np.float32), np.ones(3))
    assert (
        str(e.value)
        == "copy between different dtypes: dst is float32, src is float64 (stridex copies, it does not cast)"
    )


def test_empty_says_a_dtype_is_required():
    for call in (lambda: stridex.empty((2, 3)), lambda: stridex.empty((2, 3), None)):
        with pytest.raises(TypeError) as e:
            call()
        assert str(e.value) == (
            "empty(): a dtype is required (stridex has no default dtype), as in stridex.empty((2, 3), 'float32')"
        )


@pytest.mark.parametrize(
    "spelling, message",
    [
        (
            "U3",
            "dtype(): spec 'U3' (NumPy's dtype('<U3')) is not a dtype stridex has: stridex views hold numbers and "
            "booleans (a name such as int32, float16, bfloat16, complex64 or bool)",
        ),
        (
            "f16",
            "dtype(): spec 'f16' (NumPy's dtype('float128')) is not a dtype stridex has: invalid dtype: float with "
            "128 bits (float takes 16, 32 or 64); NumPy's letter codes count bytes ('f2' is float16)",
        ),
    ],
)
def test_dtype_errors_quote_the_users_spelling(spelling, message):
    with pytest.raises(TypeError) as e:
        stridex.dtype(spelling)
    assert str(e.value) == message


@pytest.mark.skipif(stridex.cuda_available(), reason="the message of a machine without a CUDA driver")
def test_cuda_entry_points_without_a_driver_say_so_and_point_to_cpu():
    for call in (stridex.memory_stats, lambda: stridex.empty(2, "float32", device="cuda")):
        with pytest.raises(RuntimeError) as e:
            call()
        assert str(e.value).endswith("; without a usable CUDA driver only host memory works (device='cpu')")
    assert stridex.memory_stats("cpu")["device"] == "cpu"  # host pools need no driver
