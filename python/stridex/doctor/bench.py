"""``python -m stridex bench``: what a hand-over costs, stridex against the peers present.

Tables (Markdown, on stdout; progress on stderr):
1. import: producer array -> a view object. ``stridex.view(x)`` against cuda.core's
   ``StridedMemoryView.from_dlpack(x, stream_ptr=-1)`` and ``.from_any_interface(x, stream_ptr=-1)``.
2. hand-over: producer -> consumer. The consumer's own import of the producer's array (native),
   against the same import of ``stridex.view(x)`` (import + export) and of a View made beforehand
   (export only).
3. copy bandwidth, when a GPU is present: torch ``copy_`` of a 256 MiB buffer (contiguous and
   transposed), and stridex's own copy if this build has one.

Each number is the median of repeated runs of a calibrated loop, in nanoseconds per call,
including the Python call overhead (the "empty call" row measures it). Ratios are stridex / peer:
below 1 means stridex is faster.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import statistics
import sys
import time
from typing import Any, Callable

from . import cases as cases_mod
from .discovery import discover, discover_devices, one_line
from .adapter import Adapter
from .meta import device_kind

COPY_MIB = 256


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--frameworks",
        type=lambda t: [x.strip() for x in t.split(",") if x.strip()],
        metavar="LIST",
        help="comma-separated frameworks (default: all installed)",
    )
    parser.add_argument("--device", default="all", metavar="DEVICE", help="cpu, cuda, cuda:N or all (default)")
    parser.add_argument("--quick", action="store_true", help="fewer, shorter runs (noisier numbers)")
    parser.add_argument("--repeat", type=int, default=None, metavar="N", help="runs per number (default 7; 3 quick)")
    parser.add_argument(
        "--copy-mib",
        type=int,
        default=COPY_MIB,
        metavar="MIB",
        help=f"buffer size for the GPU copy bandwidth (default {COPY_MIB})",
    )
    parser.add_argument("--json", action="store_true", help="one JSON document instead of Markdown")
    parser.set_defaults(func=main)


class Timer:
    def __init__(self, repeat: int, target_s: float) -> None:
        self.repeat = repeat
        self.target_s = target_s

    @staticmethod
    def _loop(fn: Callable[[Any], Any], arg: Any, n: int) -> float:
        t0 = time.perf_counter_ns()
        for _ in range(n):
            fn(arg)
        return (time.perf_counter_ns() - t0) * 1e-9

    def ns(self, fn: Callable[[Any], Any], arg: Any) -> float:
        """Median ns per call of fn(arg) over `repeat` runs of a loop lasting about target_s."""
        fn(arg)  # warm: first calls build caches, compile kernels, load modules
        gc_was = gc.isenabled()
        gc.disable()
        try:
            n, t = 1, self._loop(fn, arg, 1)
            while t < self.target_s / 10 and n < 1 << 22:
                n *= 10
                t = self._loop(fn, arg, n)
            n = max(1, int(n * self.target_s / max(t, 1e-9)))
            samples = [self._loop(fn, arg, n) / n for _ in range(self.repeat)]
        finally:
            if gc_was:
                gc.enable()
        return statistics.median(samples) * 1e9


def _fmt_ns(ns: float | None) -> str:
    if ns is None:
        return "—"
    return f"{ns:,.0f}" if ns >= 100 else f"{ns:.1f}"


def _ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}" if a is not None and b else "—"


def _table(head: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(head)]
    line = lambda cells: "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths)) + " |"  # noqa: E731
    out = [line(head), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    out += [line(r) for r in rows]
    return "\n".join(out)


def _try(timer: Timer, fn: Callable, arg: Any, errors: list[str], label: str) -> float | None:
    try:
        return timer.ns(fn, arg)
    except Exception as exc:  # noqa: BLE001
        errors.append(f"{label}: {one_line(exc)}")
        return None


def _smv_class(adapters: dict[str, Adapter]):
    core = adapters.get("cuda.core")
    return getattr(core, "smv", None)


def bench_imports(
    sx: Any, adapters: dict[str, Adapter], devices: list[str], timer: Timer, errors: list[str], progress
) -> list[dict]:
    case = cases_mod.CASES_BY_NAME["contiguous"]
    smv = _smv_class(adapters)
    view = getattr(sx, "view", None)
    rows = []
    for device in devices:
        for p in adapters.values():
            if not p.producer or p.cannot_make(case, device):
                continue
            progress(f"import {device} {p.name}")
            try:
                x = p.export(p.make(case, device))
            except Exception as exc:  # noqa: BLE001
                errors.append(f"{device} {p.name}: could not make the array: {one_line(exc)}")
                continue
            label = f"{device} {p.name}"
            row = {
                "device": device,
                "producer": p.name,
                "stridex.view": _try(timer, view, x, errors, f"{label} stridex.view") if view else None,
            }
            if smv is not None:
                if hasattr(smv, "from_dlpack"):
                    row["SMV.from_dlpack"] = _try(
                        timer,
                        lambda o: smv.from_dlpack(o, stream_ptr=-1),
                        x,
                        errors,
                        f"{label} StridedMemoryView.from_dlpack",
                    )
                if hasattr(smv, "from_any_interface"):
                    row["SMV.from_any_interface"] = _try(
                        timer,
                        lambda o: smv.from_any_interface(o, stream_ptr=-1),
                        x,
                        errors,
                        f"{label} StridedMemoryView.from_any_interface",
                    )
            rows.append(row)
    return rows


def bench_handovers(
    sx: Any, adapters: dict[str, Adapter], devices: list[str], timer: Timer, errors: list[str], progress
) -> list[dict]:
    case = cases_mod.CASES_BY_NAME["contiguous"]
    view = getattr(sx, "view", None)
    rows = []
    for device in devices:
        for p in adapters.values():
            if not p.producer or p.cannot_make(case, device):
                continue
            try:
                x = p.export(p.make(case, device))
            except Exception as exc:  # noqa: BLE001
                errors.append(f"{device} {p.name}: could not make the array: {one_line(exc)}")
                continue
            v = None
            if view is not None:
                with contextlib.suppress(Exception):
                    v = view(x)
            for c in adapters.values():
                if not c.consumer or c.cannot_hold(case, device) or c.name == "cuda.core":
                    continue
                progress(f"hand-over {device} {p.name} → {c.name}")
                label = f"{device} {p.name} → {c.name}"
                row = {
                    "device": device,
                    "producer": p.name,
                    "consumer": c.name,
                    "how": None,
                    "native": None,
                    "via stridex.view": None,
                    "View only": None,
                }
                try:
                    fn, row["how"] = c.importer(x, device)
                    row["native"] = _try(timer, fn, x, errors, f"{label} native")
                except Exception as exc:  # noqa: BLE001
                    errors.append(f"{label} native: {one_line(exc)}")
                if v is not None:
                    try:
                        fn, _ = c.importer(v, device)
                        row["via stridex.view"] = _try(
                            timer, lambda o, fn=fn: fn(view(o)), x, errors, f"{label} via stridex.view"
                        )
                        row["View only"] = _try(timer, fn, v, errors, f"{label} View only")
                    except Exception as exc:  # noqa: BLE001
                        errors.append(f"{label} stridex: {one_line(exc)}")
                rows.append(row)
    return rows


def bench_copy(
    sx: Any, adapters: dict[str, Adapter], devices: list[str], mib: int, repeat: int, errors: list[str], progress
) -> list[dict]:
    torch = adapters.get("torch")
    rows = []
    gpus = [d for d in devices if device_kind(d) == "cuda"]
    if not gpus:
        return rows
    if torch is None:
        errors.append("copy bandwidth: needs torch (not present)")
        return rows
    t = torch.m
    device = gpus[0]
    n = mib * (1 << 20) // 4
    side = int(n**0.5)
    progress(f"copy bandwidth on {device}")
    with t.cuda.device(device):
        src = t.arange(n, dtype=t.float32, device=device)
        dst = t.empty_like(src)

        def gbps(fn, nbytes: int) -> float:
            fn()
            t.cuda.synchronize()
            start, end = t.cuda.Event(enable_timing=True), t.cuda.Event(enable_timing=True)
            times = []
            for _ in range(repeat):
                start.record()
                for _ in range(5):
                    fn()
                end.record()
                end.synchronize()
                times.append(start.elapsed_time(end) / 5 / 1e3)
            return nbytes / statistics.median(times) / 1e9

        nbytes = n * 4
        rows.append(
            {"copy": f"torch dst.copy_(src), {mib} MiB contiguous", "GB/s": gbps(lambda: dst.copy_(src), nbytes)}
        )
        sq_src, sq_dst = src[: side * side].view(side, side), dst[: side * side].view(side, side)
        rows.append(
            {
                "copy": f"torch dst.copy_(src.T), {side}x{side} float32 transposed",
                "GB/s": gbps(lambda: sq_dst.copy_(sq_src.T), side * side * 4),
            }
        )
        copy = getattr(sx, "copy", None)
        view = getattr(sx, "view", None)
        if copy is not None and view is not None:
            try:
                vs, vd = view(src), view(dst)
                rows.append(
                    {
                        "copy": f"stridex.copy(dst, src), {mib} MiB contiguous",
                        "GB/s": gbps(lambda: copy(vd, vs), nbytes),
                    }
                )
                vsq, vsq_dst = view(sq_src), view(sq_dst)
                rows.append(
                    {
                        "copy": f"stridex.copy(dst, src.T), {side}x{side} float32 transposed",
                        "GB/s": gbps(lambda: copy(vsq_dst, vsq.T), side * side * 4),
                    }
                )
                host = src.cpu()
                rows.append(
                    {
                        "copy": f"torch host.to('{device}'), {mib} MiB pageable",
                        "GB/s": gbps(lambda: host.to(device), nbytes),
                    }
                )
                vh = view(host.numpy())
                rows.append(
                    {"copy": f"stridex.copy(gpu, host), {mib} MiB pageable", "GB/s": gbps(lambda: copy(vd, vh), nbytes)}
                )
            except Exception as exc:  # noqa: BLE001
                errors.append(f"stridex.copy(dst_view, src_view): {one_line(exc)}")
        else:
            rows.append({"copy": "stridex copy: this build offers none (torch above is the reference)", "GB/s": None})
    return rows


SCHEMA = 1  # of the --json document (docs/doctor.md, "bench --json")
# Row keys as the JSON document spells them: no spaces or dots, units in the name.
JSON_KEYS = {
    "stridex.view": "stridex_view_ns",
    "SMV.from_dlpack": "smv_from_dlpack_ns",
    "SMV.from_any_interface": "smv_from_any_interface_ns",
    "native": "native_ns",
    "via stridex.view": "via_stridex_view_ns",
    "View only": "view_only_ns",
    "GB/s": "gb_per_s",
}


def render_json(
    header: str, imports: list[dict], handovers: list[dict], copies: list[dict], errors: list[str], floor: float
) -> dict:
    rows = lambda table: [{JSON_KEYS.get(k, k): v for k, v in r.items()} for r in table]  # noqa: E731
    return {
        "schema": SCHEMA,
        "header": header,
        "empty_call_ns": floor,
        "imports": rows(imports),
        "handovers": rows(handovers),
        "copies": rows(copies),
        "errors": errors,
    }


def render_markdown(
    header: str, imports: list[dict], handovers: list[dict], copies: list[dict], errors: list[str], floor: float
) -> str:
    out = [header, ""]
    out.append(
        f"Nanoseconds per call, median; each includes the Python call overhead "
        f"(an empty call costs {_fmt_ns(floor)} ns here). Ratio = stridex / peer (< 1: stridex faster)."
    )
    if imports:
        peers = [k for k in ("SMV.from_dlpack", "SMV.from_any_interface") if any(k in r for r in imports)]
        head = ["device", "producer", "stridex.view"]
        for k in peers:
            head += [k + "(stream_ptr=-1)", "ratio"]
        rows = []
        for r in imports:
            row = [r["device"], r["producer"], _fmt_ns(r["stridex.view"])]
            for k in peers:
                row += [_fmt_ns(r.get(k)), _ratio(r["stridex.view"], r.get(k))]
            rows.append(row)
        out += ["", "### Import: producer array → view object", "", _table(head, rows)]
        if not peers:
            out.append("\n(cuda.core not present: no StridedMemoryView to compare with)")
    if handovers:
        head = [
            "device",
            "producer → consumer",
            "consumer import",
            "native",
            "via stridex.view",
            "ratio",
            "View only",
            "ratio",
        ]
        rows = [
            [
                r["device"],
                f"{r['producer']} → {r['consumer']}",
                r["how"] or "—",
                _fmt_ns(r["native"]),
                _fmt_ns(r["via stridex.view"]),
                _ratio(r["via stridex.view"], r["native"]),
                _fmt_ns(r["View only"]),
                _ratio(r["View only"], r["native"]),
            ]
            for r in handovers
        ]
        out += [
            "",
            "### Hand-over: producer → consumer",
            "",
            "native: the consumer's import of the producer's array; via stridex.view: of stridex.view(x) "
            "(import + export); View only: of a View made beforehand (export).",
            "",
            _table(head, rows),
        ]
    if copies:
        rows = [[r["copy"], f"{r['GB/s']:.0f}" if r["GB/s"] is not None else "—"] for r in copies]
        out += [
            "",
            "### Copy bandwidth (GB/s = bytes copied / time; the memory traffic is twice that)",
            "",
            _table(["copy", "GB/s"], rows),
        ]
    if errors:
        out += ["", "### Not measured", ""] + [f"- {e}" for e in errors]
    return "\n".join(out) + "\n"


def main(args: argparse.Namespace) -> int:
    import platform

    import stridex as sx

    from . import EXIT_NOTHING_CHECKED, EXIT_USAGE, Absent, _stdout_for_json, build_adapters, select_devices
    from .report import write_text

    def progress(text: str) -> None:
        sys.stderr.write(f"bench: {text}\n")
        sys.stderr.flush()

    repeat = args.repeat or (3 if args.quick else 7)
    timer = Timer(repeat, 0.005 if args.quick else 0.02)
    with _stdout_for_json(args.json) as out:
        names = args.frameworks
        if names is not None and "ml_dtypes" not in names:
            names = names + ["ml_dtypes"]
        try:
            infos = discover(names)
            unusable = [i.describe() for i in infos if args.frameworks and i.name in args.frameworks and not i.ok]
            if unusable:
                raise Absent(f"--frameworks names what is not usable here: {'; '.join(unusable)}")
            adapters = build_adapters(infos, {})
            devices = select_devices(discover_devices(sx, {i.name: i for i in infos}), args.device)
        except Absent as exc:
            print(f"stridex bench: {exc}; nothing was measured", file=sys.stderr)
            return EXIT_NOTHING_CHECKED
        except ValueError as exc:
            print(f"stridex bench: {exc}", file=sys.stderr)
            return EXIT_USAGE
        errors: list[str] = []
        if getattr(sx, "view", None) is None:
            errors.append("stridex.view missing in this build: stridex columns are empty")
        floor = timer.ns(lambda o: None, None)
        imports = bench_imports(sx, adapters, devices, timer, errors, progress)
        handovers = bench_handovers(sx, adapters, devices, timer, errors, progress)
        copies = bench_copy(sx, adapters, devices, args.copy_mib, repeat, errors, progress)
        versions = ", ".join(i.describe() for i in infos if i.ok)
        header = (
            f"## stridex bench · stridex {getattr(sx, '__version__', '?')} · Python "
            f"{platform.python_version()} · {platform.system()}-{platform.machine()}\n\n"
            f"frameworks: {versions}; devices: {', '.join(devices)}; {repeat} runs per number"
        )
        if args.json:
            json.dump(render_json(header, imports, handovers, copies, errors, floor), out, indent=1, ensure_ascii=False)
            out.write("\n")
        else:
            write_text(out, render_markdown(header, imports, handovers, copies, errors, floor))
    return 0
