"""The checks: for one (device, producer, consumer, case), the same hand-over twice.

- native:  consumer's own import (from_dlpack, or asarray where the producer has no __dlpack__)
           applied to the producer's array;
- stridex: ``v = stridex.view(x)`` (checked against the producer first), then the consumer's own
           import applied to the View.

Each route checks that the consumer sees what the producer has (pointer of element 0, shape,
strides, dtype, device, read-only flag where the consumer has one), that the memory is shared
(written through one side, read through the other), and that every value matches. The stream case
instead checks ordering: the producer writes on its stream A behind a long kernel, the consumer
copies on its stream B at once, and must still see the new values. The copy case checks stridex's
copy engine: a strided array made C-contiguous (and on a GPU sent to the host and back) must reach
the consumer with every value and a C-contiguous layout; its native route does not apply.

What stridex *claims* (the exit status) is decided here, in one place: see `claim`.
"""

from __future__ import annotations

import gc
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from .cases import Case, sentinel
from .discovery import one_line
from .adapter import Adapter
from .cuda_memory import gpu_sleep, reset_current_device
from .meta import Meta, device_kind

NATIVE, STRIDEX = "native", "stridex"
ROUTES = (NATIVE, STRIDEX)
PASS, FAIL, NA = "pass", "fail", "n/a"
STREAM_VALUE = 42.0
HOST_BLOCK_MS = 30.0  # an import slower than this while stream A sleeps (~100 ms) waited on the host

# ---------------------------------------------------------------------------------------------
# The claims table. stridex claims every cell that applies, i.e. where the producer can make the
# case's array on that device and the consumer can hold it (both can represent it: otherwise the
# cell is "—" for both routes), except the pairs below. A failure of a claimed stridex cell makes
# the exit status non-zero; native failures never do (showing them is the point).
#   (producer, consumer, case, why not claimed); "*" matches anything.
UNCLAIMED: tuple[tuple[str, str, str, str], ...] = (
    (
        "*",
        "numpy",
        "bfloat16",
        "NumPy imports bfloat16 over DLPack only where ml_dtypes has registered it with "
        "NumPy (>= 2.5; O5); no other protocol carries bfloat16",
    ),
    *(
        (
            producer,
            "jax",
            "readonly",
            "a producer that says read-only (NumPy's flag, a read-only buffer) is "
            "never exported as a legacy DLPack capsule, which cannot say read-only (NumPy "
            "refuses the same), and JAX imports only legacy capsules",
        )
        for producer in ("numpy", "memoryview")
    ),
    (
        "numba-cuda",
        "*",
        "empty",
        "the CUDA array interface has no device key and an empty array has no pointer "
        "to ask, so its device is the current one (docs/protocols.md): wrong off cuda:0",
    ),
)

# The consumer's own rule where the producer cannot say its array is writable: these producers'
# __dlpack__ gives only legacy capsules, which have no flags, and these consumers import such a
# capsule read-only. A read-only import of a writable array is then the consumer's rule at work (on
# both routes: stridex answers with a legacy capsule too), not a failure; the cell shows a note.
LEGACY_ONLY_PRODUCERS = frozenset({"warp", "jax", "mlx"})
LEGACY_READONLY_CONSUMERS = frozenset({"numpy"})


def legacy_readonly_rule(producer: Adapter, consumer: Adapter, how: str) -> bool:
    """True where `consumer` may import `producer`'s writable array read-only by its own rule."""
    return producer.name in LEGACY_ONLY_PRODUCERS and consumer.name in LEGACY_READONLY_CONSUMERS and "dlpack" in how


# The race case is claimed where stridex learns the producer's stream at a NO_SYNC hand-over: its
# DLPack exchange API's current stream (torch) or its own current stream (CuPy). Elsewhere the
# sanitizer can only check the legacy default stream, which the producer's stream A is not.
RACE_CLAIMED_PRODUCERS = frozenset({"torch", "cupy"})


