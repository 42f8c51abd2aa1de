"""``python -m stridex doctor``: the interop matrix of this machine.

For every producer × consumer × case on every device, the doctor hands an array over twice:
natively (the consumer's own from_dlpack/asarray on the producer's array) and through stridex
(``stridex.view`` then the consumer's own import of the View), and checks that the consumer aliases
the producer's memory with the same pointer, shape, strides, dtype, device and read-only flag, and,
on GPUs, that stream order holds. See docs/doctor.md.

Modules: discovery (what is installed), cases (what is checked), adapter and adapters/ (one
adapter per framework; meta and cuda_memory beneath them), checks (the checks and the claims
table), worker (the worker process and its supervisor), report (text and JSON), shortcuts (each
framework shortcut against the public protocol), transports, bench.
"""

from __future__ import annotations

import argparse
import contextlib
import faulthandler
import importlib
import json
import os
import platform
import sys

from . import cases as cases_mod
from . import checks
from . import kernels as kernels_mod
from .adapters import ADAPTERS, Adapter
from .checks import Context
from .discovery import KNOWN, DeviceReport, FrameworkInfo, discover, discover_devices, one_line
from .report import Progress, render_json, render_text, stridex_features, write_text
from .worker import (  # noqa: F401 - EXIT_OK re-exported
    CRASHES_BEFORE_SKIP,
    EXIT_CLAIMED_FAILURE,
    EXIT_NOTHING_CHECKED,
    EXIT_OK,
    EXIT_USAGE,
    Absent,
    Session,
    supervise,
)


CLI_DESCRIPTION = """\
The interop matrix of this machine. For every producer -> consumer pair of the frameworks found,
every case (contiguous, strided, negative strides, 0-d, empty, bool, bfloat16, read-only; stream
order on GPUs) and every device, the array is handed over twice: natively (the consumer's own
from_dlpack, or asarray where the producer has no __dlpack__) and through stridex (stridex.view,
then the consumer's own import of the View). Each is checked: same pointer, shape, strides, dtype,
device and read-only flag, memory shared (written through one side, read through the other), and
on GPUs the producer's pending work ordered before the consumer's stream.

cells: native then stridex. A check mark: pass; a cross with n: failed (reason n listed below the
matrix); a dash: does not apply (one side cannot represent the case on that device; -v says why);
*: not claimed. Where stdout cannot print those symbols: ok, Xn, - instead.

After the matrix, each framework shortcut stridex takes (stridex.shortcuts()) is checked against
the framework's public protocol on this machine: the same View, or the same refusal.

exit status: 0 when every claimed stridex cell passed, 1 when one, a shortcut check (or, with
--transports, a transport) failed -- the last line names which --, 2 on a usage error, 3
when nothing was checked or a framework or device named in --frameworks/--device is not usable
here. Native failures never change it. See docs/doctor.md.
"""


