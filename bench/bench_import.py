#!/usr/bin/env python3
"""ns per stridex.view(x), side by side with the other ways of taking an array, in one process.

    PYTHONPATH=$(tools/dev-python build-import) python bench/bench_import.py [--json out.json]

Producers: NumPy, torch CPU, torch CUDA, CuPy and JAX (those installed; JAX on its default
backend). Columns, each the median of repeated timeit runs (ns per call):
  stridex      stridex.view(x)
  SMV          cuda.core StridedMemoryView.from_any_interface(x, stream_ptr=-1) (from_dlpack or the
               constructor on older cuda.core)
  nb_peer      a nanobind function taking nb::ndarray<> (bench/nb_peer, built here with CMake into
               bench/nb_peer/build on first use; the column is skipped with a note if that fails)
  np           np.from_dlpack(x) (NumPy only)
  __dlpack__   the producer's own x.__dlpack__() (a lower bound for any DLPack consumer)
and the ratios the goals are stated in: stridex/SMV <= 0.5, stridex/nb_peer <= 1.0,
stridex/np.from_dlpack <= 1.0. Runs in well under two minutes.
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
            cfg = ["cmake", "-S", PEER_SOURCE, "-B", PEER_BUILD, "-DCMAKE_BUILD_TYPE=Release",
                   f"-DPython_EXECUTABLE={sys.executable}"]
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
        if hasattr(cls, "from_any_interface"):
            return lambda x: cls.from_any_interface(x, stream_ptr=-1), "from_any_interface"
        if hasattr(cls, "from_dlpack"):
            return lambda x: cls.from_dlpack(x, stream_ptr=-1), "from_dlpack"
        return lambda x: cls(x, stream_ptr=-1), "StridedMemoryView()"
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


def measure(columns, budget=0.15, repeats=7):
    """ns per call of each column: the median of `repeats` timeit runs, the columns interleaved
    run by run so that a transient slowdown (another process, a framework's background thread)
    lands on all of them alike. A column whose call raises gets the exception's name."""
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
    return out


def cell(x):
    return f"{x:,.0f}" if isinstance(x, float) else (x or "–")


def ratio(a, b):
    return f"{a / b:.2f}×" if isinstance(a, float) and isinstance(b, float) else "–"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="also write the numbers to this file")
    parser.add_argument("--budget", type=float, default=0.3, help="seconds of timing per cell (default 0.3)")
    args = parser.parse_args()
    start = time.perf_counter()

    peer = load_peer()
    smv, smv_name = load_smv()
    rows = []
    for name, x in producers():
        r = {"producer": name}
        r.update(measure({
            "stridex": lambda: stridex.view(x),
            "SMV": (lambda: smv(x)) if smv else None,
            "nb_peer": (lambda: peer(x)) if peer else None,
            "np.from_dlpack": (lambda: np.from_dlpack(x)) if name == "numpy" else None,
            "__dlpack__": lambda: x.__dlpack__(),
        }, args.budget))
        rows.append(r)

    device = "no GPU"
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        device = torch.cuda.get_device_name()
    print(f"# stridex.view: ns per call (median of 7 interleaved timeit runs), one process\n")
    print(f"Python {platform.python_version()}, NumPy {np.__version__}, {platform.machine()}, {device}; "
          f"SMV = cuda.core StridedMemoryView.{smv_name or '–'}(x, stream_ptr=-1)\n")
    print("| producer | stridex.view | SMV | nb_peer | np.from_dlpack | x.__dlpack__() "
          "| stridex / SMV (≤ 0.5) | stridex / nb_peer (≤ 1.0) | stridex / np.from_dlpack (≤ 1.0) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['producer']} | {cell(r['stridex'])} | {cell(r['SMV'])} | {cell(r['nb_peer'])} "
              f"| {cell(r['np.from_dlpack'])} | {cell(r['__dlpack__'])} | {ratio(r['stridex'], r['SMV'])} "
              f"| {ratio(r['stridex'], r['nb_peer'])} | {ratio(r['stridex'], r['np.from_dlpack'])} |")
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