def claim(producer: Adapter, consumer: Adapter, case: Case) -> tuple[bool, str]:
    """(claimed, why not) for an applicable cell."""
    if case.race and producer.name not in RACE_CLAIMED_PRODUCERS:
        return False, (
            f"stridex cannot learn {producer.name}'s current stream at a NO_SYNC hand-over (no DLPack exchange "
            "API naming it): the sanitizer checks the legacy default stream there"
        )
    for side in (producer, consumer):
        if side.experimental:
            return False, f"the {side.name} adapter is experimental (not yet verified on hardware)"
    for p, c, k, why in UNCLAIMED:
        if p in ("*", producer.name) and c in ("*", consumer.name) and k in ("*", case.name):
            return False, why
    return True, ""


# ---------------------------------------------------------------------------------------------


@dataclass
class Outcome:
    status: str  # PASS, FAIL or NA
    reason: str = ""  # why it failed, or why it does not apply
    how: str = ""  # the consumer's import entry point
    aliasing: str = ""  # "write": written through one side, read through the other; "pointer": both
    #                     sides read-only, same address; "empty": nothing to alias; "": not checked
    notes: list[str] = field(default_factory=list)
    claimed: bool | None = None  # stridex route only
    ms: float = 0.0

    def to_json(self) -> dict:
        out = {
            "status": self.status,
            "reason": self.reason or None,
            "how": self.how or None,
            "aliasing": self.aliasing or None,
            "notes": self.notes,
            "ms": round(self.ms, 3),
        }
        if self.claimed is not None:
            out["claimed"] = self.claimed
        return out

    @classmethod
    def from_json(cls, d: dict) -> Outcome:
        return cls(
            d["status"],
            d.get("reason") or "",
            d.get("how") or "",
            d.get("aliasing") or "",
            list(d.get("notes") or []),
            d.get("claimed"),
            d.get("ms") or 0.0,
        )

    @property
    def claimed_failure(self) -> bool:
        return self.status == FAIL and bool(self.claimed)


@dataclass
class Cell:
    device: str
    producer: str
    consumer: str
    case: str
    native: Outcome
    stridex: Outcome

    def route(self, name: str) -> Outcome:
        return self.native if name == NATIVE else self.stridex

    def to_json(self) -> dict:
        return {
            "device": self.device,
            "producer": self.producer,
            "consumer": self.consumer,
            "case": self.case,
            "native": self.native.to_json(),
            "stridex": self.stridex.to_json(),
        }

    @classmethod
    def from_json(cls, d: dict) -> Cell:
        return cls(
            d["device"],
            d["producer"],
            d["consumer"],
            d["case"],
            Outcome.from_json(d["native"]),
            Outcome.from_json(d["stridex"]),
        )


class Failed(Exception):
    """A check failed: the message is the reason shown in the matrix."""


def _hex(p: int | None) -> str:
    return "None" if p is None else hex(p)


def view_meta(v: Any) -> Meta:
    """A stridex.View described through its own attributes."""
    return Meta(int(v.ptr), tuple(v.shape), tuple(v.strides), str(v.dtype.name), str(v.device), bool(v.readonly))


def compare(want: Meta, got: Meta, readonly: bool, side: str, more_readonly_ok: bool = False) -> list[str]:
    """Differences between what the producer has (`want`) and what `side` sees (`got`).
    `more_readonly_ok`: a read-only `got` of a writable `want` is the consumer's own rule."""
    out = []
    if got.shape != want.shape:
        out.append(f"shape {got.shape} != producer's {want.shape}")
    elif want.size > 0 and got.strides is not None and want.strides is not None:
        # strides of extent-1 axes carry no information; frameworks normalise them freely
        g = tuple(s for s, n in zip(got.strides, got.shape) if n > 1)
        w = tuple(s for s, n in zip(want.strides, want.shape) if n > 1)
        if g != w:
            out.append(f"strides {got.strides} != producer's {want.strides}")
    if got.dtype != want.dtype:
        out.append(f"dtype {got.dtype} != producer's {want.dtype}")
    if got.device is not None and want.device is not None and got.device != want.device:
        out.append(f"device {got.device} != producer's {want.device}")
    if want.size > 0 and got.ptr is not None and want.ptr is not None and got.ptr != want.ptr:
        out.append(f"pointer {_hex(got.ptr)} != producer's {_hex(want.ptr)} (a copy, or a lost byte_offset)")
    if (
        readonly
        and want.readonly is not None
        and got.readonly is not None
        and got.readonly != want.readonly
        and not (more_readonly_ok and got.readonly)
    ):
        state = lambda ro: "read-only" if ro else "writable"  # noqa: E731
        out.append(f"{side} sees a {state(got.readonly)} array, the producer's is {state(want.readonly)}")
    return out


