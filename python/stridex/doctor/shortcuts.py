"""``python -m stridex doctor``'s shortcut check: each framework shortcut stridex takes
(``stridex.shortcuts()``, src/extension/stream/shortcuts.cpp) against the framework's public protocol, on
this machine.

For every shortcut whose framework is installed (and among ``--frameworks``, where given), arrays
the framework makes on each device checked are imported twice: with that shortcut alone on, and with
every shortcut off (the public protocol: ``__dlpack__``, or the exchange API's managed tensor and
``getattr``), for the default stream and, on GPUs, a stream of the framework's own. The two must
agree on the pointer, shape, strides, dtype, device, read-only flag, writability and stream, or
fail alike (the same exception type and words). A shortcut is checked whether it is on or off here
(STRIDEX_DISABLE_SHORTCUTS): the check says whether it can be trusted on this machine. One that this
framework version does not take is skipped, with why.

The checks run in a child process (``python -m stridex.doctor.shortcuts``), which streams its results
as JSON lines: a shortcut that crashes it is a failure that names the signal, and the rest go on in a
new child. A disagreement or a crash makes the doctor's exit status 1 (docs/doctor.md).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.util
import json
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from typing import Any

PASS, FAIL, SKIP = "pass", "fail", "skip"
FIELDS = ("ptr", "shape", "strides", "dtype", "device", "readonly", "writability", "stream")


@dataclass
class ShortcutCheck:
    name: str
    framework: str
    status: str  # pass, fail, skip
    enabled: bool  # its state in the doctor's process (STRIDEX_DISABLE_SHORTCUTS)
    version: str | None = None  # the framework's
    compared: int = 0  # imports compared, through the shortcut and through the public protocol
    detail: str = ""  # the first disagreement, or why it was skipped

    @classmethod
    def from_json(cls, d: dict) -> ShortcutCheck:
        return cls(**d)


@dataclass
class Sample:
    label: str  # e.g. "cpu float32 (3, 4)"
    make: Callable[[], Any]  # the array, made anew for each stream (both imports see the same one)
    streams: tuple = (None,)  # stream arguments to import with
    # How the framework frees the array while others still reference it (JAX: Array.delete()), or
    # None: the View taken through the shortcut must survive it with its data, as the framework's
    # own DLPack consumers do (a hold the public protocol would not take can abort the process).
    delete: Callable[[Any], None] | None = None


# ---- the arrays each framework makes ------------------------------------------------------------


def _numpy_samples(np: Any, devices: list[str]) -> list[Sample]:
    if "cpu" not in devices:
        return []
    swapped = ">f4" if np.little_endian else "<f4"
    readonly = np.arange(6.0).reshape(2, 3)
    readonly.flags.writeable = False
    return [
        Sample(f"cpu {label}", make)
        for label, make in [
            ("float32 (3, 4)", lambda: np.arange(12, dtype=np.float32).reshape(3, 4)),
            ("float32 strided", lambda: np.arange(24, dtype=np.float32).reshape(4, 6)[::2, 1::2]),
            ("float32 negative strides", lambda: np.arange(12, dtype=np.float32).reshape(3, 4)[::-1, ::-1]),
            ("int64 F order", lambda: np.asfortranarray(np.arange(12).reshape(3, 4))),
            ("float64 0-d", lambda: np.array(2.5)),
            ("float32 empty", lambda: np.zeros((0, 3), np.float32)),
            ("bool", lambda: np.array([[True, False, True]])),
            ("float16", lambda: np.arange(4, dtype=np.float16)),
            ("complex64", lambda: np.arange(3, dtype=np.complex64)),
            ("read-only", lambda: readonly),
            ("broadcast (zero strides)", lambda: np.broadcast_to(np.arange(3.0), (4, 3))),
            ("byte-swapped (refused)", lambda: np.arange(6, dtype=swapped)),
            ("long double (DLPack decides)", lambda: np.arange(4, dtype=np.longdouble)),
        ]
    ]


def _delete(x: Any) -> None:
    x.delete()


def _jax_samples(jax: Any, devices: list[str]) -> list[Sample]:
    import numpy as np

    out = []
    # jax.devices() lists the default backend's alone (the GPUs, where there are any): the CPU's
    # devices are asked for by name.
    found = list(jax.devices())
    try:
        found += [d for d in jax.devices("cpu") if d not in found]
    except RuntimeError:  # a JAX without its CPU backend
        pass
    for d in found:
        name = "cpu" if d.platform == "cpu" else f"cuda:{d.id}" if d.platform == "gpu" else None
        if name not in devices:
            continue
        put = lambda x, d=d: jax.device_put(x, d)  # noqa: E731
        streams = (None,) if name == "cpu" else (None, 1)  # JAX takes no stream object of its own

        def deleted(put=put):
            x = put(np.zeros(3, np.float32))
            x.delete()
            return x

        out += [
            Sample(f"{name} {label}", make, streams, delete)
            for label, make, delete in [
                ("float32 (3, 4)", lambda put=put: put(np.arange(12, dtype=np.float32).reshape(3, 4)), _delete),
                (
                    "bfloat16",
                    lambda put=put: put(np.arange(6, dtype=np.float32)).astype(jax.numpy.bfloat16),
                    _delete,
                ),
                ("int8 0-d", lambda put=put: put(np.int8(3)), _delete),
                ("float32 empty", lambda put=put: put(np.zeros((0, 3), np.float32)), _delete),
                ("bool", lambda put=put: put(np.array([True, False])), _delete),
                ("deleted (refused)", deleted, None),
            ]
        ]
    return out


def _cupy_samples(cupy: Any, devices: list[str]) -> list[Sample]:
    out = []
    for name in devices:
        if not name.startswith("cuda:"):
            continue
        ordinal = int(name[5:])

        def on(make, ordinal=ordinal):
            def made():
                with cupy.cuda.Device(ordinal):
                    return make()

            return made

        with cupy.cuda.Device(ordinal):
            stream = cupy.cuda.Stream(non_blocking=True)
        out += [
            Sample(f"{name} {label}", on(make), (None, stream))
            for label, make in [
                ("float32 (3, 4)", lambda: cupy.arange(12, dtype=cupy.float32).reshape(3, 4)),
                ("float32 negative strides", lambda: cupy.arange(24, dtype=cupy.float32).reshape(4, 6)[::-1, 1::2]),
                ("int8 0-d", lambda: cupy.zeros((), cupy.int8)),
                ("float16", lambda: cupy.arange(4, dtype=cupy.float16)),
                ("bool", lambda: cupy.zeros(3, cupy.bool_)),
                ("float32 empty", lambda: cupy.zeros((0, 3), cupy.float32)),
                ("managed memory", lambda: cupy.ndarray((4,), cupy.float32, memptr=cupy.cuda.malloc_managed(16))),
            ]
        ]
    return out


def _torch_samples(torch: Any, devices: list[str]) -> list[Sample]:
    out = []
    for name in devices:
        if name.startswith("cuda:") and not torch.cuda.is_available():
            continue
        device = "cpu" if name == "cpu" else name
        streams = (None,) if name == "cpu" else (None, torch.cuda.Stream(device=device))
        out += [
            Sample(f"{name} {label}", lambda make=make, device=device: make(device), streams)
            for label, make in [
                ("float32 strided", lambda d: torch.arange(12.0, device=d).reshape(3, 4)[:, ::2]),
                ("int32", lambda d: torch.zeros(3, dtype=torch.int32, device=d)),
                ("float64 0-d", lambda d: torch.tensor(1.5, dtype=torch.float64, device=d)),
                ("bool", lambda d: torch.zeros(2, dtype=torch.bool, device=d)),
                ("bfloat16", lambda d: torch.ones(3, dtype=torch.bfloat16, device=d)),
                ("complex64", lambda d: torch.ones(2, dtype=torch.complex64, device=d)),
                ("requires grad (refused)", lambda d: torch.ones(3, device=d, requires_grad=True)),
                ("conjugate view (refused)", lambda d: torch.ones(2, dtype=torch.complex64, device=d).conj()),
            ]
        ]
    return out


SAMPLES: dict[str, Callable[[Any, list[str]], list[Sample]]] = {
    "numpy": _numpy_samples,
    "jax": _jax_samples,
    "cupy": _cupy_samples,
    "torch": _torch_samples,
}


# ---- one shortcut against the public protocol --------------------------------------------------


def _outcome(sx: Any, x: Any, stream: Any) -> tuple:
    """What an import gives: the View's fields (FIELDS), or the exception's type and words."""
    try:
        v = sx.view(x, stream=stream)
    except Exception as e:  # noqa: BLE001 - the type and words of the error are what is compared
        return ("error", f"{type(e).__name__}: {e}")
    # An empty array addresses no element: its pointer and strides say nothing, and frameworks'
    # exports differ there (NumPy 2.2's __dlpack__ gives a (0, 3) array strides (3, 1), its struct
    # (0, 0)), so they are not compared, as in the doctor's own "empty" case.
    empty = 0 in v.shape
    ptr, strides = (None, None) if empty else (v.ptr, v.strides)
    return (ptr, v.shape, strides, str(v.dtype), str(v.device), v.readonly, v.writability, v.stream)


def _difference(through: tuple, public: tuple) -> str:
    if through[0] == "error" or public[0] == "error":
        say = lambda o: o[1] if o[0] == "error" else "a View"  # noqa: E731
        return f"through the shortcut {say(through)}; through the public protocol {say(public)}"
    return "; ".join(
        f"{field} {a!r} through the shortcut, {b!r} through the public protocol"
        for field, a, b in zip(FIELDS, through, public)
        if a != b
    )


@contextlib.contextmanager
def _only(sx: Any, name: str | None) -> Iterator[None]:
    """Every shortcut off but `name` (None: all off) for the block; the previous state after it."""
    previous = sx.set_shortcuts({s.name: s.name == name for s in sx.shortcuts()})
    try:
        yield
    finally:
        sx.set_shortcuts(previous)


def _deleted_under_a_view(sx: Any, name: str, sample: Sample) -> str:
    """Imports a fresh array through the shortcut, lets the framework free it (sample.delete) while
    the View lives, and reads the View again: "" when its data survived, else what went wrong. An
    abort here ends the child process, which the supervisor reports as the shortcut's failure."""
    x = sample.make()
    with _only(sx, name):
        try:
            v = sx.view(x)
        except Exception:  # noqa: BLE001 - a refused import: the comparison above judged it
            return ""
    before = v.tolist()
    try:
        sample.delete(x)
    except Exception as e:  # noqa: BLE001 - the framework's own refusal keeps the array: fine
        return "" if v.tolist() == before else f"the View changed after a refused delete ({type(e).__name__})"
    del x
    return "" if v.tolist() == before else "the View's data changed after the framework freed its array"


