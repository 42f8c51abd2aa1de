"""The framework shortcuts (src/extension/stream/shortcuts.cpp): one registry, a switch at import
(STRIDEX_DISABLE_SHORTCUTS) and at run time (stridex.set_shortcuts, stridex.shortcuts_disabled), and
for each shortcut, what turning it off changes: its public protocol answers instead, with the same
View. The last test runs the import suite with every shortcut off, in a fresh interpreter."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import types
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

import stridex
from conftest import cuda_device_count

_internals = stridex._stridex._internals
HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
NAMES = ["numpy_struct", "cupy_c_api", "cupy_layout", "jaxlib_export", "torch_getter", "torch_borrowed"]


def states() -> dict[str, bool]:
    return {s.name: s.enabled for s in stridex.shortcuts()}


@pytest.fixture
def restore():
    """Whatever a test switches, the run goes on as it was (this run may have some off already)."""
    before = states()
    yield
    stridex.set_shortcuts(before)


def describe(v):
    return (v.ptr, v.shape, v.strides, str(v.dtype), str(v.device), v.readonly, v.writability, v.stream)


# ---- the registry ---------------------------------------------------------------------------------


def test_the_registry_says_what_each_reads_where_it_was_checked_and_what_replaces_it():
    shortcuts = stridex.shortcuts()
    assert [s.name for s in shortcuts] == NAMES
    assert [s.framework for s in shortcuts] == ["numpy", "cupy", "cupy", "jax", "torch", "torch"]
    for s in shortcuts:
        assert isinstance(s, stridex.Shortcut) and isinstance(s.enabled, bool)
        assert s.reads and s.checked and s.fallback
        assert (ROOT / s.source).is_file(), s.source
        assert repr(s) == f"stridex.Shortcut('{s.name}', framework='{s.framework}', enabled={s.enabled})"
    assert "__dlpack__" in {s.name: s for s in shortcuts}["numpy_struct"].fallback


def test_the_quirk_rows_name_their_shortcuts_apart_from_their_quirks():
    rows = {r["name"]: r for r in _internals.producer_rows()}
    named = {name: r["shortcuts"] for name, r in rows.items() if r["shortcuts"]}
    assert named == {
        "numpy": ["numpy_struct"],
        "torch": ["torch_getter", "torch_borrowed"],
        "jax": ["jaxlib_export"],
        "cupy": ["cupy_c_api", "cupy_layout"],
    }
    # the older rows' versions were never checked with any shortcut
    assert rows["numpy<2.1"]["shortcuts"] == rows["jax<0.4.27"]["shortcuts"] == rows["cupy<13.4"]["shortcuts"] == []
    for gone in ("array_struct", "jaxlib_export", "borrows_exchange_tensors"):
        assert gone not in rows["generic"]  # performance is no quirk column any more


# ---- the run-time switch --------------------------------------------------------------------------


def test_set_shortcuts_returns_the_previous_state_which_restores_it(restore):
    before = states()
    assert stridex.set_shortcuts(False) == before
    assert states() == dict.fromkeys(NAMES, False)
    assert stridex.set_shortcuts({"jaxlib_export": True, "numpy_struct": False}) == dict.fromkeys(NAMES, False)
    assert states() == {**dict.fromkeys(NAMES, False), "jaxlib_export": True}
    assert stridex.set_shortcuts(True) == {**dict.fromkeys(NAMES, False), "jaxlib_export": True}
    assert states() == dict.fromkeys(NAMES, True)
    stridex.set_shortcuts(before)
    assert states() == before


@pytest.mark.parametrize(
    "argument,error,words",
    [
        ("off", TypeError, "stridex.set_shortcuts() takes True, False or a dict of shortcut names to bools, found str"),
        (0, TypeError, "stridex.set_shortcuts() takes True, False or a dict of shortcut names to bools, found int"),
        (
            ["numpy_struct"],
            TypeError,
            "stridex.set_shortcuts() takes True, False or a dict of shortcut names to bools, found list",
        ),
        (
            {"numpy_struct": False, "numpy": False},
            ValueError,
            "stridex.set_shortcuts(): there is no shortcut named 'numpy' (known: numpy_struct, cupy_c_api, cupy_layout, "
            "jaxlib_export, torch_getter, torch_borrowed)",
        ),
        (
            {"numpy_struct": 0},
            TypeError,
            "stridex.set_shortcuts(): the value for 'numpy_struct' must be True or False, found int",
        ),
        ({1: False}, TypeError, "stridex.set_shortcuts(): shortcut names are str, found int"),
    ],
)
def test_a_bad_argument_changes_nothing(restore, argument, error, words):
    before = states()
    with pytest.raises(error) as e:
        stridex.set_shortcuts(argument)
    assert str(e.value) == words
    assert states() == before  # checked whole before anything changed


def test_shortcuts_disabled_restores_each_as_it_was_even_after_an_error(restore):
    stridex.set_shortcuts({"jaxlib_export": False})
    before = states()
    with stridex.shortcuts_disabled("numpy_struct"):
        assert states() == {**before, "numpy_struct": False}
    assert states() == before
    with pytest.raises(RuntimeError, match="inside"):
        with stridex.shortcuts_disabled():
            assert not any(states().values())
            raise RuntimeError("inside")
    assert states() == before  # jaxlib_export stays off: it was off before
    with pytest.raises(ValueError, match="no shortcut named 'nope'"):
        with stridex.shortcuts_disabled("numpy_struct", "nope"):
            pass
    assert states() == before


def test_a_change_of_the_switch_probes_every_type_again(restore):
    a = np.zeros(3)
    stridex.view(a)
    hits, fills, _ = _internals.cache_stats()
    stridex.view(a)
    assert _internals.cache_stats()[:2] == (hits + 1, fills)
    stridex.set_shortcuts(states())  # no change: the cache stays
    stridex.view(a)
    assert _internals.cache_stats()[:2] == (hits + 2, fills)
    stridex.set_shortcuts({"numpy_struct": not states()["numpy_struct"]})
    stridex.view(a)
    assert _internals.cache_stats()[:2] == (hits + 2, fills + 1)  # probed again under the new setting


# ---- each shortcut off: its public protocol answers, with the same View ----------------------------


NUMPY_ARRAYS = [
    lambda: np.arange(12, dtype=np.float32).reshape(3, 4),
    lambda: np.arange(24, dtype=np.int16).reshape(4, 6)[::2, 1::-1],
    lambda: np.array(2.5),
    lambda: np.zeros((0, 3), np.uint8),
    lambda: np.broadcast_to(np.arange(3.0), (4, 3)),  # read-only, zero strides
    lambda: np.arange(6, dtype=">f4" if np.little_endian else "<f4"),  # refused both ways
    lambda: np.arange(4, dtype=np.longdouble),  # __dlpack__ decides both ways
]


def outcome(make):
    try:
        return describe(make())
    except Exception as e:  # noqa: BLE001 - the class and words of the error are what is compared
        return type(e).__name__, str(e)


def test_numpy_struct_off_asks_dlpack_and_gets_the_same_views(restore):
    stridex.set_shortcuts({"numpy_struct": True})
    arrays = [make() for make in NUMPY_ARRAYS]
    assert _internals.shortcuts_of(np.ndarray) == ["numpy_struct"]
    through = [outcome(lambda a=a: stridex.view(a)) for a in arrays]
    with stridex.shortcuts_disabled("numpy_struct"):
        assert _internals.shortcuts_of(np.ndarray) == [] and _internals.array_struct(np.ndarray) is None
        assert [outcome(lambda a=a: stridex.view(a)) for a in arrays] == through


def test_jaxlib_export_off_calls_jaxs_own_dlpack(restore, monkeypatch):
    jax = pytest.importorskip("jax")
    from jax._src import dlpack as jax_dlpack
    from jaxlib import _jax

    calls = []
    own = jax_dlpack.to_dlpack
    monkeypatch.setattr(jax_dlpack, "to_dlpack", lambda *a, **k: (calls.append(k), own(*a, **k))[1])
    stridex.set_shortcuts({"jaxlib_export": True})
    j = jax.device_put(np.arange(6, dtype=np.float32), jax.devices("cpu")[0])
    assert _internals.shortcuts_of(_jax.ArrayImpl) == ["jaxlib_export"]
    through = describe(stridex.view(j))
    assert calls == []
    with stridex.shortcuts_disabled("jaxlib_export"):
        assert _internals.shortcuts_of(_jax.ArrayImpl) == []
        assert describe(stridex.view(j)) == through
        assert len(calls) == 1  # __dlpack__'s layers, which the shortcut skips


@pytest.fixture
def torch_like():
    """A test exchange producer on torch's quirk row, counting how requires_grad is read: its
    requires_grad is a C getset (object.__class__'s, harmless on any object) as torch's is, and every
    attribute read through the instance passes __getattribute__."""
    import stridex_testing

    read = []

    class Tensor(stridex_testing.ExchangeProducer):
        requires_grad = object.__dict__["__class__"]

        def __getattribute__(self, name):
            read.append(name)
            return super().__getattribute__(name)

    Tensor.__module__ = "torch"
    if _internals.producer_for(Tensor) != "torch":
        pytest.skip("the installed torch predates 2.9: its row takes no shortcut")
    return Tensor, read, stridex_testing


@pytest.mark.skipif(_internals.stable_abi, reason="the abi3 build reads requires_grad by attribute only")
def test_torch_getter_off_reads_requires_grad_by_attribute(restore, torch_like):
    Tensor, read, _ = torch_like
    stridex.set_shortcuts({"torch_getter": True})
    assert "torch_getter" in _internals.shortcuts_of(Tensor)
    t = Tensor(np.zeros(3, np.float32))
    through = describe(stridex.view(t))
    assert "requires_grad" not in read  # the getter was called directly
    with stridex.shortcuts_disabled("torch_getter"):
        assert "torch_getter" not in _internals.shortcuts_of(Tensor)
        assert describe(stridex.view(t)) == through
    assert "requires_grad" in read


def test_torch_borrowed_off_takes_the_managed_tensor(restore, torch_like):
    Tensor, _, testing = torch_like
    stridex.set_shortcuts({"torch_borrowed": True})
    assert "torch_borrowed" in _internals.shortcuts_of(Tensor)
    t = Tensor(np.arange(6, dtype=np.float32)[::2])
    managed, borrowed = testing.exchange_calls()[0], testing.borrow_calls()
    through = describe(stridex.view(t))
    assert (testing.exchange_calls()[0], testing.borrow_calls()) == (managed, borrowed + 1)
    with stridex.shortcuts_disabled("torch_borrowed"):
        assert "torch_borrowed" not in _internals.shortcuts_of(Tensor)
        assert describe(stridex.view(t)) == through
    assert (testing.exchange_calls()[0], testing.borrow_calls()) == (managed + 1, borrowed + 1)


def test_cupy_c_api_off_is_not_taken(restore, monkeypatch):
    # Without a GPU: a module named cupy whose ndarray is a Python class, with a stand-in of CuPy
    # 14.3's C API for exactly that type (test_import_cupy.py compares the paths on a GPU).
    import stridex_testing

    for name in [n for n in sys.modules if n == "cupy" or n.startswith(("cupy.", "cupy_backends"))]:
        monkeypatch.delitem(sys.modules, name)
    cupy = types.ModuleType("cupy")
    cupy.__version__ = "14.3.0"
    runtime = types.ModuleType("cupy_backends.cuda.api.runtime")
    runtime.is_hip = False
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    monkeypatch.setitem(sys.modules, "cupy_backends.cuda.api.runtime", runtime)
    cupy.ndarray = type("ndarray", (), {"__module__": "cupy", "__dlpack__": lambda self, **kw: None})
    cupy._public_c_api = stridex_testing.fake_cupy_api(cupy.ndarray)
    try:
        stridex.set_shortcuts({"cupy_c_api": True})
        assert _internals.shortcuts_of(cupy.ndarray) == ["cupy_c_api"]
        with stridex.shortcuts_disabled("cupy_c_api"):
            # ... and the layout does not stand in for it: it is CuPy 13.4 to 14.2's alone
            assert _internals.shortcuts_of(cupy.ndarray) == [] and _internals.array_struct(cupy.ndarray) is None
    finally:
        _internals.clear_type_cache()


@pytest.mark.skipif(cuda_device_count() == 0, reason="CuPy's arrays need a CUDA device")
def test_cupy_shortcuts_off_ask_dlpack_and_get_the_same_views(restore):
    cupy = pytest.importorskip("cupy")
    stridex.set_shortcuts(True)
    taken = _internals.shortcuts_of(cupy.ndarray)
    assert taken in (["cupy_c_api"], ["cupy_layout"])
    arrays = [
        cupy.arange(24, dtype=cupy.float32).reshape(4, 6)[::-1, 1::2],
        cupy.zeros((), cupy.int8),
        cupy.ones((3, 0), cupy.float16),
    ]
    s = cupy.cuda.Stream(non_blocking=True)
    through = [outcome(lambda a=a, st=st: stridex.view(a, stream=st)) for a in arrays for st in (None, s)]
    with stridex.shortcuts_disabled(*taken):
        assert _internals.shortcuts_of(cupy.ndarray) == []
        assert [outcome(lambda a=a, st=st: stridex.view(a, stream=st)) for a in arrays for st in (None, s)] == through


def test_torch_shortcuts_off_give_the_same_views_and_refusals(restore):
    torch = pytest.importorskip("torch")
    stridex.set_shortcuts(True)
    tensors = [
        torch.arange(12.0).reshape(3, 4)[:, ::2],
        torch.zeros(3, dtype=torch.int32),
        torch.tensor(1.5),
        torch.ones(3, requires_grad=True),
        torch.ones(3, dtype=torch.complex64).conj(),
    ]
    if cuda_device_count():
        tensors += [t.cuda() for t in tensors[:3]]
    through = [outcome(lambda t=t: stridex.view(t)) for t in tensors]
    assert "require gradient" in through[3][1] and "conjugate bit" in through[4][1]
    with stridex.shortcuts_disabled("torch_getter", "torch_borrowed"):
        assert not {"torch_getter", "torch_borrowed"} & set(_internals.shortcuts_of(torch.Tensor))
        assert [outcome(lambda t=t: stridex.view(t)) for t in tensors] == through


# ---- the switch at import ---------------------------------------------------------------------------


def fresh(code: str, disable: str | None, *flags: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    env.pop("STRIDEX_DISABLE_SHORTCUTS", None)
    if disable is not None:
        env["STRIDEX_DISABLE_SHORTCUTS"] = disable
    return subprocess.run([sys.executable, *flags, "-c", code], env=env, capture_output=True, text=True, timeout=120)


STATES = "import stridex; print(','.join(s.name for s in stridex.shortcuts() if not s.enabled))"


@pytest.mark.parametrize(
    "disable,off",
    [
        (None, ""),
        ("", ""),
        ("all", ",".join(NAMES)),
        (" jaxlib_export , numpy_struct,", "numpy_struct,jaxlib_export"),
        ("torch_borrowed,all", ",".join(NAMES)),
    ],
)
def test_the_environment_variable_turns_shortcuts_off_at_import(disable, off):
    done = fresh(STATES, disable)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == off and done.stderr == ""


def test_an_unknown_name_in_the_variable_is_a_warning_and_nothing_else():
    done = fresh(STATES, "cupy_layout,numpy-struct")
    assert done.returncode == 0 and done.stdout.strip() == "cupy_layout"
    assert (
        "RuntimeWarning: STRIDEX_DISABLE_SHORTCUTS names no shortcut 'numpy-struct' (known: all, numpy_struct, "
        "cupy_c_api, cupy_layout, jaxlib_export, torch_getter, torch_borrowed); it is ignored"
    ) in done.stderr
    refused = fresh(STATES, "numpy-struct", "-W", "error::RuntimeWarning")  # warnings as errors: the import fails
    assert refused.returncode != 0 and "names no shortcut 'numpy-struct'" in refused.stderr


def test_the_variable_reaches_imports_through_the_casters_too():
    # One switch for stridex.view() and the C++ casters alike (both import through _stridex).
    done = fresh(
        "import numpy as np, stridex; from stridex._stridex import _internals; "
        "print(_internals.shortcuts_of(np.ndarray), _internals.array_struct(np.ndarray))",
        "numpy_struct",
    )
    assert done.stdout.split() == ["[]", "None"], done.stderr


# ---- the import suite with every shortcut off ---------------------------------------------------------

# Everything that imports arrays: the importers' own suites, the quirk rows, the casters (their imports
# go through the same door), hostile input, writability and the details the frameworks' suites check.
OFF_SUITE = sorted(p.name for p in HERE.glob("test_import*.py")) + [
    "test_stream_policy.py",
    "test_caster_api.py",
    "test_adversarial.py",
    "test_writability.py",
    "test_writability_gpu.py",
    "test_faithful_details.py",
]


@pytest.mark.skipif(not all(states().values()), reason="this run has shortcuts off already: it is that run")
def test_the_import_suite_passes_with_every_shortcut_off(tmp_path):
    report = tmp_path / "off.xml"
    env = dict(os.environ, STRIDEX_DISABLE_SHORTCUTS="all", PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    # Not -q: the header (conftest.py's pytest_report_header) says which shortcuts are off.
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", f"--junitxml={report}", *OFF_SUITE],
        cwd=HERE,
        env=env,
        capture_output=True,
        text=True,
        timeout=1500,
    )
    summary = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    assert done.returncode == 0, f"{summary}\n{done.stdout[-6000:]}\n{done.stderr[-2000:]}"
    assert "shortcuts off: " + ", ".join(NAMES) in done.stdout  # the header of the run: all off
    passed: dict[str, int] = {}
    for case in ET.parse(report).iter("testcase"):
        if not any(child.tag in ("skipped", "failure", "error") for child in case):
            # classname: tests.python.test_import_numpy (and a class, where the test is in one)
            module = next((part for part in case.get("classname", "").split(".") if part.startswith("test_")), "")
            passed[module] = passed.get(module, 0) + 1
    # The tests ran rather than skipped: NumPy's (always here) and JAX's, where JAX is installed.
    assert passed.get("test_import_numpy", 0) >= 40, passed
    assert passed.get("test_import", 0) >= 40, passed
    try:
        import jax  # noqa: F401
    except ImportError:
        pass
    else:
        assert passed.get("test_import_jax", 0) >= 15, passed
    assert sum(passed.values()) >= 500, (summary, passed)
    assert re.search(r"\d+ passed", summary), summary