def _made_as_asked(meta: Meta, case: Case) -> str | None:
    """What is wrong with the producer's own array for this case, if anything."""
    shape, strides = case.expected_layout()
    if meta.shape != shape:
        return f"shape {meta.shape}, not the case's {shape}"
    if case.size and meta.strides is not None:
        if tuple(s for s, n in zip(meta.strides, shape) if n > 1) != tuple(s for s, n in zip(strides, shape) if n > 1):
            return f"strides {meta.strides}, not the case's {strides}"
    if meta.dtype != case.dtype:
        return f"dtype {meta.dtype}, not the case's {case.dtype}"
    return None


def _values_differ(got: np.ndarray, want: np.ndarray) -> str | None:
    if got.shape != want.shape:
        return f"values have shape {got.shape}, expected {want.shape}"
    bad = np.argwhere(got != want)
    if bad.size == 0:
        return None
    at = tuple(int(i) for i in bad[0])
    return f"{len(bad)} value(s) differ, first at {at}: {got[at]!r} != {want[at]!r}"


@dataclass
class Context:
    stridex: Any  # the stridex module
    adapters: dict[str, Adapter]

    @property
    def view(self) -> Callable | None:
        return getattr(self.stridex, "view", None)


def _layout_route(ctx: Context, p: Adapter, c: Adapter, case: Case, device: str, route: str) -> Outcome:
    out = Outcome(PASS)
    try:
        x = p.make(case, device)
        want = p.meta(x)
    except Exception as exc:  # noqa: BLE001
        raise Failed(f"{p.name} could not make the array: {one_line(exc)}") from exc
    made = _made_as_asked(want, case)
    if made:
        raise Failed(f"{p.name} made {made} (its adapter or the framework cannot make this case)")
    obj = p.export(x)
    if route == STRIDEX:
        if ctx.view is None:
            raise Failed("stridex.view missing (this stridex build cannot import)")
        try:
            obj = ctx.view(obj)
        except Exception as exc:  # noqa: BLE001
            raise Failed(f"stridex.view: {one_line(exc)}") from exc
        try:
            problems = compare(want, view_meta(obj), True, "the View")
        except Exception as exc:  # noqa: BLE001
            raise Failed(f"stridex.View attributes: {one_line(exc)}") from exc
        if problems:
            raise Failed("stridex.view: " + "; ".join(problems))
    try:
        y, out.how = c.consume(obj, device)
        got = c.meta(y)
    except Exception as exc:  # noqa: BLE001
        what = "the View" if route == STRIDEX else f"{p.name}'s array"
        raise Failed(f"{c.name} import of {what}: {one_line(exc)}") from exc
    legacy_rule = legacy_readonly_rule(p, c, out.how)
    problems = compare(want, got, c.has_readonly, c.name, legacy_rule)
    if problems:
        raise Failed("; ".join(problems))
    if legacy_rule and got.readonly and want.readonly is False:
        out.notes.append(
            f"{c.name} imports {p.name}'s legacy DLPack capsules read-only (they cannot say writable): its own rule"
        )
    out.aliasing = _check_aliasing(p, x, c, y, case, device)
    return out