def _stream_label(stream: Any) -> str:
    return "default stream" if stream is None else f"stream {stream!r}"


def check(sx: Any, info: Any, devices: list[str]) -> ShortcutCheck:
    """Checks one shortcut (an item of stridex.shortcuts()) on `devices`; the framework is imported."""
    result = ShortcutCheck(info.name, info.framework, SKIP, info.enabled)
    try:
        module = importlib.import_module(info.framework)
    except Exception as e:  # noqa: BLE001 - a broken framework is not the shortcut's failure
        result.detail = f"{info.framework} does not import here: {type(e).__name__}: {e}".splitlines()[0]
        return result
    result.version = str(getattr(module, "__version__", "?"))
    try:
        samples = SAMPLES[info.framework](module, devices)
    except Exception as e:  # noqa: BLE001
        result.detail = f"{info.framework} could not make arrays here: {type(e).__name__}: {e}".splitlines()[0]
        return result
    if not samples:
        result.detail = f"{info.framework} makes no arrays on {', '.join(devices)}"
        return result
    internals = sx._stridex._internals
    with _only(sx, info.name):
        kind = type(samples[0].make())
        if info.name not in internals.shortcuts_of(kind):
            result.detail = f"not taken with {info.framework} {result.version} here ({info.checked})"
            return result
    for sample in samples:
        for stream in sample.streams:
            x = sample.make()  # one array, imported both ways
            with _only(sx, info.name):
                through = _outcome(sx, x, stream)
            with _only(sx, None):
                public = _outcome(sx, x, stream)
            del x
            result.compared += 1
            if through != public:
                result.status = FAIL
                result.detail = f"{sample.label}, {_stream_label(stream)}: {_difference(through, public)}"
                return result
    for sample in samples:
        if sample.delete is not None:
            changed = _deleted_under_a_view(sx, info.name, sample)
            result.compared += 1
            if changed:
                result.status = FAIL
                result.detail = f"{sample.label}: {changed}"
                return result
    result.status = PASS
    result.detail = f"{len(samples)} arrays on {', '.join(devices)}"
    return result


