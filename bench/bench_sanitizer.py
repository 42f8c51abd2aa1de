#!/usr/bin/env python3
"""What the hand-over race sanitizer costs per hand-over (docs/sanitizer.md, "Cost").

    python bench/bench_sanitizer.py --make-baseline /tmp/nosan      # once: builds the baseline
    taskset -c 1 python bench/bench_sanitizer.py [--baseline /tmp/nosan] [--json out.json]

off   stridex.view(x) with the sanitizer off: this build against --baseline, the same source tree
      built with the sanitizer compiled out (--make-baseline: `sanitizer::on()` made a constant
      false, so every hook is dropped by the compiler), each timed in a process of its own, the
      processes interleaved (A B A B ...); the table shows the medians and the median of the
      run-by-run differences. Goal: <= 2 ns per call.
on    the same call inside stridex.sanitize(), interleaved with off in one process; the
      difference is the sanitizer's work per hand-over (the log, a few Python frames, a stream
      query). Goal: <= 2 us per hand-over.

Producers: NumPy (host memory: the sanitizer's hook returns at once), torch CUDA where there is a
GPU, and without one a __cuda_array_interface__ object whose pointer the test-only module
stridex_testing fakes as cuda:0 memory (built by tests/python/ext_build.py).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import timeit

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.join(os.path.dirname(HERE), "tests", "python")


def producers(only: str | None = None) -> dict:
    """name -> (array, stream argument for the hand-over), those available here (`only`: just
    that one, so that a child timing NumPy does not import torch)."""
    import numpy as np

    out = {"numpy": (np.zeros((16, 16), np.float32), None)}
    if only == "numpy":
        return out
    try:
        import torch

        if torch.cuda.is_available():
            side = torch.cuda.Stream()
            out["torch-cuda"] = (torch.zeros((16, 16), device="cuda"), side)
    except ImportError:
        pass
    if "torch-cuda" not in out:
        sys.path.insert(0, TESTS)
        from ext_build import build_test_extensions

        build_test_extensions()
        import stridex_testing

        stridex_testing.fake_cuda_pointers(True)
        stridex_testing.capture_orders(True)  # orderings recorded, never sent to a driver
        a = np.zeros((16, 16), np.float32)
        cai = type("FakeCudaArray", (), {})()
        cai.__cuda_array_interface__ = {
            "shape": a.shape,
            "typestr": a.dtype.str,
            "data": (a.ctypes.data, False),
            "version": 3,
            "stream": 7,
        }
        cai.keep = a
        out["fake-cuda"] = (cai, 11)
    return out


ROOT = os.path.dirname(HERE)
SWITCH = "inline bool on() noexcept { return detail::g_on.load(std::memory_order_relaxed); }"


def make_baseline(target: str) -> None:
    """Builds this source tree with the sanitizer compiled out into `target` (pip --target)."""
    import shutil
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        tree = os.path.join(tmp, "stridex")
        skip = shutil.ignore_patterns(".git", ".gpu", ".venv", "build", "build-*", "__pycache__")
        shutil.copytree(ROOT, tree, ignore=skip)
        header = os.path.join(tree, "src", "extension", "sanitizer.hpp")
        with open(header) as f:
            text = f.read()
        if SWITCH not in text:
            raise SystemExit(f"{header}: the switch's definition changed; update SWITCH in {__file__}")
        with open(header, "w") as f:
            f.write(text.replace(SWITCH, "inline bool on() noexcept { return false; }"))
        pip = [sys.executable, "-m", "pip", "install", "-q", "--no-build-isolation", "--no-deps"]
        subprocess.run([*pip, "--target", target, tree], check=True)


def time_call(fn, budget: float) -> float:
    """ns per call: timeit's autorange scaled to `budget` seconds, best of 3 such runs."""
    t = timeit.Timer(fn)
    n, took = t.autorange()
    n = max(1, int(n * budget / max(took, 1e-9)))
    return min(t.repeat(3, n)) / n * 1e9