def _check_aliasing(p: Adapter, x: Any, c: Adapter, y: Any, case: Case, device: str) -> str:
    """Write through one side, read through the other; then every value must match."""
    expected = case.expected_values()
    if expected.size == 0:
        return "empty"
    index = tuple(n - 1 for n in expected.shape)  # the last element (the lowest address when negative)
    value = sentinel(case, expected[index])
    if p.can_write(x):
        writer, reader, w_arr, r_arr, mode = p, c, x, y, "write"
    elif c.can_write(y):
        writer, reader, w_arr, r_arr, mode = c, p, y, x, "write"
    else:
        writer = None
        reader, r_arr, mode = c, y, "pointer"  # both read-only: the pointer check above is the proof
    if writer is not None:
        try:
            writer.write(w_arr, index, value)
            writer.synchronize(device)
        except Exception as exc:  # noqa: BLE001
            raise Failed(f"{writer.name} could not write an element: {one_line(exc)}") from exc
        expected[index] = value
    try:
        got = reader.to_host(r_arr)
    except Exception as exc:  # noqa: BLE001
        raise Failed(f"{reader.name} could not read the values: {one_line(exc)}") from exc
    if writer is not None and got.shape == expected.shape and got[index] != value:
        raise Failed(
            f"not aliased: {writer.name} wrote {value!r} at {index}, {reader.name} still reads {got[index]!r} (a copy)"
        )
    differ = _values_differ(got, expected)
    if differ:
        raise Failed(f"{reader.name} reads wrong values: {differ}")
    return mode


def _stream_pass(
    ctx: Context, p: Adapter, c: Adapter, case: Case, device: str, route: str, judged: bool
) -> tuple[int, int, dict[str, float], str]:
    """One hand-over behind the sleep (none when not judged): (stale elements, elements, host ms of
    each step enqueued behind the sleep, how the consumer imported). Every object it makes dies when
    it returns: a device free synchronises, and must not fall inside the next pass's timed steps."""
    what = "the View" if route == STRIDEX else f"{p.name}'s array"
    try:
        x = p.make(case, device)
        a = p.new_stream(device)
        b = c.new_stream(device) if c.stream_kind == "explicit" else None
        value = p.prepare_fill(x, STREAM_VALUE, a)
        target = c.prepare_snapshot(case, device, b)
    except Exception as exc:  # noqa: BLE001
        raise Failed(f"setup: {one_line(exc)}") from exc
    stages: dict[str, float] = {}
    with p.stream_ctx(a):
        if judged:
            try:
                gpu_sleep(p.stream_handle(a), device, ctx.adapters)
            except Exception as exc:  # noqa: BLE001
                raise Failed(f"could not launch the sleep kernel on stream A: {one_line(exc)}") from exc
        t = time.perf_counter()
        try:
            p.fill_async(x, value, a)
        except Exception as exc:  # noqa: BLE001
            raise Failed(f"{p.name} could not write on stream A: {one_line(exc)}") from exc
        stages["the producer's write"], t = (time.perf_counter() - t) * 1e3, time.perf_counter()
        obj = p.export(p.on_stream(x, a))
        if route == STRIDEX:
            kwargs = {"stream": c.stridex_stream(b)} if b is not None else {}
            try:
                obj = ctx.view(obj, **kwargs)
            except Exception as exc:  # noqa: BLE001
                raise Failed(f"stridex.view(stream=B): {one_line(exc)}") from exc
            stages["stridex.view"], t = (time.perf_counter() - t) * 1e3, time.perf_counter()
        with c.stream_ctx(b):
            try:
                y, how = c.consume(obj, device, stream=b)
                stages[f"{c.name}'s import"], t = (time.perf_counter() - t) * 1e3, time.perf_counter()
                z = c.snapshot_async(y, b, target)
                stages[f"{c.name}'s copy"] = (time.perf_counter() - t) * 1e3
            except Exception as exc:  # noqa: BLE001
                raise Failed(f"{c.name} import of {what} or its copy on stream B: {one_line(exc)}") from exc
    p.synchronize(device)
    got = c.to_host(z)
    return int(np.count_nonzero(got != STREAM_VALUE)), int(got.size), stages, how


def _stream_route(ctx: Context, p: Adapter, c: Adapter, case: Case, device: str, route: str) -> Outcome:
    out = Outcome(PASS)
    if route == STRIDEX and ctx.view is None:
        raise Failed("stridex.view missing (this stridex build cannot import)")
    _stream_pass(ctx, p, c, case, device, route, judged=False)  # builds every kernel: the judged pass is fast
    gc.collect()  # frees of the first pass (they synchronise) happen now, not behind the sleep
    p.synchronize(device)
    stale, size, stages, out.how = _stream_pass(ctx, p, c, case, device, route, judged=True)
    if stale:
        raise Failed(
            f"not ordered: {c.name}'s copy on stream B read {stale} of {size} elements before "
            f"{p.name}'s write on stream A landed"
        )
    # ordered; but if a step waited for the sleep on the host, that step is what ordered it
    blocked = {name: ms for name, ms in stages.items() if ms > HOST_BLOCK_MS}
    if route == STRIDEX and "stridex.view" in blocked:
        raise Failed(
            f"ordered, but stridex.view blocked the host {blocked['stridex.view']:.0f} ms (a host sync, not an event)"
        )
    for name, ms in blocked.items():
        out.notes.append(f"ordered by blocking the host: {name} took {ms:.0f} ms")
    out.aliasing = "stream"
    return out