# ---- the child process and its supervisor --------------------------------------------------------


def _emit(event: dict) -> None:
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


def collect(names: list[str], devices: list[str], emit: Callable[[dict], None] = _emit) -> None:
    """Checks the named shortcuts, reporting {"begin": name} before each and {"result": ...} after."""
    import stridex as sx

    by_name = {s.name: s for s in sx.shortcuts()}
    for name in names:
        emit({"begin": name})
        emit({"result": asdict(check(sx, by_name[name], devices))})


def _child_command(names: list[str], devices: list[str]) -> list[str]:
    return [
        sys.executable,
        "-m",
        "stridex.doctor.shortcuts",
        "--names",
        ",".join(names),
        "--devices",
        ",".join(devices),
    ]


def _signal_name(code: int) -> str:
    if code < 0:
        with contextlib.suppress(ValueError):
            return signal.Signals(-code).name
        return f"signal {-code}"
    return f"exit status {code}"


def _in_children(todo: list[str], devices: list[str], timeout: float, infos: dict) -> dict[str, ShortcutCheck]:
    """Runs the checks in child processes until each has a result: one that crashes or hangs a
    child is a failure, and a new child goes on with the rest."""
    done: dict[str, ShortcutCheck] = {}
    while todo:
        begun, before = None, len(done)
        try:
            proc = subprocess.run(
                _child_command(todo, devices), capture_output=True, text=True, timeout=timeout, encoding="utf-8"
            )
            output, code, why = proc.stdout, proc.returncode, None
        except subprocess.TimeoutExpired as e:
            output = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
            code, why = None, f"no result within {timeout:.0f} s: the check hung (the doctor stopped it)"
        for line in output.splitlines():
            if not line.startswith("{"):
                continue  # a framework's chatter
            event = json.loads(line)
            if "begin" in event:
                begun = event["begin"]
            elif "result" in event:
                r = ShortcutCheck.from_json(event["result"])
                done[r.name] = r
                begun = None
        if begun is None and (why or code or len(done) == before):
            begun = next((n for n in todo if n not in done), None)  # ended before it said which
        if begun is not None:
            info = infos[begun]
            what = why or (
                f"crashed the process ({_signal_name(code)}); the doctor went on in a new one"
                if code
                else "stopped without a result"
            )
            done[begun] = ShortcutCheck(begun, info.framework, FAIL, info.enabled, detail=what)
        todo = [n for n in todo if n not in done]
    return done


