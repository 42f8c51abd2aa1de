"""Rendering: the text matrix (stdout), progress (stderr) and the --json document."""

from __future__ import annotations

import sys
import textwrap
import time
from collections.abc import Sequence
from typing import Any, TextIO

from .cases import Case
from .checks import FAIL, NA, NATIVE, PASS, ROUTES, STRIDEX, Cell
from .discovery import DeviceReport, FrameworkInfo

SYMBOLS_UNICODE = {PASS: "✓", FAIL: "✗", NA: "—"}
SYMBOLS_ASCII = {PASS: "ok", FAIL: "X", NA: "-"}
SCHEMA = 2  # of the --json document (docs/doctor.md); 2: keys without spaces, exit status 3
MAX_LISTED = 6  # cells listed under one failure reason before "and N more"
WRAP = 110


# What the other non-ASCII characters of the output become on a stream that cannot print them.
ASCII_FALLBACK = str.maketrans({"✓": "ok", "✗": "X", "—": "-", "→": "->", "·": "|", "…": "...", "×": "x"})


def write_text(stream: TextIO, text: str) -> None:
    """Write `text`; on a stream that cannot encode it (PYTHONIOENCODING=ascii, a Latin-1 terminal),
    with plain symbols, and '?' for anything else (a framework's message), instead of crashing."""
    encoding = getattr(stream, "encoding", None) or "ascii"
    try:
        text.encode(encoding)
    except (UnicodeEncodeError, LookupError):
        try:
            text = text.translate(ASCII_FALLBACK).encode(encoding, errors="replace").decode(encoding)
        except LookupError:
            text = text.translate(ASCII_FALLBACK).encode("ascii", errors="replace").decode("ascii")
    stream.write(text)


def symbols_for(stream: TextIO) -> dict[str, str]:
    encoding = getattr(stream, "encoding", None) or "ascii"
    try:
        "✓✗—→".encode(encoding)
        return SYMBOLS_UNICODE
    except (UnicodeEncodeError, LookupError):
        return SYMBOLS_ASCII


class Progress:
    """One updating line on a terminal; a line per (device, producer) otherwise. Always stderr."""

    def __init__(self, stream: TextIO = sys.stderr, enabled: bool = True) -> None:
        self.stream = stream
        self.enabled = enabled
        self.tty = stream.isatty()
        self.start = time.perf_counter()
        self.last_group = None

    def __call__(self, done: int, total: int, label: str) -> None:
        if not self.enabled:
            return
        elapsed = time.perf_counter() - self.start
        if done >= total:
            end = "\r\033[K" if self.tty else ""
            self.stream.write(f"{end}doctor: {total} checks in {elapsed:.1f} s\n")
            self.stream.flush()
            return
        if self.tty:
            self.stream.write(f"\r\033[K[{done + 1:>4}/{total}] {elapsed:5.1f} s  {label}")
            self.stream.flush()
            return
        group = " ".join(label.split()[:2])  # device and producer
        if group != self.last_group:
            self.last_group = group
            self.stream.write(f"doctor: [{done + 1}/{total}] {elapsed:.1f} s: {group} → ...\n")
            self.stream.flush()

    def message(self, text: str) -> None:
        if self.enabled:
            self.stream.write(("\r\033[K" if self.tty else "") + text + "\n")
            self.stream.flush()


def stridex_features(sx: Any) -> dict[str, bool]:
    """Which parts of the stridex API this build has (they are written in parallel)."""
    view_type = getattr(sx, "View", None)
    has = lambda name: hasattr(sx, name)  # noqa: E731
    on_view = lambda name: view_type is not None and hasattr(view_type, name)  # noqa: E731
    return {
        "view": has("view"),
        "from_pointer": has("from_pointer"),
        "NO_SYNC": has("NO_SYNC"),
        "View.__dlpack__": on_view("__dlpack__"),
        "View.__dlpack_device__": on_view("__dlpack_device__"),
        # a host View has __array_interface__; a CUDA one has __cuda_array_interface__: properties
        # that may raise AttributeError per instance, so the type is what tells whether they exist
        "View.__array_interface__": on_view("__array_interface__"),
        "View.__cuda_array_interface__": on_view("__cuda_array_interface__"),
        "View.buffer_protocol": _has_buffer(sx),
        "cuda_available": has("cuda_available"),
        "device_count": has("device_count"),
        "pointer_info": has("pointer_info"),
    }


def _has_buffer(sx: Any) -> bool:
    """Whether a host View exports the buffer protocol: only an instance can tell."""
    try:
        import numpy as np

        memoryview(sx.view(np.zeros(2, dtype=np.float32)))
        return True
    except Exception:  # noqa: BLE001 - no stridex.view, or no buffer protocol
        return False