def _csv(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    known = ", ".join(k.name for k in KNOWN)
    parser.add_argument(
        "--frameworks",
        type=_csv,
        metavar="LIST",
        help=f"comma-separated frameworks to check (default: all installed). Known: {known}",
    )
    parser.add_argument(
        "--device", default="all", metavar="DEVICE", help="cpu, cuda (every GPU), cuda:N, or all (default)"
    )
    parser.add_argument(
        "--cases",
        type=_csv,
        metavar="LIST",
        help="comma-separated cases (default: all). Known: " + ", ".join(cases_mod.CASES_BY_NAME),
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="only the quick cases: " + ", ".join(c.name for c in cases_mod.CASES if c.quick),
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="print one JSON document on stdout (progress and framework chatter go to stderr)",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="also list why cells do not apply, and the cases")
    parser.add_argument("--no-progress", action="store_true", help="no progress on stderr")
    parser.add_argument(
        "--adapter",
        action="append",
        default=[],
        metavar="MODULE:CLASS",
        help="add a framework adapter (a frameworks.Adapter subclass), e.g. for an in-house array type; repeatable",
    )
    parser.add_argument(
        "--in-process",
        action="store_true",
        help="run the checks in this process (starts faster; a crashing check ends the doctor "
        "instead of being recorded)",
    )
    parser.add_argument(
        "--check-timeout",
        type=float,
        default=300.0,
        metavar="S",
        help="a check silent for this long is recorded as hung and skipped (default 300)",
    )
    parser.add_argument(
        "--transports",
        action="store_true",
        help="also move Views to other processes: multiprocessing, Dask over TCP and UCX "
        "(when installed); reports the mechanism each used (transports.py)",
    )
    parser.add_argument("--_worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--_resume", default="0:0", help=argparse.SUPPRESS)
    parser.add_argument("--_skip", action="append", default=[], help=argparse.SUPPRESS)
    parser.set_defaults(func=main)


def _load_plugin(spec: str) -> tuple[FrameworkInfo, type[Adapter]]:
    module_name, _, class_name = spec.partition(":")
    if not module_name or not class_name:
        raise ValueError(f"--adapter takes MODULE:CLASS, found {spec!r}")
    module = importlib.import_module(module_name)
    cls = getattr(module, class_name)
    version = getattr(cls, "version_string", None) or getattr(module, "__version__", None)
    return FrameworkInfo(cls.name, module_name, "ok", version=version, module=module), cls


def build_adapters(infos: list[FrameworkInfo], plugins: dict[str, type[Adapter]]) -> dict[str, Adapter]:
    """An adapter per working framework; one whose setup fails is shown as broken, with the reason."""
    adapters: dict[str, Adapter] = {}
    for info in infos:
        cls = plugins.get(info.name) or ADAPTERS.get(info.name)
        if not info.ok or info.role != "arrays" or cls is None:
            continue
        try:
            with contextlib.redirect_stdout(sys.stderr):
                adapter = cls(info)
                if info.module is None:
                    info.module = adapter.m
        except Exception as exc:  # noqa: BLE001
            info.status, info.reason = "broken", f"adapter setup failed: {one_line(exc)}"
            continue
        adapters[info.name] = adapter
    return adapters


def select_devices(report: DeviceReport, wanted: str) -> list[str]:
    if wanted == "all":
        return list(report.devices)
    found = (
        [d for d in report.devices if d.startswith("cuda:")]
        if wanted == "cuda"
        else [d for d in report.devices if d == wanted]
    )
    if not found:
        why = f" ({report.cuda_note})" if report.cuda_note and wanted.startswith("cuda") else ""
        raise Absent(f"--device {wanted}: no such device here{why}; found: {', '.join(report.devices)}")
    return found


@contextlib.contextmanager
def _stdout_for_json(enabled: bool):
    """While the doctor runs, anything written to stdout (Python or C level, e.g. framework
    banners) goes to stderr; the JSON document is written to the real stdout at the end."""
    if not enabled:
        yield sys.stdout
        return
    sys.stdout.flush()
    saved_fd = os.dup(1)
    os.dup2(2, 1)
    saved_stdout = sys.stdout
    sys.stdout = sys.stderr
    real = os.fdopen(os.dup(saved_fd), "w", encoding="utf-8")
    try:
        yield real
    finally:
        sys.stdout.flush()
        sys.stdout = saved_stdout
        os.dup2(saved_fd, 1)
        os.close(saved_fd)
        real.flush()
        real.close()


# ---------------------------------------------------------------------------------------------
# Collecting results. The checks run in a worker process (worker.py supervises it) that streams
# events (JSON lines) to this process; `--in-process` runs the same events here instead (faster to
# start, but a crash ends the doctor).


def collect(
    args: argparse.Namespace,
    emit,
    resume: tuple[int, int] = (0, 0),
    skip: frozenset[tuple[str, str, str, str]] = frozenset(),
) -> None:
    """Discover, plan and run, reporting through emit(event): "env", then per cell "cell",
    and per route "begin" and "outcome", then "done"."""
    import stridex as sx

    plugins: dict[str, type[Adapter]] = {}
    plugin_infos: list[FrameworkInfo] = []
    for spec in args.adapter:
        info, cls = _load_plugin(spec)
        plugins[info.name] = cls
        plugin_infos.append(info)
    names = None
    if args.frameworks:
        names = [n for n in args.frameworks if n not in plugins]
        if "ml_dtypes" not in names:
            names.append("ml_dtypes")  # bfloat16 needs it; cheap
        plugin_infos = [i for i in plugin_infos if i.name in args.frameworks]
    infos = discover(names) + plugin_infos
    # named on the command line but missing or broken: the rest is checked, the exit status is 3
    unusable = [i.describe() for i in infos if args.frameworks and i.name in args.frameworks and not i.ok]
    adapters = build_adapters(infos, plugins)
    devices = discover_devices(sx, {i.name: i for i in infos})
    chosen = select_devices(devices, args.device)
    selected = cases_mod.select(args.cases, quick=args.quick)
    ctx = Context(sx, adapters)
    todo = checks.plan(adapters, chosen, selected)
    emit(
        {
            "type": "env",
            "frameworks": [i.to_json() for i in infos],
            "devices": devices.to_json(),
            "chosen": chosen,
            "cases": [c.name for c in selected],
            "features": stridex_features(sx),
            "kernels": kernels_mod.collect(sx, chosen),
            "header": {
                "stridex_version": getattr(sx, "__version__", "?"),
                "stridex_path": os.path.dirname(sx.__file__),
                "python": platform.python_version(),
                "platform": f"{platform.system()}-{platform.machine()}",
            },
            "planned": len(todo),
            "unusable": unusable,
        }
    )
    progress = Progress(sys.stderr, enabled=not args.no_progress)
    faulthandler.enable(sys.stderr)  # a crash still says where
    first, first_route = resume
    for i in range(first, len(todo)):
        device, p, c, case = todo[i]
        progress(i, len(todo), f"{device} {p.name} → {c.name} {case.name}")
        cell = {"type": "cell", "index": i, "device": device, "producer": p.name, "consumer": c.name, "case": case.name}
        reason = checks.applies(p, c, case, device)
        if reason:
            emit({**cell, "na": reason})
            continue
        claimed, why = checks.claim(p, c, case)
        emit({**cell, "claimed": claimed, "why": why})
        for r, route in enumerate(checks.ROUTES):
            if i == first and r < first_route:
                continue
            if (device, p.name, c.name, route) in skip:
                outcome = checks.Outcome(
                    checks.FAIL,
                    f"not run: this route crashed the doctor {CRASHES_BEFORE_SKIP} "
                    f"times for {p.name} → {c.name} on {device}",
                )
            else:
                emit({"type": "begin", "index": i, "route": route})
                outcome = checks.run_route(ctx, p, c, case, device, route)
            emit({"type": "outcome", "index": i, "route": route, "outcome": outcome.to_json()})
    progress(len(todo), len(todo), "done")
    emit({"type": "done"})


def _run_worker(args: argparse.Namespace) -> int:
    first, _, route = args._resume.partition(":")
    skip = frozenset(tuple(s.split("|")) for s in args._skip)
    with _stdout_for_json(True) as out:

        def emit(event: dict) -> None:
            out.write(json.dumps(event) + "\n")
            out.flush()

        try:
            collect(args, emit, (int(first), int(route or 0)), skip)
        except Absent as exc:
            emit({"type": "absent", "message": str(exc)})
            return EXIT_NOTHING_CHECKED
        except (ValueError, ImportError, AttributeError) as exc:  # before any check: a usage error
            emit({"type": "usage", "message": str(exc)})
            return EXIT_USAGE
    return 0


def _validate(args: argparse.Namespace) -> None:
    """Usage errors found without importing any framework (the worker finds the rest)."""
    cases_mod.select(args.cases, quick=args.quick)
    if args.device not in ("all", "cpu", "cuda") and not (
        args.device.startswith("cuda:") and args.device[5:].isdigit()
    ):
        raise ValueError(f"--device takes cpu, cuda, cuda:N or all, found {args.device!r}")
    plugins = {_load_plugin(spec)[0].name for spec in args.adapter}
    unknown = set(args.frameworks or ()) - {k.name for k in KNOWN} - plugins
    if unknown:
        raise ValueError(
            f"unknown framework(s): {', '.join(sorted(unknown))}; known: {', '.join(k.name for k in KNOWN)}"
        )


def main(args: argparse.Namespace) -> int:
    if args._worker:
        return _run_worker(args)
    with _stdout_for_json(args.json) as out:
        session = Session()
        try:
            _validate(args)
            if args.in_process:
                collect(args, session.add)
                problem = None
            else:
                if not args.no_progress:
                    sys.stderr.write("doctor: importing frameworks ...\n")
                problem = supervise(args, session)
        except Absent as exc:
            print(f"stridex doctor: {exc}; nothing was checked", file=sys.stderr)
            return EXIT_NOTHING_CHECKED
        except (ValueError, ImportError, AttributeError) as exc:  # bad --frameworks/--cases/--device/--adapter
            print(f"stridex doctor: {exc}", file=sys.stderr)
            return EXIT_USAGE
        if session.env is None:
            print(f"stridex doctor: {problem}", file=sys.stderr)
            return EXIT_USAGE
        if problem:
            print(f"stridex doctor: {problem}; the matrix below is incomplete", file=sys.stderr)
        result = session.result()
        from . import shortcuts as shortcuts_mod

        checked = shortcuts_mod.run(
            session.env["chosen"], args.frameworks, in_process=args.in_process, timeout=args.check_timeout
        )
        if shortcuts_mod.failed_names(checked):
            result["exit_status"] = EXIT_CLAIMED_FAILURE
        from . import graphs as graphs_mod

        captured = graphs_mod.run(session.env["chosen"], args.frameworks)
        if graphs_mod.failed_names(captured):
            result["exit_status"] = EXIT_CLAIMED_FAILURE
        moved = None
        if args.transports:
            from . import transports

            moved = transports.run(session.env["chosen"])
            if transports.failed_names(moved):
                result["exit_status"] = EXIT_CLAIMED_FAILURE
        if args.json:
            options = {
                "frameworks": args.frameworks,
                "device": args.device,
                "devices": session.env["chosen"],
                "cases": session.env["cases"],
                "quick": args.quick,
                "in_process": args.in_process,
            }
            document = render_json(**result, options=options)
            document["kernels"] = session.env["kernels"]
            document["shortcuts"] = shortcuts_mod.to_json(checked)
            document["graph"] = graphs_mod.to_json(captured)
            if moved is not None:
                document["transports"] = transports.to_json(moved)
            json.dump(document, out, indent=1, ensure_ascii=False)
            out.write("\n")
        else:
            failed = [] if moved is None else transports.failed_names(moved)
            write_text(
                out,
                render_text(
                    **result,
                    stream=out,
                    verbose=args.verbose,
                    failed_transports=failed,
                    failed_shortcuts=shortcuts_mod.failed_names(checked),
                ),
            )
            write_text(out, kernels_mod.render_text(session.env["kernels"]))
            write_text(out, shortcuts_mod.render_text(checked))
            write_text(out, graphs_mod.render_text(captured))
            if moved is not None:
                write_text(out, transports.render_text(moved))
        out.flush()
        if result["unusable"]:
            print(
                f"stridex doctor: --frameworks names what is not usable here: {'; '.join(result['unusable'])}",
                file=sys.stderr,
            )
        elif result["exit_status"] == EXIT_NOTHING_CHECKED:
            print(
                "stridex doctor: nothing was checked: no producer -> consumer pair applies to the frameworks "
                "and devices here (install a framework, or widen --frameworks/--device/--cases)",
                file=sys.stderr,
            )
        return result["exit_status"] if not problem else max(result["exit_status"], EXIT_CLAIMED_FAILURE)


__all__ = ["add_arguments", "main", "collect", "Session", "build_adapters", "Adapter", "ADAPTERS"]
