#!/usr/bin/env python3
"""ns per stridex.view(x), side by side with the other ways of taking an array, in one process.

    PYTHONPATH=$(tools/dev-python build-import) taskset -c 1 python bench/bench_import.py [--json out.json]

Producers: NumPy, torch CPU, torch CUDA, CuPy and JAX (those installed; JAX on its default
backend). Columns, each the median of repeated timeit runs (ns per call):
  stridex      stridex.view(x)
  SMV          cuda.core StridedMemoryView.from_dlpack(x, stream_ptr=-1), its fastest path
               (from_any_interface is slower; the constructor on older cuda.core)
  nb_peer      a nanobind function taking nb::ndarray<> (bench/nb_peer, built here with CMake into
               bench/nb_peer/build on first use; the column is skipped with a note if that fails)
  np           np.from_dlpack(x) (NumPy only)
  __dlpack__   the producer's own x.__dlpack__() (a lower bound for any DLPack consumer)
and the ratios the goals are stated in: stridex/SMV <= 0.5, stridex/nb_peer <= 1.0,
stridex/np.from_dlpack <= 1.0. The candidates run interleaved (A B A B ...) in one process, and
each ratio is taken run by run: the table shows the median ratio and its spread (min-max over the
runs), since repeated runs on shared machines vary up to 2x. Pin the process to one core
(`taskset -c N`, or --cpu N). Runs in well under two minutes.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import statistics
import subprocess
import sys
import time
import timeit

HERE = os.path.dirname(os.path.abspath(__file__))
PEER_SOURCE = os.path.join(HERE, "nb_peer")
PEER_BUILD = os.path.join(PEER_SOURCE, "build")

import numpy as np  # noqa: E402

import stridex  # noqa: E402

NOTES: list[str] = []


def optional(name):
    try:
        return importlib.import_module(name)
    except Exception as e:  # noqa: BLE001 - any failure means "not available here"
        NOTES.append(f"{name}: not available ({type(e).__name__}: {e})".splitlines()[0])
        return None


# ---- the nanobind peer ----------------------------------------------------------------------------


def load_peer():
    def find():
        for root, _, files in os.walk(PEER_BUILD):
            if any(f.startswith("nb_peer") and f.endswith((".so", ".pyd")) for f in files):
                return root
        return None

    where = find()
    if where is None:
        try:
            cfg = [
                "cmake",
                "-S",
                PEER_SOURCE,
                "-B",
                PEER_BUILD,
                "-DCMAKE_BUILD_TYPE=Release",
                f"-DPython_EXECUTABLE={sys.executable}",
            ]
            try:
                import ninja  # noqa: F401

                cfg += ["-G", "Ninja"]
            except ImportError:
                if subprocess.run(["ninja", "--version"], capture_output=True).returncode == 0:
                    cfg += ["-G", "Ninja"]
            for cmd in (cfg, ["cmake", "--build", PEER_BUILD, "--config", "Release", "-j", str(os.cpu_count() or 2)]):
                r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
                if r.returncode != 0:
                    raise RuntimeError((r.stderr or r.stdout).strip().splitlines()[-1:])
        except Exception as e:  # noqa: BLE001
            NOTES.append(f"nb_peer: build failed, column skipped ({e})")
            return None
        where = find()
    if where is None:
        NOTES.append("nb_peer: built, but no module found under bench/nb_peer/build; column skipped")
        return None
    sys.path.insert(0, where)
    try:
        return importlib.import_module("nb_peer").take
    except ImportError as e:
        NOTES.append(f"nb_peer: import failed, column skipped ({e})")
        return None


# ---- cuda.core's StridedMemoryView ------------------------------------------------------------------


def load_smv():
    for name in ("cuda.core", "cuda.core.experimental", "cuda.core.experimental.utils"):
        try:
            mod = importlib.import_module(name)
        except Exception:  # noqa: BLE001
            continue
        cls = getattr(mod, "StridedMemoryView", None) or getattr(getattr(mod, "utils", None), "StridedMemoryView", None)
        if cls is None:
            continue
        if hasattr(cls, "from_dlpack"):  # the fastest path; from_any_interface costs more
            return lambda x, stream_ptr=-1: cls.from_dlpack(x, stream_ptr=stream_ptr), "from_dlpack"
        return lambda x, stream_ptr=-1: cls(x, stream_ptr=stream_ptr), "StridedMemoryView()"
    NOTES.append("cuda.core: StridedMemoryView not available; column skipped")
    return None, None


# ---- producers --------------------------------------------------------------------------------------


def producers():
    out = [("numpy", np.arange(12, dtype=np.float32).reshape(3, 4))]
    torch = optional("torch")
    if torch is not None:
        out.append(("torch CPU", torch.arange(12, dtype=torch.float32).reshape(3, 4)))
        if torch.cuda.is_available():
            out.append(("torch CUDA", torch.arange(12, dtype=torch.float32, device="cuda").reshape(3, 4)))
        else:
            NOTES.append("torch CUDA: no GPU")
    cupy = optional("cupy")
    if cupy is not None:
        try:
            out.append(("cupy", cupy.arange(12, dtype=cupy.float32).reshape(3, 4)))
        except Exception as e:  # noqa: BLE001
            NOTES.append(f"cupy: {type(e).__name__}: {e}".splitlines()[0])
    jnp = optional("jax.numpy")
    if jnp is not None:
        import jax

        a = jnp.arange(12, dtype=jnp.float32).reshape(3, 4)
        out.append((f"jax ({jax.default_backend()})", a))
    return out


# ---- timing -----------------------------------------------------------------------------------------


def calibrate(fn, seconds):
    """Calls per timeit run so that one run takes about `seconds`; None if the call raises."""
    try:
        fn()
    except Exception:  # noqa: BLE001
        return None
    t = timeit.Timer(fn)
    number = 1
    while True:
        elapsed = t.timeit(number)
        if elapsed > seconds / 4 or number >= 1 << 22:
            break
        number *= 4
    return max(1, int(number * seconds / max(elapsed, 1e-9)))


def measure(columns, budget=0.15, repeats=15):
    """ns per call of each column: the median of `repeats` timeit runs, the columns interleaved
    run by run so that a transient slowdown (another process, a framework's background thread)
    lands on all of them alike. A column whose call raises gets the exception's name. The runs
    themselves are kept under "<column> runs", for ratios taken run by run."""
    out, timers = {}, {}
    for name, fn in columns.items():
        if fn is None:
            out[name] = None
            continue
        number = calibrate(fn, budget / repeats)
        if number is None:
            try:
                fn()
            except Exception as e:  # noqa: BLE001
                out[name] = type(e).__name__
            continue
        timers[name] = (timeit.Timer(fn), number, [])
    for _ in range(repeats):
        for name, (t, number, runs) in timers.items():
            runs.append(t.timeit(number) / number * 1e9)
    for name, (_, _, runs) in timers.items():
        out[name] = statistics.median(runs)
        out[f"{name} runs"] = runs
    return out


def run_ratios(row, a, b):
    """(median, min, max) of run-by-run ratios a/b (each pair measured back to back), or None."""
    ra, rb = row.get(f"{a} runs"), row.get(f"{b} runs")
    if not ra or not rb:
        return None
    ratios = [x / y for x, y in zip(ra, rb)]
    return statistics.median(ratios), min(ratios), max(ratios)


def cell(x):
    return f"{x:,.0f}" if isinstance(x, float) else (x or "–")


def ratio(row, a, b):
    r = run_ratios(row, a, b)
    return f"{r[0]:.2f}× ({r[1]:.2f}–{r[2]:.2f})" if r else "–"


def breakdown(producers_, peer, only, budget, repeats):
    """--breakdown: where the time of stridex.view(x) goes, piece by piece, per producer (ns per
    call, interleaved like the main table). Each piece is a call a user could make, so the
    differences between columns are the costs of the steps in between:
      dlpack()        x.__dlpack__()                      the producer's own export, no keywords
      dlpack(mv)      x.__dlpack__(max_version=(1, 3))    what stridex and nb_peer ask for
      view(capsule)   stridex.view(x.__dlpack__(max_version=(1, 3)))  export + capsule import
      view            stridex.view(x)                     the whole import (exchange API if offered)
      view NO_SYNC    stridex.view(x, stream=NO_SYNC)     without any stream ordering
      view stream=1   stridex.view(x, stream=1)           an explicit legacy stream (__dlpack_device__ asked)
      nb_peer         the nanobind peer
    and which protocol the type offers first (exchange API, __dlpack__, CAI). floors() follows."""
    print("\n# breakdown: ns per call (median); see bench_import.py breakdown()\n")
    cols = ["dlpack()", "dlpack(mv)", "view(capsule)", "view", "view NO_SYNC", "view stream=1", "nb_peer"]
    print("| producer | first protocol | " + " | ".join(cols) + " |")
    print("|---|---|" + "---:|" * len(cols))
    for name, x in producers_:
        if only and name.split(" ")[0] not in only:
            continue
        t = type(x)
        struct = stridex._stridex._internals.array_struct(t)
        first = (
            f"{'NumPy' if struct == 'numpy' else 'CuPy'} struct"
            if struct
            else "exchange API"
            if hasattr(t, "__dlpack_c_exchange_api__") or hasattr(t, "__c_dlpack_exchange_api__")
            else "__dlpack__"
            if hasattr(t, "__dlpack__")
            else "CAI"
            if hasattr(t, "__cuda_array_interface__")
            else "other"
        )
        mv = (1, 3)
        r = measure(
            {
                "dlpack()": lambda: x.__dlpack__(),
                "dlpack(mv)": lambda: x.__dlpack__(max_version=mv),
                "view(capsule)": lambda: stridex.view(x.__dlpack__(max_version=mv)),
                "view": lambda: stridex.view(x),
                "view NO_SYNC": lambda: stridex.view(x, stream=stridex.NO_SYNC),
                "view stream=1": lambda: stridex.view(x, stream=1),
                "nb_peer": (lambda: peer(x)) if peer else None,
            },
            budget,
            repeats,
        )
        print(f"| {name} | {first} | " + " | ".join(cell(r.get(c)) for c in cols) + " |")


def floors(producers_, smv, only, budget, repeats):
    """--breakdown, for producers with a DLPack exchange API capsule: what no importer can go below,
    next to cuda.core's StridedMemoryView (SMV) and stridex.view, interleaved (ns per call, median):
      noop            a nanobind function taking one object: the Python call alone (bench/nb_peer)
      xchg borrow     the same function calling the type's exchange API to lend its DLTensor
                      (dltensor_from_py_object_no_sync), the fastest description the producer offers
      xchg +stream    + current_work_stream for the tensor's device
      xchg managed    + a managed tensor made and freed instead (managed_tensor_from_py_object_no_sync)
      view NO_SYNC    stridex.view(x, stream=stridex.NO_SYNC): without the stream ordering
      view(View)      stridex.view(v) of a stridex.View v: the call, a View copy and a new View object
      floor           xchg borrow + view(View) - noop: the producer's description plus one new
                      Python object, with no validation, owner or ordering at all
    Any importer that returns a new object pays at least `floor`; floor / SMV is how close to
    cuda.core a perfect importer could get."""
    module = sys.modules.get("nb_peer")
    rows = []
    for name, x in producers_:
        if only and name.split(" ")[0] not in only:
            continue
        api = getattr(type(x), "__dlpack_c_exchange_api__", None)
        if module is None or type(api).__name__ != "PyCapsule":
            continue
        v = stridex.view(x)
        r = measure(
            {
                "SMV": (lambda: smv(x)) if smv else None,
                "stridex.view": lambda: stridex.view(x),
                "view NO_SYNC": lambda: stridex.view(x, stream=stridex.NO_SYNC),
                "view(View)": lambda: stridex.view(v),
                "noop": lambda: module.noop(x),
                "xchg borrow": lambda: module.exchange(x, api, 0),
                "xchg +stream": lambda: module.exchange(x, api, 1),
                "xchg managed": lambda: module.exchange(x, api, 2),
            },
            budget,
            repeats,
        )
        runs = zip(r["xchg borrow runs"], r["view(View) runs"], r["noop runs"])
        r["floor runs"] = [b + c - n for b, c, n in runs]
        r["floor"] = statistics.median(r["floor runs"])
        rows.append((name, r))
    if not rows:
        return
    print("\n# floors: ns per call (median); see bench_import.py floors()\n")
    cols = [
        "SMV",
        "stridex.view",
        "view NO_SYNC",
        "view(View)",
        "noop",
        "xchg borrow",
        "xchg +stream",
        "xchg managed",
        "floor",
    ]
    print("| producer | " + " | ".join(cols) + " | floor / SMV | stridex / SMV |")
    print("|---|" + "---:|" * (len(cols) + 2))
    for name, r in rows:
        print(
            f"| {name} | "
            + " | ".join(cell(r.get(c)) for c in cols)
            + f" | {ratio(r, 'floor', 'SMV')} | {ratio(r, 'stridex.view', 'SMV')} |"
        )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="also write the numbers to this file")
    parser.add_argument("--budget", type=float, default=0.3, help="seconds of timing per cell (default 0.3)")
    parser.add_argument("--repeats", type=int, default=15, help="interleaved runs per cell (default 15)")
    parser.add_argument("--cpu", type=int, help="pin this process to one core (like taskset -c N)")
    parser.add_argument("--only", help="comma-separated producers to time (default: all), e.g. numpy")
    parser.add_argument(
        "--breakdown", action="store_true", help="also time the pieces of stridex.view per producer (see breakdown())"
    )
    args = parser.parse_args()
    if args.cpu is not None:
        os.sched_setaffinity(0, {args.cpu})
    pinned = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    start = time.perf_counter()

    peer = load_peer()
    smv, smv_name = load_smv()
    rows = []
    only = {p.strip() for p in args.only.split(",")} if args.only else None
    arrays = producers()
    for name, x in arrays:
        if only and name.split(" ")[0] not in only:
            continue
        r = {"producer": name}
        r.update(
            measure(
                {
                    "stridex": lambda: stridex.view(x),
                    "SMV": (lambda: smv(x)) if smv else None,
                    "nb_peer": (lambda: peer(x)) if peer else None,
                    "np.from_dlpack": (lambda: np.from_dlpack(x)) if name == "numpy" else None,
                    "__dlpack__": lambda: x.__dlpack__(),
                },
                args.budget,
                args.repeats,
            )
        )
        rows.append(r)
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available() and (not only or "torch" in only):
        # The stream path: the consumer names a side stream, so both order it after the producer's.
        x = torch.arange(12, dtype=torch.float32, device="cuda").reshape(3, 4)
        side = torch.cuda.Stream()
        r = {"producer": "torch CUDA, stream=side stream"}
        r.update(
            measure(
                {
                    "stridex": lambda: stridex.view(x, stream=side),
                    "SMV": (lambda: smv(x, stream_ptr=side.cuda_stream)) if smv else None,
                    "nb_peer": None,
                    "np.from_dlpack": None,
                    "__dlpack__": lambda: x.__dlpack__(stream=side.cuda_stream),
                },
                args.budget,
                args.repeats,
            )
        )
        rows.append(r)

    device = "no GPU"
    if torch is not None and torch.cuda.is_available():
        device = torch.cuda.get_device_name()
    print(f"# stridex.view: ns per call (median of {args.repeats} interleaved timeit runs), one process\n")
    cores = f"pinned to core {sorted(pinned)[0]}" if pinned and len(pinned) == 1 else "NOT pinned (use taskset -c N)"
    print(
        f"Python {platform.python_version()}, NumPy {np.__version__}, {platform.machine()}, {device}, {cores}; "
        f"SMV = cuda.core StridedMemoryView.{smv_name or '–'}(x, stream_ptr=-1); ratios: median (min–max) "
        f"of run-by-run ratios\n"
    )
    print(
        "| producer | stridex.view | SMV | nb_peer | np.from_dlpack | x.__dlpack__() "
        "| stridex / SMV (≤ 0.5) | stridex / nb_peer (≤ 1.0) | stridex / np.from_dlpack (≤ 1.0) |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['producer']} | {cell(r['stridex'])} | {cell(r['SMV'])} | {cell(r['nb_peer'])} "
            f"| {cell(r['np.from_dlpack'])} | {cell(r['__dlpack__'])} | {ratio(r, 'stridex', 'SMV')} "
            f"| {ratio(r, 'stridex', 'nb_peer')} | {ratio(r, 'stridex', 'np.from_dlpack')} |"
        )
    if args.breakdown:
        breakdown(arrays, peer, only, args.budget, args.repeats)
        floors(arrays, smv, only, args.budget, args.repeats)
    if NOTES:
        print("\nNotes:")
        for n in NOTES:
            print(f"- {n}")
    print(f"\n(total {time.perf_counter() - start:.1f} s)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows, "notes": NOTES, "device": device}, f, indent=2)


if __name__ == "__main__":
    main()