def _cell_text(cell: Cell, refs: dict[str, int], sym: dict[str, str]) -> str:
    parts = []
    for route in ROUTES:
        o = cell.route(route)
        text = sym[o.status]
        if o.status == FAIL:
            text += str(refs[o.reason])
            if route == STRIDEX and not o.claimed:
                text += "*"
        parts.append(text)
    return " ".join(parts)


def failure_refs(cells: list[Cell]) -> dict[str, int]:
    """A footnote number per distinct failure reason, in order of first appearance."""
    refs: dict[str, int] = {}
    for cell in cells:
        for route in ROUTES:
            o = cell.route(route)
            if o.status == FAIL and o.reason not in refs:
                refs[o.reason] = len(refs) + 1
    return refs


def render_text(
    *,
    cells: list[Cell],
    cases: list[Case],
    frameworks: list[FrameworkInfo],
    devices: DeviceReport,
    features: dict[str, bool],
    header: dict[str, str],
    summary: dict,
    exit_status: int,
    stream: TextIO,
    verbose: bool = False,
    unusable: list[str] | None = None,
    failed_transports: Sequence[str] = (),
    failed_shortcuts: Sequence[str] = (),
) -> str:
    sym = symbols_for(stream)
    arrow = "→" if sym is SYMBOLS_UNICODE else "->"
    lines: list[str] = []
    lines.append(
        f"stridex doctor · stridex {header['stridex_version']} · Python {header['python']} · {header['platform']}"
    )
    missing = [k for k, v in features.items() if not v]
    if missing:
        lines.append(f"stridex API missing here: {', '.join(missing)}")
    else:
        lines.append("stridex API: complete")
    ok = [f.describe() for f in frameworks if f.status == "ok"]
    absent = [f.name for f in frameworks if f.status == "missing"]
    broken = [f.describe() for f in frameworks if f.status == "broken"]
    lines.append("frameworks: " + (", ".join(ok) if ok else "none"))
    if absent:
        lines.append("not installed (each adds its rows once installed): " + ", ".join(absent))
    lines.extend(broken)  # "name: import failed: reason"
    dev_text = ", ".join(f"{d} ({devices.names[d]})" if d in devices.names else d for d in devices.devices)
    if devices.cuda_note:
        dev_text += f"; no CUDA device ({devices.cuda_note})"
    lines.append(f"devices: {dev_text}")

    refs = failure_refs(cells)
    by_device: dict[str, list[Cell]] = {}
    for cell in cells:
        by_device.setdefault(cell.device, []).append(cell)
    for device, dcells in by_device.items():
        present = [c for c in cases if any(cell.case == c.name for cell in dcells)]
        pairs: list[tuple[str, str]] = []
        for cell in dcells:
            if (cell.producer, cell.consumer) not in pairs:
                pairs.append((cell.producer, cell.consumer))
        # a pair where no case applies on this device (cupy -> numpy on a GPU) is a row of dashes
        applies = {
            (cell.producer, cell.consumer) for cell in dcells if cell.native.status != NA or cell.stridex.status != NA
        }
        hidden = [pair for pair in pairs if pair not in applies]
        pairs = [pair for pair in pairs if pair in applies]
        if not pairs:
            lines.append("")
            lines.append(f"{device}: no pair applies (no framework here has arrays on it)")
            continue
        index = {(cell.producer, cell.consumer, cell.case): cell for cell in dcells}
        pw = max([len(p) for p, _ in pairs] + [len("producer")])
        cw = max([len(c) for _, c in pairs] + [len("consumer")])
        width = max([len(c.label) for c in present] + [7])
        for cell in dcells:
            width = max(width, len(_cell_text(cell, refs, sym)))
        lines.append("")
        lines.append(
            f"{device}: each cell is native, then through stridex "
            f"({sym[PASS]} pass, {sym[FAIL]}n fail: reason n below, * not claimed, {sym[NA]} does not apply)"
        )
        head = f"{'producer':<{pw}} {arrow} {'consumer':<{cw}}"
        lines.append(head + "  " + "  ".join(f"{c.label:<{width}}" for c in present).rstrip())
        for p, c in pairs:
            row = f"{p:<{pw}} {arrow} {c:<{cw}}"
            texts = []
            for case in present:
                cell = index.get((p, c, case.name))
                texts.append(f"{_cell_text(cell, refs, sym) if cell else '':<{width}}")
            lines.append(row + "  " + "  ".join(texts).rstrip())
        if hidden:
            names = ", ".join(f"{p} {arrow} {c}" for p, c in hidden)
            lines.extend(
                textwrap.wrap(
                    f"not shown, nothing applies on {device}: {names}"
                    if verbose
                    else f"({len(hidden)} pairs where nothing applies on {device} not shown; -v lists them)",
                    WRAP,
                )
            )

    if refs:
        lines.append("")
        lines.append(
            f"Failures ({sym[FAIL]}n): native ones are the frameworks' own; stridex ones set the exit status "
            "unless marked * (not claimed)"
        )
        listing: dict[str, list[str]] = {r: [] for r in refs}
        for cell in cells:
            for route in ROUTES:
                o = cell.route(route)
                if o.status == FAIL:
                    tag = route + ("" if route == NATIVE or o.claimed else "*")
                    listing[o.reason].append(
                        f"{cell.device} {cell.producer} {arrow} {cell.consumer} {cell.case} [{tag}]"
                    )
        for reason, n in refs.items():
            where = listing[reason]
            shown = ", ".join(where[:MAX_LISTED]) + (
                f", and {len(where) - MAX_LISTED} more" if len(where) > MAX_LISTED else ""
            )
            lines.append(f" {n:>3}. {reason}")
            lines.extend(textwrap.wrap(shown, WRAP, initial_indent="      in: ", subsequent_indent="          "))

    unclaimed: dict[str, int] = {}
    for cell in cells:
        if cell.stridex.status == FAIL and not cell.stridex.claimed:
            for note in cell.stridex.notes:
                if note.startswith("not claimed: "):
                    unclaimed[note.removeprefix("not claimed: ")] = (
                        unclaimed.get(note.removeprefix("not claimed: "), 0) + 1
                    )
    if unclaimed:
        lines.append("")
        lines.append(f"Not claimed ({sym[FAIL]}n*), from the claims table in stridex/doctor/checks.py:")
        for why, count in unclaimed.items():
            lines.extend(
                textwrap.wrap(
                    f"{why} ({count} cell{'s' if count > 1 else ''})",
                    WRAP,
                    initial_indent="  - ",
                    subsequent_indent="    ",
                )
            )

    notes = [
        (cell, route, note)
        for cell in cells
        for route in ROUTES
        for note in cell.route(route).notes
        if not note.startswith("not claimed")
    ]
    if notes:
        lines.append("")
        lines.append("Notes:")
        for cell, route, note in notes:
            lines.append(f"  {cell.device} {cell.producer} {arrow} {cell.consumer} {cell.case} [{route}]: {note}")
    if verbose:
        na: dict[str, int] = {}
        for cell in cells:
            if cell.native.status == NA:
                na[cell.native.reason] = na.get(cell.native.reason, 0) + 1
        if na:
            lines.append("")
            lines.append(f"Does not apply ({sym[NA]}):")
            for reason, count in na.items():
                lines.append(f"  {reason} ({count} cell{'s' if count > 1 else ''})")
        lines.append("")
        lines.append("Cases:")
        for case in cases:
            lines.append(f"  {case.label:<8} {case.name}: {case.description}")

    s, n = summary[STRIDEX], summary[NATIVE]
    lines.append("")
    lines.append(
        f"stridex: {s[PASS]} {sym[PASS]}  {s[FAIL]} {sym[FAIL]} ({s['claimed_failures']} claimed)  "
        f"{s[NA]} {sym[NA]}    native: {n[PASS]} {sym[PASS]}  {n[FAIL]} {sym[FAIL]}  {n[NA]} {sym[NA]}"
    )
    # What set exit status 1, each part named: claimed cells, transports, shortcut checks.
    failed = [f"{s['claimed_failures']} claimed stridex check(s) failed"] if s["claimed_failures"] else []
    if failed_transports:
        failed.append(
            f"{len(failed_transports)} transport(s) failed: {', '.join(failed_transports)} (transports, below)"
        )
    if failed_shortcuts:
        failed.append(
            f"{len(failed_shortcuts)} shortcut(s) differ from the public protocol: "
            f"{', '.join(failed_shortcuts)} (shortcuts, below)"
        )
    if unusable and exit_status != 1:
        lines.append(f"exit status {exit_status}: --frameworks names what is not usable here: {'; '.join(unusable)}")
    elif failed:
        lines.append(f"exit status {exit_status}: " + "; ".join(failed))
    elif not s[PASS] + s[FAIL]:
        lines.append(f"exit status {exit_status}: nothing was checked (no producer {arrow} consumer pair applies here)")
    else:
        lines.append("exit status 0: every claimed stridex check passed")
    return "\n".join(lines) + "\n"


def render_json(
    *,
    cells: list[Cell],
    cases: list[Case],
    frameworks: list[FrameworkInfo],
    devices: DeviceReport,
    features: dict[str, bool],
    header: dict[str, str],
    summary: dict,
    exit_status: int,
    options: dict,
    unusable: list[str] | None = None,
) -> dict:
    return {
        "schema": SCHEMA,
        "stridex": {"version": header["stridex_version"], "path": header["stridex_path"], "features": features},
        "python": header["python"],
        "platform": header["platform"],
        "options": options,
        "frameworks": [f.to_json() for f in frameworks],
        "devices": devices.to_json(),
        "cases": [c.to_json() for c in cases],
        "results": [cell.to_json() for cell in cells],
        "summary": summary,
        "unusable": list(unusable or []),  # named in --frameworks, missing or broken here
        "exit_status": exit_status,
    }