def child(name: str, budget: float) -> None:
    """One timing of stridex.view with the sanitizer off, printed as ns (a process of its own)."""
    import stridex

    x, stream = producers(only=name)[name]
    view = stridex.view
    print(time_call((lambda: view(x, stream=stream)) if stream is not None else (lambda: view(x)), budget))


def off_against_baseline(name: str, baseline: str, repeats: int, budget: float) -> dict:
    def run(pythonpath: str | None) -> float:
        env = dict(os.environ)
        env.pop("STRIDEX_SANITIZE", None)
        if pythonpath:
            env["PYTHONPATH"] = pythonpath + os.pathsep + env.get("PYTHONPATH", "")
        cmd = [sys.executable, __file__, "--child", name, "--budget", str(budget)]
        done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True)
        return float(done.stdout.split()[-1])

    this, base = [], []
    for _ in range(repeats):
        this.append(run(None))
        base.append(run(baseline))
    diffs = [a - b for a, b in zip(this, base)]
    return {
        "this_ns": statistics.median(this),
        "baseline_ns": statistics.median(base),
        "diff_ns": statistics.median(diffs),
        "diff_min_max": [min(diffs), max(diffs)],
    }


def on_against_off(name: str, repeats: int, budget: float) -> dict:
    import warnings

    import stridex
    from stridex import _stridex

    x, stream = producers()[name]
    view = stridex.view
    call = (lambda: view(x, stream=stream)) if stream is not None else (lambda: view(x))
    off, on = [], []
    warnings.simplefilter("ignore", stridex.StreamRaceWarning)
    for _ in range(repeats):
        off.append(time_call(call, budget))
        with stridex.sanitize():
            on.append(time_call(call, budget))
        _stridex._sanitizer_reset()
    diffs = [b - a for a, b in zip(off, on)]
    return {
        "off_ns": statistics.median(off),
        "on_ns": statistics.median(on),
        "added_ns": statistics.median(diffs),
        "added_min_max": [min(diffs), max(diffs)],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", help="a stridex without the sanitizer, on PYTHONPATH for the off comparison")
    parser.add_argument("--make-baseline", metavar="DIR", help="build that baseline into DIR, then exit")
    parser.add_argument("--repeats", type=int, default=9, help="interleaved runs (default 9)")
    parser.add_argument("--budget", type=float, default=0.2, help="seconds per timing (default 0.2)")
    parser.add_argument("--json", help="also write the numbers to this file")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.budget)
        return 0
    if args.make_baseline:
        make_baseline(args.make_baseline)
        return 0
    import stridex

    if stridex._stridex._sanitizer_state()[0]:
        parser.error("STRIDEX_SANITIZE is set: the off columns need the sanitizer off")
    results: dict = {"off": {}, "on": {}}
    names = list(producers())
    print(f"# stridex.view: ns per call (medians of {args.repeats} interleaved runs)\n")
    if args.baseline:
        print("| producer | this build, off | baseline | difference (min..max) |\n|---|---|---|---|")
        for name in names:
            r = results["off"][name] = off_against_baseline(name, args.baseline, args.repeats, args.budget)
            lo, hi = r["diff_min_max"]
            print(
                f"| {name} | {r['this_ns']:.1f} | {r['baseline_ns']:.1f} | {r['diff_ns']:+.1f} ({lo:+.1f}..{hi:+.1f}) |"
            )
        print()
    print("| producer | off | on | added per hand-over (min..max) |\n|---|---|---|---|")
    for name in names:
        r = results["on"][name] = on_against_off(name, args.repeats, args.budget)
        lo, hi = r["added_min_max"]
        print(f"| {name} | {r['off_ns']:.1f} | {r['on_ns']:.1f} | {r['added_ns']:+.1f} ({lo:+.1f}..{hi:+.1f}) |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
