"""The doctor's worker supervisor. The checks run in a worker process (``stridex doctor --_worker``)
that streams events (JSON lines) to the supervisor; when a check kills the worker (a segfault in a
framework or in stridex) or hangs, the supervisor records that check as failed and starts a new
worker right after it. After CRASHES_BEFORE_SKIP crashes of one pair and route, the rest of that
route is skipped. Session adds up the events of all workers."""

from __future__ import annotations

import argparse
import contextlib
import json
import queue
import signal
import subprocess
import sys
import threading

from . import cases as cases_mod
from . import checks
from .checks import summarize
from .discovery import DeviceReport, FrameworkInfo

# Exit statuses (docs/doctor.md): 3 keeps a misconfigured job (no GPU, a framework not installed)
# from passing as if everything had been checked.
EXIT_OK, EXIT_CLAIMED_FAILURE, EXIT_USAGE, EXIT_NOTHING_CHECKED = 0, 1, 2, 3
CRASHES_BEFORE_SKIP = 3  # crashes of one (device, producer, consumer, route) before the rest is skipped


class Absent(Exception):
    """A framework or device named on the command line is not usable here (exit status 3)."""


class Session:
    """The events of one doctor run, from one or several workers, and what they add up to."""

    def __init__(self) -> None:
        self.env: dict | None = None
        self.cells: dict[int, dict] = {}
        self.outcomes: dict[tuple[int, str], checks.Outcome] = {}
        self.begun: tuple[int, str] | None = None
        self.done = False

    def add(self, event: dict) -> None:
        kind = event["type"]
        if kind == "env":
            self.env = self.env or event
        elif kind == "cell":
            self.cells[event["index"]] = event
            if "na" in event:
                for route in checks.ROUTES:
                    self.outcomes[(event["index"], route)] = checks.Outcome(checks.NA, event["na"])
        elif kind == "begin":
            self.begun = (event["index"], event["route"])
        elif kind == "outcome":
            self.outcomes[(event["index"], event["route"])] = checks.Outcome.from_json(event["outcome"])
            self.begun = None
        elif kind == "done":
            self.done = True
        elif kind == "usage":
            raise ValueError(event["message"])
        elif kind == "absent":
            raise Absent(event["message"])

    def crashed(self, what: str) -> tuple[int, int] | None:
        """Record the route that was running as failed with `what`; return where to resume."""
        if self.begun is None:
            return None
        index, route = self.begun
        self.outcomes[(index, route)] = checks.Outcome(checks.FAIL, what)
        self.begun = None
        r = checks.ROUTES.index(route) + 1
        return (index, r) if r < len(checks.ROUTES) else (index + 1, 0)

    def result(self) -> dict:
        """Everything the renderers take, and the exit status."""
        env = self.env
        cells = []
        for index in sorted(self.cells):
            ev = self.cells[index]
            native = self.outcomes.get((index, checks.NATIVE), checks.Outcome(checks.FAIL, "not run"))
            sx_out = self.outcomes.get((index, checks.STRIDEX), checks.Outcome(checks.FAIL, "not run"))
            if "na" not in ev:
                checks.apply_claim(sx_out, ev["claimed"], ev["why"])
            cells.append(checks.Cell(ev["device"], ev["producer"], ev["consumer"], ev["case"], native, sx_out))
        summary = summarize(cells)
        checked = summary["stridex"][checks.PASS] + summary["stridex"][checks.FAIL]
        unusable = list(env.get("unusable") or [])
        status = (
            EXIT_CLAIMED_FAILURE
            if summary["stridex"]["claimed_failures"]
            else EXIT_NOTHING_CHECKED
            if not checked or unusable
            else EXIT_OK
        )
        return dict(
            cells=cells,
            cases=cases_mod.select(env["cases"]),
            frameworks=[FrameworkInfo.from_json(f) for f in env["frameworks"]],
            devices=DeviceReport.from_json(env["devices"]),
            features=env["features"],
            header=env["header"],
            summary=summary,
            exit_status=status,
            unusable=unusable,
        )


def _worker_command(args: argparse.Namespace, resume: tuple[int, int], skip: set) -> list[str]:
    cmd = [
        sys.executable,
        "-m",
        "stridex",
        "doctor",
        "--_worker",
        f"--_resume={resume[0]}:{resume[1]}",
        f"--device={args.device}",
    ]
    if args.frameworks:
        cmd.append("--frameworks=" + ",".join(args.frameworks))
    if args.cases:
        cmd.append("--cases=" + ",".join(args.cases))
    if args.quick:
        cmd.append("--quick")
    if args.no_progress:
        cmd.append("--no-progress")
    cmd += [f"--adapter={a}" for a in args.adapter]
    cmd += [f"--_skip={'|'.join(s)}" for s in sorted(skip)]
    return cmd


def _signal_name(code: int) -> str:
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"{signal.Signals(-code).name}"
        return f"signal {-code}"
    return f"exit status {code}"


def supervise(args: argparse.Namespace, session: Session) -> str | None:
    """Run workers until the plan is done; None, or why the doctor could not run at all."""
    resume, skip, crashes = (0, 0), set(), {}
    while True:
        proc = subprocess.Popen(
            _worker_command(args, resume, skip), stdout=subprocess.PIPE, text=True, encoding="utf-8", bufsize=1
        )
        lines: queue.Queue = queue.Queue()
        threading.Thread(target=lambda: [lines.put(x) for x in proc.stdout] + [lines.put(None)], daemon=True).start()
        hung = False
        while True:
            try:
                line = lines.get(timeout=args.check_timeout)
            except queue.Empty:
                hung = True
                proc.kill()
                break
            if line is None:
                break
            if line.startswith("{"):
                session.add(json.loads(line))
        code = proc.wait()
        if session.done:
            return None
        if session.env is None:
            return f"the doctor's worker stopped before any check ({_signal_name(code)}); see stderr above"
        if session.begun is None:
            return f"the doctor's worker stopped between checks ({_signal_name(code)}); see stderr above"
        index, route = session.begun
        cell = session.cells[index]
        what = (
            f"no progress for {args.check_timeout:.0f} s: the check hung (the doctor killed it and went on)"
            if hung
            else f"crashed the process ({_signal_name(code)}); the doctor went on in a new one"
        )
        key = (cell["device"], cell["producer"], cell["consumer"], route)
        crashes[key] = crashes.get(key, 0) + 1
        if crashes[key] >= CRASHES_BEFORE_SKIP:
            skip.add(key)
        resume = session.crashed(what)
        sys.stderr.write(
            f"doctor: {cell['device']} {cell['producer']} → {cell['consumer']} {cell['case']} [{route}]: {what}\n"
        )
