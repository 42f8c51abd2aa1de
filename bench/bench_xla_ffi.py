#!/usr/bin/env python3
"""Per-call overhead of a stridex-generated XLA FFI handler inside jax.jit, in one process, interleaved:

    python3 bench/bench_xla_ffi.py [--platform cpu|gpu] [--rounds 15] [--json out.json]

One function, y[0] += a on a 1-d float32 array written in place (operand aliased to the result; on
the GPU the handlers launch nothing, so that only the call is measured), called three ways:
  stridex        the handler <stridex/xla/ffi.hpp> generates from the stridex signature, called
                 through stridex.jax.ffi_function (bench/xla_ffi/xla_ffi_bench.cpp)
  hand-written   the same handler written with XLA's own binding and the same checks, called
                 through jax.ffi.ffi_call
  pure_callback  the same function in NumPy through jax.pure_callback (CPU only)
and timed two ways (ns per call: median over rounds [spread p10-p90] and the best round):
  1 call/jit     one jitted call of a function making one call: JAX's dispatch included
  per call, K    a jitted chain of K calls, each on the previous result, divided by K: the custom
                 call itself, as XLA runs it inside a compiled program
  ratio          stridex over hand-written (the goal: <= 1.1), and hand-written over pure_callback
The module is built with CMake into build/bench-xla-ffi on first use.
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
BUILD = os.path.join(REPO, "build", "bench-xla-ffi")

import jax  # noqa: E402
import numpy as np  # noqa: E402

import stridex.jax  # noqa: E402


def build_module():
    build_project(os.path.join(HERE, "xla_ffi"), BUILD)
    return importlib.import_module("xla_ffi_bench")


def candidates(module, where: str):
    """name -> f(y) making one call (a = 1.0)."""
    suffix = "cpu" if where == "cpu" else "cuda"
    xla_platform = "cpu" if where == "cpu" else "CUDA"
    stridex_fn = stridex.jax.ffi_function(f"bench_stridex_{suffix}", getattr(module, f"stridex_{suffix}"))
    jax.ffi.register_ffi_target(f"bench_hand_{suffix}", getattr(module, f"hand_{suffix}"), platform=xla_platform)

    def hand(y):
        return jax.ffi.ffi_call(
            f"bench_hand_{suffix}", jax.ShapeDtypeStruct(y.shape, y.dtype), input_output_aliases={0: 0}
        )(y, a=np.float32(1.0))

    out = {"stridex": lambda y: stridex_fn(y, a=1.0), "hand-written": hand}
    if where == "cpu":

        def bumped(y):
            out = np.array(y)
            out[0] += np.float32(1.0)
            return out

        out["pure_callback"] = lambda y: jax.pure_callback(bumped, jax.ShapeDtypeStruct(y.shape, y.dtype), y)
    return out


def jitted(call, k: int):
    def chain(y):
        for _ in range(k):
            y = call(y)
        return y

    return jax.jit(chain)


def per_call_ns(fn, y, number: int, k: int) -> float:
    fn(y).block_until_ready()
    return timeit.timeit(lambda: fn(y).block_until_ready(), number=number) / number / k * 1e9


def summary(values):
    q = statistics.quantiles(values, n=10) if len(values) > 1 else [values[0]] * 9
    return {"median": statistics.median(values), "p10": q[0], "p90": q[-1], "best": min(values)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--platform", choices=["cpu", "gpu"], default="cpu")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--number", type=int, default=2000, help="jitted calls per timing")
    parser.add_argument("--chain", type=int, default=64, help="K: calls per jitted chain")
    parser.add_argument("--json", help="also write the numbers here")
    args = parser.parse_args()

    module = build_module()
    device = jax.devices(args.platform)[0]
    y = jax.device_put(np.zeros(16, np.float32), device)
    calls = candidates(module, args.platform)
    measures = {"1 call/jit": 1, f"per call, K={args.chain}": args.chain}
    fns = {(m, c): jitted(call, k) for m, k in measures.items() for c, call in calls.items()}
    for (m, c), fn in fns.items():  # each must run and be right before it is timed
        # The CUDA handlers launch nothing (no toolkit needed to build them): y stays as it was.
        expected = measures[m] if args.platform == "cpu" else 0
        got = float(np.asarray(fn(y))[0])
        assert got == expected, f"{c} ({m}): y[0] is {got}, expected {expected}"
    samples = {key: [] for key in fns}

    # Interleaved: every candidate of one measure in each round, the order rotated from round to
    # round so that none always runs right after another.
    def number_of(k: int, candidate: str) -> int:
        # About the same time per timing for each: a chain runs k calls, a callback costs ~10x more.
        n = args.number if k == 1 else max(args.number * 4 // k, 20)
        return max(n // 10, 5) if candidate == "pure_callback" and k > 1 else n

    for m, k in measures.items():
        order = [(m, c) for c in calls]
        for r in range(args.rounds):
            shift = r % len(order)
            for key in order[shift:] + order[:shift]:
                samples[key].append(per_call_ns(fns[key], y, number_of(k, key[1]), k))

    print(
        f"python {platform.python_version()}, jax {jax.__version__}, {device.device_kind} ({args.platform}); "
        f"ns per call, median [p10-p90] best of {args.rounds} interleaved rounds"
    )
    print(f"{'measure':<18}" + "".join(f"{c:>30}" for c in calls) + f"{'stridex/hand':>15}{'hand/callback':>15}")
    results = {}
    for m in measures:
        row = {c: summary(samples[(m, c)]) for c in calls}
        cells = [
            f"{row[c]['median']:>7.0f} [{row[c]['p10']:>6.0f}-{row[c]['p90']:>6.0f}] {row[c]['best']:>6.0f}"
            for c in calls
        ]
        ratio = row["stridex"]["median"] / row["hand-written"]["median"]
        ratio_best = row["stridex"]["best"] / row["hand-written"]["best"]
        row["stridex/hand"] = {"median": ratio, "best": ratio_best}
        text = f"{ratio:>8.2f} {ratio_best:>5.2f}"
        if "pure_callback" in row:
            cb = row["hand-written"]["median"] / row["pure_callback"]["median"]
            row["hand/callback"] = {"median": cb}
            text += f"{cb:>15.3f}"
        results[m] = row
        print(f"{m:<18}" + "".join(f"{cell:>30}" for cell in cells) + text)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"platform": args.platform, "jax": jax.__version__, "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