def _race_route(ctx: Context, p: Adapter, c: Adapter, case: Case, device: str, route: str) -> Outcome:
    """The seeded race: the producer's write pending behind the sleep on stream A, handed over with
    no ordering (NO_SYNC) while the sanitizer raises; then the corrected hand-over, which must pass."""
    out = Outcome(PASS)
    sanitize = getattr(ctx.stridex, "sanitize", None)
    if ctx.view is None or sanitize is None:
        raise Failed("this stridex build has no sanitizer (stridex.sanitize)")
    race_error = ctx.stridex.StreamRaceError
    try:
        x = p.make(case, device)
        a = p.new_stream(device)
        b = c.new_stream(device) if c.stream_kind == "explicit" else None
        value = p.prepare_fill(x, STREAM_VALUE, a)
        # The write once before the judged pass: a kernel loaded lazily behind the sleep would wait
        # for it on the host (CUDA's lazy module loading), and the race window would close.
        with p.stream_ctx(a):
            p.fill_async(x, value, a)
        p.synchronize(device)
    except Exception as exc:  # noqa: BLE001
        raise Failed(f"setup: {one_line(exc)}") from exc
    caught = corrected = None
    with p.stream_ctx(a):
        try:
            gpu_sleep(p.stream_handle(a), device, ctx.adapters)
            p.fill_async(x, value, a)
        except Exception as exc:  # noqa: BLE001
            raise Failed(f"could not launch the sleep kernel and the write on stream A: {one_line(exc)}") from exc
        obj = p.export(p.on_stream(x, a))
        with sanitize(raise_=True):
            try:
                ctx.view(obj, stream=ctx.stridex.NO_SYNC)  # the race: nothing orders the consumer
            except race_error as exc:
                caught = str(exc)
            except Exception as exc:  # noqa: BLE001
                raise Failed(f"stridex.view(stream=NO_SYNC): {one_line(exc)}") from exc
            kwargs = {"stream": c.stridex_stream(b)} if b is not None else {}
            with c.stream_ctx(b):
                try:
                    y, out.how = c.consume(ctx.view(obj, **kwargs), device, stream=b)
                except race_error as exc:
                    corrected = str(exc)
                except Exception as exc:  # noqa: BLE001
                    raise Failed(f"the corrected hand-over to {c.name}: {one_line(exc)}") from exc
    p.synchronize(device)
    if caught is None:
        raise Failed(f"not caught: the NO_SYNC hand-over of {p.name}'s pending write raised no StreamRaceError")
    if not caught.startswith("stridex sanitizer: no_sync"):
        raise Failed(f"caught as another race: {caught.splitlines()[0]}")
    if corrected is not None:
        raise Failed(f"the corrected hand-over was reported: {corrected.splitlines()[0]}")
    out.aliasing = "race"
    return out


def _copy_route(ctx: Context, p: Adapter, c: Adapter, case: Case, device: str, route: str) -> Outcome:
    out = Outcome(PASS)
    if ctx.view is None or not hasattr(ctx.stridex.View, "contiguous"):
        raise Failed("this stridex build has no copy engine (View.copy)")
    try:
        x = p.make(case, device)
        v = ctx.view(p.export(x))
    except Exception as exc:  # noqa: BLE001
        raise Failed(f"{p.name} array through stridex.view: {one_line(exc)}") from exc
    try:
        w = v.copy()  # always a fresh, writable, C-contiguous copy (contiguous() may return v)
        if device_kind(device) == "cuda":
            w = w.to("cpu").to(device)
    except Exception as exc:  # noqa: BLE001
        raise Failed(f"stridex copy: {one_line(exc)}") from exc
    if not w.is_c_contiguous or str(w.device) != device:
        raise Failed(f"stridex copy is {w.device} with strides {w.strides}, not C-contiguous on {device}")
    try:
        y, out.how = c.consume(w, device)
        got = c.to_host(y)
    except Exception as exc:  # noqa: BLE001
        raise Failed(f"{c.name} import of the copy: {one_line(exc)}") from exc
    differ = _values_differ(got, case.expected_values())
    if differ:
        raise Failed(f"{c.name} reads wrong values from the copy: {differ}")
    out.aliasing = "copy"
    return out


