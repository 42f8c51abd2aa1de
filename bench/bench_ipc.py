"""Views across processes: hand-over latency on one GPU, Dask bandwidth between two.

    PYTHONPATH=<staged stridex> python bench/bench_ipc.py [--quick] [--skip-dask] [--gib 1]

1. Hand-over latency: a producer sends a CUDA tensor to a consumer process over a
   multiprocessing Pipe and waits for its acknowledgement; the consumer acknowledges as soon as
   the object is unpickled (memory opened, stream ordered). stridex.View (CUDA IPC handle + IPC
   event, ticket broker) against torch.multiprocessing's sharing of the same tensor, interleaved
   one hand-over each, in two modes: "hold" (the consumer keeps the previous object until the next
   arrives: both sides hit their cache of opened handles, the data-loader steady state) and "drop"
   (the consumer drops each object before acknowledging: every hand-over opens its handle anew).
   Goal: stridex <= torch.
2. Dask bandwidth: a 1 GiB device array made on worker A (GPU 0) and consumed on worker B (GPU 1):
   stridex.View over UCX (cuda frames), a CuPy array over UCX (Dask's own CUDA serializers), and
   stridex.View over TCP (staged through host memory), one cluster per protocol, all up at once and
   visited in turn each repeat. Each transfer is timed from the consumer task's submission to its
   result, minus the median of an empty task's round trip. Goals: the View within 10 % of CuPy
   over UCX, and at least 10x TCP. Needs 2 GPUs and distributed-ucxx.

Medians and interquartile ranges; every row says how many samples it has.
"""

from __future__ import annotations

import argparse
import gc
import multiprocessing as mp
import os
import statistics
import sys
import time


def quartiles(xs):
    xs = sorted(xs)
    q = statistics.quantiles(xs, n=4) if len(xs) >= 2 else [xs[0]] * 3
    return q[0], statistics.median(xs), q[2]


# ---- 1. hand-over latency ------------------------------------------------------------------------
def _consumer(conn, mode):
    import torch  # noqa: F401 - registers torch's reducers; the tensors rebuild through them
    import torch.multiprocessing  # noqa: F401

    import stridex  # noqa: F401

    held = None
    while True:
        obj = conn.recv()  # unpickling opens the memory
        if obj is None:
            return
        if mode == "hold":
            held = obj
        del obj
        if mode == "drop":
            held = None
            gc.collect()
        conn.send(True)
    del held


def handover(iterations: int) -> list[tuple]:
    import torch
    import torch.multiprocessing  # noqa: F401 - torch's ForkingPickler reductions

    import stridex

    rows = []
    ctx = mp.get_context("spawn")
    for mode in ("hold", "drop"):
        here, there = ctx.Pipe()
        p = ctx.Process(target=_consumer, args=(there, mode), daemon=True)
        p.start()
        t = torch.randn(1 << 20, device="cuda")
        torch.cuda.synchronize()
        samples = {"stridex.View": [], "torch.Tensor": []}
        for i in range(iterations + 20):  # the first 20 warm both paths and are not counted
            for name in ("stridex.View", "torch.Tensor") if i % 2 == 0 else ("torch.Tensor", "stridex.View"):
                obj = stridex.view(t) if name == "stridex.View" else t
                start = time.perf_counter()
                here.send(obj)
                here.recv()
                took = time.perf_counter() - start
                if i >= 20:
                    samples[name].append(took * 1e6)
                del obj
        here.send(None)
        p.join(timeout=60)
        for name, xs in samples.items():
            rows.append((mode, name, len(xs), *quartiles(xs)))
    return rows