def run(
    devices: list[str], frameworks: list[str] | None = None, in_process: bool = False, timeout: float = 300.0
) -> list[ShortcutCheck]:
    """Every shortcut of the registry, checked where its framework is installed and among
    `frameworks` (None: all), skipped with the reason elsewhere; in registry order."""
    import stridex as sx

    infos = {s.name: s for s in sx.shortcuts()}
    results: dict[str, ShortcutCheck] = {}
    todo = []
    for s in infos.values():
        if frameworks is not None and s.framework not in frameworks:
            results[s.name] = ShortcutCheck(
                s.name, s.framework, SKIP, s.enabled, detail=f"{s.framework} not among --frameworks"
            )
        elif importlib.util.find_spec(s.framework) is None:
            results[s.name] = ShortcutCheck(
                s.name, s.framework, SKIP, s.enabled, detail=f"{s.framework} is not installed"
            )
        else:
            todo.append(s.name)
    if todo and in_process:
        collect(
            todo,
            devices,
            lambda e: (
                results.update({e["result"]["name"]: ShortcutCheck.from_json(e["result"])}) if "result" in e else None
            ),
        )
    elif todo:
        results.update(_in_children(todo, devices, timeout, infos))
    return [results[name] for name in infos]


# ---- rendering --------------------------------------------------------------------------------


def render_text(results: list[ShortcutCheck]) -> str:
    lines = [
        "",
        "shortcuts: each framework shortcut stridex takes against the framework's public protocol "
        "(stridex.shortcuts(); docs/import.md)",
    ]
    width = max(len(r.name) for r in results)
    mark = {PASS: "✓", FAIL: "✗", SKIP: "—"}
    for r in results:
        state = "" if r.enabled else "  [off here: STRIDEX_DISABLE_SHORTCUTS or set_shortcuts]"
        framework = f"{r.framework} {r.version}" if r.version else r.framework
        what = f"the same View (or refusal) in {r.compared} imports of {r.detail}" if r.status == PASS else r.detail
        lines.append(f"  {mark[r.status]} {r.name:<{width}}  {framework}: {what}{state}")
    return "\n".join(lines) + "\n"


def to_json(results: list[ShortcutCheck]) -> list[dict]:
    return [asdict(r) for r in results]


def failed_names(results: list[ShortcutCheck]) -> list[str]:
    """The shortcuts that differ from the public protocol (or crashed), by name: the exit line names them."""
    return [r.name for r in results if r.status == FAIL]


def _main() -> int:
    parser = argparse.ArgumentParser(
        prog="python -m stridex.doctor.shortcuts",
        description="The doctor's shortcut check, as JSON lines (its child process).",
    )
    parser.add_argument("--names", required=True, help="comma-separated shortcut names")
    parser.add_argument("--devices", required=True, help="comma-separated devices (cpu, cuda:N)")
    args = parser.parse_args()
    collect([n for n in args.names.split(",") if n], [d for d in args.devices.split(",") if d])
    return 0


if __name__ == "__main__":
    sys.exit(_main())