def applies(p: Adapter, c: Adapter, case: Case, device: str) -> str | None:
    """None when the cell applies; otherwise why not (the cell is "—" for both routes)."""
    return p.cannot_make(case, device) or c.cannot_hold(case, device)


def run_route(ctx: Context, p: Adapter, c: Adapter, case: Case, device: str, route: str) -> Outcome:
    """One route of one applicable cell. Never raises: a failure is the outcome."""
    t0 = time.perf_counter()
    try:
        if device_kind(device) == "cuda":
            reset_current_device()  # cuda:0, whatever an earlier check or framework left current
        if case.copy and route == NATIVE:
            return Outcome(NA, "stridex's own copy: the native route has no counterpart")
        if case.race and route == NATIVE:
            return Outcome(NA, "no framework's own tool sees a race at a hand-over between frameworks")
        run = (
            _race_route if case.race else _stream_route if case.stream else _copy_route if case.copy else _layout_route
        )
        outcome = run(ctx, p, c, case, device, route)
    except Failed as exc:
        outcome = Outcome(FAIL, str(exc))
    except Exception as exc:  # noqa: BLE001 - a doctor bug or a framework error: still a result
        outcome = Outcome(FAIL, f"unexpected error: {one_line(exc)}")
    outcome.ms = (time.perf_counter() - t0) * 1e3
    return outcome


def apply_claim(outcome: Outcome, claimed: bool, why: str) -> Outcome:
    outcome.claimed = claimed
    if not claimed:
        outcome.notes.append(f"not claimed: {why}")
    return outcome


def run_cell(ctx: Context, p: Adapter, c: Adapter, case: Case, device: str) -> Cell:
    reason = applies(p, c, case, device)
    if reason:
        return Cell(device, p.name, c.name, case.name, Outcome(NA, reason), Outcome(NA, reason))
    native = run_route(ctx, p, c, case, device, NATIVE)
    sx = apply_claim(run_route(ctx, p, c, case, device, STRIDEX), *claim(p, c, case))
    return Cell(device, p.name, c.name, case.name, native, sx)


def plan(adapters: dict[str, Adapter], devices: list[str], cases: list[Case]):
    """Every (device, producer, consumer, case) to run, in report order."""
    out = []
    for device in devices:
        for p in adapters.values():
            if not p.producer:
                continue
            for c in adapters.values():
                if not c.consumer:
                    continue
                for case in cases:
                    if case.gpu_only and device_kind(device) == "cpu":
                        continue
                    out.append((device, p, c, case))
    return out


def run_all(
    ctx: Context, devices: list[str], cases: list[Case], progress: Callable[[int, int, str], None] | None = None
) -> list[Cell]:
    todo = plan(ctx.adapters, devices, cases)
    cells = []
    for i, (device, p, c, case) in enumerate(todo):
        if progress:
            progress(i, len(todo), f"{device} {p.name} → {c.name} {case.name}")
        cells.append(run_cell(ctx, p, c, case, device))
    if progress:
        progress(len(todo), len(todo), "done")
    return cells


def summarize(cells: list[Cell]) -> dict:
    out = {}
    for route in ROUTES:
        counts = {PASS: 0, FAIL: 0, NA: 0}
        for cell in cells:
            counts[cell.route(route).status] += 1
        out[route] = counts
    out[STRIDEX]["claimed_failures"] = sum(cell.stridex.claimed_failure for cell in cells)
    out[STRIDEX]["unclaimed_failures"] = out[STRIDEX][FAIL] - out[STRIDEX]["claimed_failures"]
    return out
