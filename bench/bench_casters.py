#!/usr/bin/env python3
"""Call overhead of a no-op bound function taking one constrained array (float32, 1-d, on the
input's device), in one process, interleaved:

    PYTHONPATH=$(tools/dev-python build/py) python3 bench/bench_casters.py [--rounds 15] [--json out.json]

Columns (ns per call: median over rounds [spread p10-p90] and the best round, which on a shared,
busy machine is the closest to the unloaded cost):
  stridex/nb    Arg<dtype<float>, ndim<1>, cpu|cuda> through include/stridex/python/nanobind.hpp
  ndarray/nb    nb::ndarray<float, nb::ndim<1>, nb::device::cpu|cuda>, the same constraints
  stridex/pb    the same Arg through include/stridex/python/pybind11.hpp
  array_t/pb    py::array_t<float> (noconvert), NumPy inputs only: pybind11 takes nothing else
  python/nb     stridex/nb with the wheel's caster API switched off: stridex.view() and the exchange
                API, the path every argument took before the caster API (and still the fallback)
  ratio         stridex/nb over ndarray/nb, of the medians and of the best rounds (the goal: <= 1.0)
Then the return path: a stridex.View argument returned as a new stridex.View (to_stridex_view),
through the caster API (api) and through the Python path (python).
Inputs, where installed: NumPy, torch CPU, torch CUDA, CuPy, JAX (its GPU backend and its CPU). The
modules (bench/casters) are built with CMake into build/bench-casters on first use.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import statistics
import timeit

from _cmake_build import build_project

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
BUILD = os.path.join(REPO, "build", "bench-casters")

import numpy as np  # noqa: E402

NOTES: list[str] = []


def optional(name):
    try:
        return importlib.import_module(name)
    except Exception as e:  # noqa: BLE001 - any failure means "not available here"
        NOTES.append(f"{name}: not available ({type(e).__name__})")
        return None


def build_modules():
    build_project(os.path.join(HERE, "casters"), BUILD)
    nb = importlib.import_module("casters_nb")
    try:
        pb = importlib.import_module("casters_pb")
    except ImportError:
        NOTES.append("pybind11 is not installed: the pybind11 columns are skipped")
        pb = None
    return nb, pb


def inputs():
    out = {"numpy": ("cpu", np.arange(1000, dtype=np.float32))}
    torch = optional("torch")
    if torch is not None:
        out["torch cpu"] = ("cpu", torch.arange(1000, dtype=torch.float32))
        if torch.cuda.is_available():
            out["torch cuda"] = ("cuda", torch.arange(1000, dtype=torch.float32, device="cuda"))
    cupy = optional("cupy")
    if cupy is not None:
        try:
            out["cupy"] = ("cuda", cupy.arange(1000, dtype=cupy.float32))
        except Exception as e:  # noqa: BLE001 - no GPU
            NOTES.append(f"cupy: no array ({type(e).__name__})")
    jax = optional("jax")
    if jax is not None:
        a = jax.numpy.arange(1000, dtype=jax.numpy.float32)
        if (default := a.devices().pop().platform) != "cpu":
            out[f"jax {default}"] = ("cuda", a)
        out["jax cpu"] = ("cpu", jax.device_put(a, jax.devices("cpu")[0]))
    return out


def per_call_ns(fn, x, number):
    if isinstance(fn, PythonPath):
        with fn:
            return per_call_ns(fn.fn, x, number)
    return timeit.timeit(lambda: fn(x), number=number) / number * 1e9


class PythonPath:
    """A function of casters_nb called with the caster API switched off (for one timing)."""

    def __init__(self, module, fn):
        self.module, self.fn = module, fn

    def __call__(self, x):
        with self:
            return self.fn(x)

    def __enter__(self):
        self.module.python_path(True)

    def __exit__(self, *exc):
        self.module.python_path(False)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--number", type=int, default=20000, help="calls per timing")
    parser.add_argument("--json", help="also write the numbers here")
    args = parser.parse_args()

    nb, pb = build_modules()
    columns = ["stridex/nb", "ndarray/nb", "stridex/pb", "array_t/pb", "python/nb"]
    cases = {}
    for name, (kind, x) in inputs().items():
        fns = {"stridex/nb": getattr(nb, f"stridex_{kind}"), "ndarray/nb": getattr(nb, f"ndarray_{kind}")}
        if pb is not None:
            fns["stridex/pb"] = getattr(pb, f"stridex_{kind}")
            if name == "numpy":
                fns["array_t/pb"] = pb.pyarray_cpu
        fns["python/nb"] = PythonPath(nb, getattr(nb, f"stridex_{kind}"))
        for column, fn in fns.items():
            fn(x)  # every call must succeed before it is timed (and warms the caches)
        cases[name] = (x, fns)
    import stridex

    returned = stridex.view(np.arange(1000, dtype=np.float32))
    cases["return"] = (returned, {"api": nb.stridex_return, "python": PythonPath(nb, nb.stridex_return)})

    samples = {(name, c): [] for name, (_, fns) in cases.items() for c in fns}
    # Interleaved: every column of one input in each round, the order rotated from round to round
    # so that no column always runs right after another. One input at a time: JAX leaves threads
    # busy after its calls, which would tax whatever ran next on a small machine.
    for name, (x, fns) in cases.items():
        order = list(fns.items())
        for r in range(args.rounds):
            k = r % len(order)
            for column, fn in order[k:] + order[:k]:
                samples[(name, column)].append(per_call_ns(fn, x, args.number))

    def summary(values):
        q = statistics.quantiles(values, n=10) if len(values) > 1 else [values[0]] * 9
        return statistics.median(values), q[0], q[-1], min(values)

    print(
        f"python {platform.python_version()}, numpy {np.__version__}; ns per call, median [p10-p90] best of "
        f"{args.rounds} interleaved rounds of {args.number} calls"
    )
    print(f"{'input':<12}" + "".join(f"{c:>29}" for c in columns) + f"{'ratio':>12}")
    results = {}
    for name, (_, fns) in cases.items():
        if name == "return":
            continue
        row, cells = {}, []
        for column in columns:
            if column not in fns:
                cells.append(f"{'—':>29}")
                continue
            med, lo, hi, best = summary(samples[(name, column)])
            row[column] = {"median": med, "p10": lo, "p90": hi, "best": best}
            cells.append(f"{med:>6.0f} [{lo:>5.0f}-{hi:>5.0f}] {best:>5.0f}".rjust(29))
        ratio = row["stridex/nb"]["median"] / row["ndarray/nb"]["median"]
        ratio_best = row["stridex/nb"]["best"] / row["ndarray/nb"]["best"]
        row["ratio"], row["ratio_best"] = ratio, ratio_best
        results[name] = row
        print(f"{name:<12}" + "".join(cells) + f"{ratio:>6.2f} {ratio_best:>5.2f}")
    row = {c: dict(zip(("median", "p10", "p90", "best"), summary(samples[("return", c)]))) for c in ("api", "python")}
    results["return"] = row
    print(
        "return a stridex.View: "
        + ", ".join(
            f"{c} {row[c]['median']:.0f} [{row[c]['p10']:.0f}-{row[c]['p90']:.0f}] {row[c]['best']:.0f}" for c in row
        )
    )
    for note in NOTES:
        print("note:", note)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"results": results, "notes": NOTES}, f, indent=1)


if __name__ == "__main__":
    main()