# ---- 2. Dask bandwidth ---------------------------------------------------------------------------
def _make(kind, nbytes, seed):
    import cupy

    import stridex

    a = cupy.full(nbytes // 4, seed, dtype=cupy.float32)
    cupy.cuda.runtime.deviceSynchronize()
    return a if kind == "cupy" else stridex.view(a)


def _touch(x):
    import stridex

    v = x if isinstance(x, stridex.View) else stridex.view(x)
    return v.nbytes, str(v.device)


def _noop(_=None):
    return 0


def dask_bandwidth(protocols, nbytes: int, repeats: int) -> list[tuple]:
    """One cluster per protocol, all up at once, so that every repeat visits each (protocol,
    array) pair in turn -- interleaved, in alternating order."""
    from contextlib import ExitStack

    from distributed import Client, Nanny, Scheduler, SpecCluster

    import dask

    with ExitStack() as stack:
        # UCX finds its CUDA transports only with a context made before it starts (as dask-cuda
        # does); the Nannies pass this configuration on to their workers.
        stack.enter_context(dask.config.set({"distributed-ucxx.create-cuda-context": True}))
        pairs, base = [], {}
        for protocol in protocols:
            workers = {
                f"gpu{i}": {"cls": Nanny, "options": {"nthreads": 1, "env": {"CUDA_VISIBLE_DEVICES": str(i)}}}
                for i in range(2)
            }
            scheduler = {"cls": Scheduler, "options": {"protocol": protocol, "dashboard_address": None}}
            cluster = stack.enter_context(SpecCluster(workers=workers, scheduler=scheduler))
            client = stack.enter_context(Client(cluster, set_as_default=False))
            a, b = sorted(client.scheduler_info()["workers"])
            overhead = []
            for i in range(10):  # an empty task's round trip on the consumer, subtracted from each transfer
                start = time.perf_counter()
                client.submit(_noop, i, workers=[b], pure=False).result()
                overhead.append(time.perf_counter() - start)
            base[protocol] = statistics.median(overhead)
            for kind in ["stridex", "cupy"] if protocol == "ucxx" else ["stridex"]:
                pairs.append((protocol, kind, client, a, b))
        samples: dict[tuple[str, str], list[float]] = {(p, k): [] for p, k, *_ in pairs}
        for r in range(repeats + 1):  # the first of each is warm-up
            for protocol, kind, client, a, b in pairs if r % 2 == 0 else pairs[::-1]:
                made = client.submit(_make, kind, nbytes, r, workers=[a], pure=False)
                # Made and settled on the producer (a task there that depends on it: no transfer, and
                # no default client needed, which distributed.wait would want).
                client.submit(_noop, made, workers=[a], pure=False).result()
                start = time.perf_counter()
                got, device = client.submit(_touch, made, workers=[b], pure=False).result()
                took = time.perf_counter() - start - base[protocol]
                assert got == nbytes and device.startswith("cuda"), (got, device)
                if r:
                    samples[protocol, kind].append(nbytes / took / 1e9)
                del made
        return [(protocol, kind, len(xs), *quartiles(xs)) for (protocol, kind), xs in samples.items()]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer samples")
    parser.add_argument("--skip-dask", action="store_true")
    parser.add_argument("--gib", type=float, default=1.0, help="Dask array size in GiB (default 1)")
    args = parser.parse_args()

    import stridex

    if not stridex.cuda_available():
        print("bench_ipc: needs a CUDA GPU (stridex.cuda_available() is False)", file=sys.stderr)
        return 0
    import torch

    print(f"# stridex IPC benchmark ({torch.cuda.get_device_name(0)}, {stridex.device_count()} GPU(s))\n")
    print("## Hand-over latency of a CUDA tensor to another process (µs, send to acknowledgement)\n")
    print("| consumer | shared as | n | p25 | median | p75 |\n|---|---|---|---|---|---|")
    for mode, name, n, lo, med, hi in handover(60 if args.quick else 300):
        print(f"| {mode} | {name} | {n} | {lo:.0f} | {med:.0f} | {hi:.0f} |")
    sys.stdout.flush()

    if args.skip_dask:
        return 0
    if stridex.device_count() < 2:
        print("\nDask bandwidth: skipped (needs 2 GPUs)")
        return 0
    protocols = ["tcp"]
    try:
        import distributed_ucxx  # noqa: F401

        protocols.insert(0, "ucxx")
    except ImportError:
        print("\nDask over UCX: skipped (distributed-ucxx is not installed)")
    nbytes = int(args.gib * (1 << 30)) // 4 * 4
    print(f"\n## Dask transfer of a {args.gib:g} GiB device array, GPU 0 -> GPU 1 (GB/s)\n")
    print("| protocol | array | n | p25 | median | p75 |\n|---|---|---|---|---|---|")
    for protocol, kind, n, lo, med, hi in dask_bandwidth(protocols, nbytes, 3 if args.quick else 6):
        print(f"| {protocol} | {kind} | {n} | {lo:.2f} | {med:.2f} | {hi:.2f} |")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    sys.exit(main())
