"""stridex.view(jax_array) takes the capsule from jaxlib's buffer_to_dlpack_managed_tensor, the
C++ function JAX's __dlpack__ ends in, without __dlpack__'s Python layers
(src/extension/import/import_jax.cpp). The rule it must keep: the View is the one __dlpack__ gives, and
wherever the shortcut is not certain, or fails, __dlpack__ answers in JAX's own words.

The oracle is the same array imported through __dlpack__: ArrayImpl.__dlpack__ replaced by a
wrapper that calls JAX's own and counts the calls (a __dlpack__ that is not JAX's own function is
always called)."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import textwrap
import weakref

import numpy as np
import pytest

import stridex
from conftest import needs_shortcut, shortcut_on
from quirky_producers import host_array
from stridex._stridex import _internals

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")
from jax._src import dlpack as jax_dlpack  # noqa: E402  (after the skip: JAX is optional)
from jaxlib import _jax  # noqa: E402

ArrayImpl = _jax.ArrayImpl
CPU = jax.devices("cpu")[0]


def describe(v):
    return (v.ptr, v.shape, v.strides, str(v.dtype), str(v.device), v.readonly, v.writability, v.stream)


def outcome(make):
    try:
        return describe(make())
    except Exception as e:  # noqa: BLE001 - the class and words of the error are what is compared
        return type(e), str(e)


def through_own_dlpack(monkeypatch) -> list:
    """Makes ArrayImpl.__dlpack__ a wrapper of JAX's own for the rest of the test, which stridex
    calls (the shortcut is for JAX's own __dlpack__ only). Returns the list of its calls."""
    own = ArrayImpl.__dlpack__
    calls = []

    def counting_dlpack(self, **kwargs):
        calls.append(kwargs)
        return own(self, **kwargs)

    monkeypatch.setattr(ArrayImpl, "__dlpack__", counting_dlpack)
    return calls


@pytest.fixture
def through_dlpack(monkeypatch):
    """through_own_dlpack for the whole test."""
    return through_own_dlpack(monkeypatch)


@pytest.fixture
def to_dlpack_calls(monkeypatch):
    """Counts the calls of jax's to_dlpack, which JAX's own __dlpack__ makes on every export."""
    own = jax_dlpack.to_dlpack
    calls = []

    def counting(*args, **kwargs):
        calls.append(kwargs)
        return own(*args, **kwargs)

    monkeypatch.setattr(jax_dlpack, "to_dlpack", counting)
    return calls


def cpu_array(values):
    return jax.device_put(values, CPU)


def test_jaxs_array_type_takes_the_shortcut(to_dlpack_calls):
    on = shortcut_on("jaxlib_export")  # off: __dlpack__ answers, layers and all
    assert _internals.jaxlib_export(ArrayImpl) is on
    assert not _internals.jaxlib_export(np.ndarray)
    j = cpu_array(np.arange(6, dtype=np.float32))
    v = stridex.view(j)
    assert len(to_dlpack_calls) == (0 if on else 1)  # __dlpack__'s layers were skipped
    to_dlpack_calls.clear()
    assert v.ptr == j.unsafe_buffer_pointer() and v.readonly
    j.__dlpack__()
    assert len(to_dlpack_calls) == 1  # the counter sees what __dlpack__ does


def test_a_patched_dlpack_is_called_instead(through_dlpack):
    assert not _internals.jaxlib_export(ArrayImpl)
    j = cpu_array(np.arange(3, dtype=np.int32))
    v = stridex.view(j)
    assert len(through_dlpack) == 1
    assert v.ptr == j.unsafe_buffer_pointer()


CASES = [
    (np.float32, (3, 4)),
    (np.float16, (5,)),
    (np.float64, ()),
    (np.int8, (2, 3, 4)),
    (np.uint64, (7,)),
    (np.bool_, (4, 2)),
    (np.complex64, (3,)),
    (np.int32, (0,)),
    (np.float32, (0, 3)),
    (np.uint8, (1, 1, 1)),
]


@pytest.mark.parametrize(("dtype", "shape"), CASES, ids=[f"{np.dtype(d).name}-{s}" for d, s in CASES])
def test_same_view_as_dlpack(dtype, shape, monkeypatch):
    j = cpu_array(np.arange(int(np.prod(shape)), dtype=np.float64).astype(dtype).reshape(shape))
    fast = outcome(lambda: stridex.view(j))
    through_own_dlpack(monkeypatch)
    assert fast == outcome(lambda: stridex.view(j))
    if j.size:
        np.testing.assert_array_equal(host_array(stridex.view(j)), np.asarray(j))


def test_bfloat16_and_the_views_lifetime(collect):
    j = cpu_array(np.arange(8, dtype=np.float32)).astype(jnp.bfloat16) * 2
    alive = weakref.ref(j)
    v = stridex.view(j)
    del j
    collect()
    assert v.dtype == "bfloat16"
    np.testing.assert_array_equal(host_array(v).astype(np.float32), np.arange(8) * 2)
    del v
    collect()
    assert alive() is None  # JAX's capsule released what it held: nothing leaked


def test_many_imports_release_what_they_hold(collect):
    # JAX's capsule references the array it was made from (here the array itself); each View's
    # release drops that reference again, exactly once.
    j = cpu_array(np.ones(1000, np.float32))
    before = sys.getrefcount(j)
    views = [stridex.view(j) for _ in range(100)]
    assert sys.getrefcount(j) > before
    del views
    collect()
    assert sys.getrefcount(j) == before


def test_a_deleted_array_gets_jaxs_own_error(to_dlpack_calls, monkeypatch):
    j = cpu_array(np.ones(3, np.float32))
    j.delete()
    fast = outcome(lambda: stridex.view(j))  # the shortcut fails, and __dlpack__ answers
    assert len(to_dlpack_calls) == 1
    assert fast[0] is BufferError and "deleted" in fast[1]
    through_own_dlpack(monkeypatch)
    assert outcome(lambda: stridex.view(j)) == fast


# A producer that deletes or donates its array while Views of it (or their consumers) live: the
# process must survive as it does natively (jaxlib keeps the buffer for the external reference of
# the capsule). Each case runs in a child: an abort must fail the test, not end the suite.
DELETION_CASES = {
    "delete, the View alive": "v = stridex.view(y); y.delete(); print(np.from_dlpack(v).tolist())",
    "delete, a NumPy consumer alive": "a = np.from_dlpack(stridex.view(y)); y.delete(); print(a.tolist())",
    "donate to jit, the View alive": (
        "v = stridex.view(y); z = jax.jit(lambda t: t + 1, donate_argnums=0)(y); "
        "print(np.from_dlpack(v).tolist(), np.asarray(z).tolist())"
    ),
}


@pytest.mark.parametrize("shortcuts", ["on", "off"])
@pytest.mark.parametrize("case", list(DELETION_CASES))
def test_the_producer_may_delete_or_donate_its_array_while_views_live(case, shortcuts):
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    if shortcuts == "off":
        env["STRIDEX_DISABLE_SHORTCUTS"] = "jaxlib_export"
    script = "import warnings, numpy as np, jax, jax.numpy as jnp, stridex\n"
    script += "warnings.simplefilter('ignore')\n"  # JAX warns that a referenced donation is copied
    script += "y = jnp.arange(3.0)\n" + DELETION_CASES[case] + "\n"
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.startswith("[0.0, 1.0, 2.0]")  # the View's data is intact


@pytest.fixture
def failing_export():
    """Makes jaxlib's export function raise `error_type` when the shortcut calls it (positionally,
    as stridex does; JAX's own layers pass the stream by keyword and still get the real one). A
    new exception each time: one kept by the stand-in would keep its traceback's frames alive."""
    own = _jax.buffer_to_dlpack_managed_tensor
    stand_ins = []

    def make(error_type, calls=None):
        def export(buffer, *args, **kwargs):
            if args:
                if calls is not None:
                    calls.append(1)
                raise error_type("raised by the test's stand-in")
            return own(buffer, **kwargs)

        _jax.buffer_to_dlpack_managed_tensor = export
        _internals.clear_type_cache()  # found again at the next probe: the stand-in
        stand_ins.append(weakref.ref(export))

    yield make
    _jax.buffer_to_dlpack_managed_tensor = own
    _internals.clear_type_cache()
    # The next probe finds jaxlib's own function again and lets the stand-in go.
    stridex.view(cpu_array(np.zeros(1, np.float32)))
    gc.collect()
    assert [ref() for ref in stand_ins] == [None] * len(stand_ins)  # released, not leaked


def test_an_exception_of_the_shortcut_leaves_the_answer_to_dlpack(failing_export, to_dlpack_calls):
    failing_export(ValueError)
    j = cpu_array(np.arange(4, dtype=np.float32))
    v = stridex.view(j)
    assert len(to_dlpack_calls) == 1
    assert v.ptr == j.unsafe_buffer_pointer() and v.readonly


@needs_shortcut("jaxlib_export")
def test_a_type_error_turns_the_shortcut_off(failing_export, to_dlpack_calls):
    # What a jaxlib whose function takes other arguments raises: asked once, then not again.
    calls = []
    failing_export(TypeError, calls)
    j = cpu_array(np.arange(4, dtype=np.float32))
    for _ in range(3):
        assert stridex.view(j).ptr == j.unsafe_buffer_pointer()
    assert (len(calls), len(to_dlpack_calls)) == (1, 3)


@needs_shortcut("jaxlib_export")
def test_a_keyboard_interrupt_in_the_shortcut_is_the_answer(failing_export, to_dlpack_calls):
    failing_export(KeyboardInterrupt)
    with pytest.raises(KeyboardInterrupt):
        stridex.view(cpu_array(np.arange(4, dtype=np.float32)))
    assert to_dlpack_calls == []


def test_stream_arguments_on_the_cpu_are_as_before(to_dlpack_calls):
    # The host takes no stream: stridex sends None whatever the caller asked, on the shortcut too.
    j = cpu_array(np.ones((2, 2), np.float32))
    streams = (None, 1, 2, 12345, -1, stridex.NO_SYNC)
    for stream in streams:
        v = stridex.view(j, stream=stream)
        assert v.stream is None and v.device == "cpu"
    assert len(to_dlpack_calls) == (0 if shortcut_on("jaxlib_export") else len(streams))


def cpu_jax_env(**extra) -> dict:
    """The environment of a fresh interpreter that imports what this one does, JAX on its CPU."""
    return dict(os.environ, JAX_PLATFORMS="cpu", PYTHONPATH=os.pathsep.join(p for p in sys.path if p), **extra)


def run_isolated(code: str) -> str:
    """Runs `code` in a fresh interpreter with two CPU devices (XLA's flag must be set before JAX
    starts) and returns what it printed."""
    env = cpu_jax_env(XLA_FLAGS="--xla_force_host_platform_device_count=2")
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_arrays_on_two_devices_are_refused_as_jax_refuses_them():
    out = run_isolated("""
        import jax, numpy as np, stridex
        from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
        from jax._src import dlpack as jd
        calls = []
        own = jd.to_dlpack
        jd.to_dlpack = lambda *a, **k: (calls.append(1), own(*a, **k))[1]
        devices = jax.devices("cpu")
        assert len(devices) == 2
        mesh = Mesh(np.array(devices), ("x",))
        x = np.arange(8, dtype=np.float32)
        for name, spec in (("split", P("x")), ("replicated", P())):
            a = jax.device_put(x, NamedSharding(mesh, spec))
            try:
                stridex.view(a)
                print(name, "imported")
            except BufferError as e:
                print(name, "BufferError", "singular device" in str(e))
        # One device, but not a SingleDeviceSharding: __dlpack__ is asked, and exports it.
        one = jax.device_put(x, NamedSharding(Mesh(np.array(devices[1:]), ("x",)), P()))
        v = stridex.view(one)
        print("one", len(calls), v.ptr == one.unsafe_buffer_pointer(), float(np.asarray(one)[3]))
    """)
    assert out.split("\n")[:3] == ["split BufferError True", "replicated BufferError True", "one 1 True 3.0"]


# ---- GPU ----------------------------------------------------------------------------------------


@needs_shortcut("jaxlib_export")
def test_gpu_arrays_same_view_for_every_stream(jax_gpu, to_dlpack_calls, monkeypatch):
    torch = pytest.importorskip("torch")
    side = torch.cuda.Stream()
    streams = [None, stridex.NO_SYNC, -1, 1, side.cuda_stream]
    j = jax.device_put(np.arange(12, dtype=np.float32).reshape(3, 4), jax_gpu[1])
    fast = [outcome(lambda s=s: stridex.view(j, stream=s)) for s in streams]
    assert to_dlpack_calls == []
    through_own_dlpack(monkeypatch)
    assert fast == [outcome(lambda s=s: stridex.view(j, stream=s)) for s in streams]
    assert fast[0][4].startswith("cuda") and fast[0][0] == j.unsafe_buffer_pointer()
    assert fast[-1][-1] == side.cuda_stream  # ordered on the stream asked for


WORKER = """
import sys
import numpy as np
import jax
import stridex
from jax.sharding import SingleDeviceSharding

process, port = int(sys.argv[1]), sys.argv[2]
jax.config.update("jax_cpu_collectives_implementation", "gloo")
jax.distributed.initialize(coordinator_address=f"127.0.0.1:{port}", num_processes=2, process_id=process)
remote = next(d for d in jax.devices() if d.process_index != process)
elsewhere = jax.make_array_from_single_device_arrays((4,), SingleDeviceSharding(remote), [], dtype=np.float32)
print("ready", flush=True)
try:
    stridex.view(elsewhere)
    print("imported")
except BufferError as e:
    print("BufferError", "no addressable shards" in str(e))
here = jax.device_put(np.arange(4, dtype=np.float32), jax.local_devices()[0])
print("local", stridex.view(here).ptr == here.unsafe_buffer_pointer(), flush=True)
jax.distributed.shutdown()
"""


def test_an_array_on_another_processs_device_gets_jaxs_error_not_a_crash(tmp_path):
    # jaxlib's export function alone reads a buffer such an array does not have (a segmentation
    # fault); __dlpack__ raises. Two CPU processes of one JAX program on this machine.
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    workers = [
        subprocess.Popen(
            [sys.executable, str(script), str(i), str(port)],
            env=cpu_jax_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(2)
    ]
    results = [w.communicate(timeout=240) for w in workers]
    for w, (out, err) in zip(workers, results):
        if "ready" not in out:
            pytest.skip(f"no two-process JAX program here: {err.strip().splitlines()[-1:]}")
        assert w.returncode == 0, err[-2000:]  # a crash is -11
        assert out.split("\n")[1:3] == ["BufferError True", "local True"], out
