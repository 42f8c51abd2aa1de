"""Replay time of a captured torch <-> CuPy pipeline with stridex hand-overs.

    python bench/bench_graphs.py [--elements 1048576] [--stages 8] [--iters 200] [--repeat 15] [--json out.json]

One pipeline of --stages stages, each: a torch kernel, a hand-over to CuPy, a CuPy kernel, a
hand-over back to torch, a torch kernel; every output preallocated (no allocation inside a capture).
Three ways to run it, timed interleaved (handover graph, native graph, eager, handover graph, ...):

  graph, stridex hand-overs   torch.cuda.graph capturing the pipeline, hand-overs through
                              stridex.view + from_dlpack inside the capture (the default request,
                              which means the capturing stream: docs/graphs.md)
  graph, no hand-overs        the same kernels captured with the CuPy / torch aliases made before
                              the capture: what the graph costs without any hand-over
  eager, stridex hand-overs   the pipeline run directly on the same stream

Each timing is the host wall clock of --iters runs, ending synchronized, per run; reported as the
median and spread (min-max) of --repeat rounds. The goal: graph with hand-overs / graph without
<= 1.05 (the hand-overs happen at capture; a replay runs the same kernels).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--elements", type=int, default=1 << 20, help="float32 elements per array")
    parser.add_argument("--stages", type=int, default=8)
    parser.add_argument("--iters", type=int, default=200, help="runs per timing")
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--json", help="write the rows here too")
    args = parser.parse_args()

    try:
        import cupy
        import torch
    except ImportError as e:
        print(f"bench_graphs: needs torch and cupy ({e})", file=sys.stderr)
        return 2
    import stridex

    if not torch.cuda.is_available() or not stridex.cuda_available():
        print("bench_graphs: needs a CUDA GPU (torch and stridex)", file=sys.stderr)
        return 2

    n, stages = args.elements, args.stages
    s = torch.cuda.Stream()
    cs = cupy.cuda.ExternalStream(s.cuda_stream)
    x = torch.rand(n, device="cuda")
    a = [torch.empty(n, device="cuda") for _ in range(stages)]
    b = [cupy.empty(n, dtype=cupy.float32) for _ in range(stages)]
    y = [torch.empty(n, device="cuda") for _ in range(stages)]
    # The aliases the native pipeline uses, made once, outside any capture.
    a_cupy = [cupy.from_dlpack(t) for t in a]
    b_torch = [torch.from_dlpack(c) for c in b]

    def with_handovers():
        src = x
        for i in range(stages):
            torch.mul(src, 1.0001, out=a[i])
            ca = cupy.from_dlpack(stridex.view(a[i]))  # torch -> CuPy through stridex
            cupy.add(ca, 1e-4, out=b[i])
            tb = torch.from_dlpack(stridex.view(b[i]))  # CuPy -> torch through stridex
            torch.mul(tb, 0.9999, out=y[i])
            src = y[i]

    def native():
        src = x
        for i in range(stages):
            torch.mul(src, 1.0001, out=a[i])
            cupy.add(a_cupy[i], 1e-4, out=b[i])
            torch.mul(b_torch[i], 0.9999, out=y[i])
            src = y[i]

    def capture(fn):
        g = torch.cuda.CUDAGraph()
        torch.cuda.synchronize()
        with torch.cuda.graph(g, stream=s), cs:
            fn()
        return g

    with torch.cuda.stream(s), cs:  # warm-up: kernels compiled and loaded before any capture
        with_handovers()
        native()
    torch.cuda.synchronize()
    g_handover, g_native = capture(with_handovers), capture(native)

    # The two graphs compute the same thing.
    with torch.cuda.stream(s):
        g_native.replay()
        expected = y[-1].clone()
        y[-1].zero_()
        g_handover.replay()
    torch.cuda.synchronize()
    assert torch.equal(expected, y[-1]), "the graph with hand-overs computes something else"

    def timed(run) -> float:
        torch.cuda.synchronize()
        t = time.perf_counter()
        with torch.cuda.stream(s), cs:
            for _ in range(args.iters):
                run()
        torch.cuda.synchronize()
        return (time.perf_counter() - t) / args.iters

    cases = {
        "graph, stridex hand-overs": g_handover.replay,
        "graph, no hand-overs": g_native.replay,
        "eager, stridex hand-overs": with_handovers,
    }
    samples: dict[str, list[float]] = {k: [] for k in cases}
    for run in cases.values():
        timed(run)
    for _ in range(args.repeat):
        for label, run in cases.items():
            samples[label].append(timed(run))

    def row(label):
        v = samples[label]
        return {"case": label, "median_us": statistics.median(v) * 1e6, "min_us": min(v) * 1e6, "max_us": max(v) * 1e6}

    rows = [row(k) for k in cases]
    ratio = rows[0]["median_us"] / rows[1]["median_us"]
    print(
        f"{torch.cuda.get_device_name()}: {stages} stages of torch -> CuPy -> torch, {n} float32, "
        f"{args.iters} runs per timing, {args.repeat} rounds"
    )
    for r in rows:
        print(f"  {r['case']:28s} {r['median_us']:10.1f} us per run  ({r['min_us']:.1f}-{r['max_us']:.1f})")
    print(f"  graph with / without hand-overs: {ratio:.3f}x (goal <= 1.05)")
    print(f"  eager / graph with hand-overs:   {rows[2]['median_us'] / rows[0]['median_us']:.2f}x")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows, "ratio": ratio, "device": torch.cuda.get_device_name()}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
