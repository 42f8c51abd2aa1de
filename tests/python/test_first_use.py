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
