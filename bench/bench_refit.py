"""Refit: a synthetic state dict from trainer processes to an inference process with another
sharding, stridex.refit against the usual ways, interleaved in one run (docs/refit.md).

    PYTHONPATH=<staged stridex> python bench/bench_refit.py [--gib 8] [--tensors 300] [--trainers 2]
        [--inference-shards 2] [--iters 5] [--json]

State dict: `--tensors` 2-D weights of mixed shapes and dtypes (float32, bfloat16, float16)
totalling `--gib` GiB, row-sharded over `--trainers` trainer processes (trainer r on
cuda:r % G, every shard of a trainer carved from one allocation, as a torch caching-allocator
segment holds many tensors); the inference process holds them column-sharded over
`--inference-shards` shards on cuda:(k + 1) % G (G: the GPUs; all on cuda:0 with one GPU).
Methods, one refit each per round, rounds interleaved:

* stridex.refit: the trainers publish (begin_update + publish on their stream), the inference
  process pulls into its column shards (one copy-engine call) and synchronizes.
* per-tensor IPC: each trainer sends its tensors (one torch tensor per weight, separately
  allocated) through torch.multiprocessing (one CUDA IPC handle per tensor); the inference process
  copies the columns it needs from each and calls torch.cuda.ipc_collect().
* flattened bucket: each trainer packs its tensors into one flat buffer and sends that one
  tensor (one handle per process, the sglang/verl way); the inference process unpacks.
* NCCL broadcast (torch.distributed): needs 2 GPUs (NCCL cannot put two ranks on one GPU);
  with fewer the row says why it was skipped. Each trainer broadcasts its shards to the inference
  rank, which copies the columns it needs.
* peer bandwidth: one contiguous copy of the same byte count from the trainers' GPU to the
  inference GPU (same-device D2D with one GPU, and the row says so).

Reported: seconds per refit (median, min-max), GB/s, ratios to stridex, and the trainers' host
blocked fraction (time inside begin_update + publish over the refit time). Goals: >= 80 % of peer
bandwidth end to end; faster than every baseline, >= 2x the flattened bucket; host blocked <= 1 %.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import statistics
import time
from typing import Any

DTYPES = ("float32", "bfloat16", "float16")


def state_dict_spec(gib: float, tensors: int, seed: int = 0) -> list[tuple[str, tuple[int, int], str]]:
    """(name, global shape, dtype) per weight: mixed shapes, rows and columns multiples of 64."""
    import random

    rng = random.Random(seed)
    weights = [rng.choice((1, 2, 4, 8)) for _ in range(tensors)]
    total = gib * (1 << 30)
    unit = total / sum(weights)
    out = []
    for k, w in enumerate(weights):
        dtype = DTYPES[k % len(DTYPES)]
        itemsize = 4 if dtype == "float32" else 2
        elements = max(int(unit * w / itemsize), 64 * 64)
        cols = 64 * rng.choice((16, 32, 64, 128))
        rows = max(64, (elements // cols) // 64 * 64)
        out.append((f"w{k}", (rows, cols), dtype))
    return out


def _torch_dtype(torch: Any, name: str) -> Any:
    return getattr(torch, name)


def trainer(rank: int, args: argparse.Namespace, conn: Any, ready: Any) -> None:
    import torch
    import torch.multiprocessing  # noqa: F401 - registers torch's CUDA IPC reductions

    from stridex import ShardLayout
    from stridex.refit import Publisher

    gpus = torch.cuda.device_count()
    device = rank % gpus
    torch.cuda.set_device(device)
    spec = state_dict_spec(args.gib, args.tensors)
    boxes, sizes = {}, 0
    for name, shape, dtype in spec:
        index, _ = ShardLayout.rows(shape, ["cpu"] * args.trainers).shards[rank]
        boxes[name] = index
        n = (index[0].stop - index[0].start) * shape[1] * (4 if dtype == "float32" else 2)
        sizes += -(-n // 512) * 512
    pool = torch.empty(sizes, dtype=torch.uint8, device=device)
    shards, separate, off = {}, [], 0
    for name, shape, dtype in spec:
        index = boxes[name]
        extent = (index[0].stop - index[0].start, shape[1])
        n = extent[0] * extent[1] * (4 if dtype == "float32" else 2)
        t = pool[off : off + n].view(_torch_dtype(torch, dtype)).view(extent)
        t.normal_()
        off += -(-n // 512) * 512
        shards[name] = (t, (index[0].start, 0), shape)
        separate.append(t.clone())  # the per-tensor baseline's tensors: one allocation each
    flat = torch.empty(sizes, dtype=torch.uint8, device=device)
    stream = torch.cuda.Stream(device)
    pub = Publisher()
    ready.put((rank, pub.address))
    version = 0
    while True:
        cmd = conn.recv()
        if cmd == "stop":
            return
        version += 1
        with torch.cuda.stream(stream):
            t0 = time.perf_counter()
            if cmd == "refit":
                pub.begin_update(stream)
                pub.publish(shards, version, stream=stream)
                conn.send(time.perf_counter() - t0)
            elif cmd == "per_tensor":
                stream.synchronize()
                conn.send(separate)
            elif cmd == "flat":
                o = 0
                for t, _, _ in shards.values():  # pack: one copy per tensor into the flat buffer
                    n = t.numel() * t.element_size()
                    flat[o : o + n].copy_(t.reshape(-1).view(torch.uint8))
                    o += -(-n // 512) * 512
                stream.synchronize()
                conn.send(flat)
        if cmd in ("per_tensor", "flat"):
            conn.recv()  # the receiver is done with this step's handles


def inference(args: argparse.Namespace, addresses: list[str], conns: list[Any], out: Any) -> None:
    import torch
    import torch.multiprocessing  # noqa: F401

    import stridex
    from stridex import ShardedView, ShardLayout
    from stridex.refit import Subscriber

    gpus = torch.cuda.device_count()
    spec = state_dict_spec(args.gib, args.tensors)
    devices = [(k + 1) % gpus for k in range(args.inference_shards)]
    dest, views = {}, {}
    for name, shape, dtype in spec:
        layout = ShardLayout.columns(shape, [f"cuda:{d}" for d in devices])
        arrays = [
            torch.empty([s.stop - s.start for s in i], dtype=_torch_dtype(torch, dtype), device=str(dev))
            for i, dev in layout.shards
        ]
        views[name] = list(zip([i for i, _ in layout.shards], arrays))
        dest[name] = ShardedView.from_arrays(arrays, [[s.start for s in i] for i, _ in layout.shards], shape)
    total = sum(shape[0] * shape[1] * (4 if dt == "float32" else 2) for _, shape, dt in spec)
    sub = Subscriber(addresses)
    rows = {
        name: [ShardLayout.rows(shape, ["cpu"] * args.trainers).shards[r][0] for r in range(args.trainers)]
        for name, shape, _ in spec
    }

    def scatter(r: int, name: str, src: Any) -> None:
        """The columns each destination shard needs of trainer r's rows of `name`."""
        row = rows[name][r][0]
        for index, t in views[name]:
            t[row.start : row.stop].copy_(src[:, index[1].start : index[1].stop], non_blocking=True)

    def sync_all() -> None:
        for d in set(devices) | set(range(min(gpus, args.trainers))):
            torch.cuda.synchronize(d)

    results: dict[str, list[float]] = {
        m: [] for m in ("stridex.refit", "per-tensor IPC", "flattened bucket", "peer bandwidth")
    }
    host_fraction = []
    peer_src = torch.empty(total, dtype=torch.uint8, device=0)
    peer_dst = torch.empty(total, dtype=torch.uint8, device=devices[0])
    for it in range(args.iters + 1):  # the first round warms up every method
        # stridex.refit
        t0 = time.perf_counter()
        for c in conns:
            c.send("refit")
        host = max(c.recv() for c in conns)
        v = sub.wait()  # every trainer has published this round's version
        sub.pull(v, into=dest)
        sync_all()
        dt = time.perf_counter() - t0
        if it:
            results["stridex.refit"].append(dt)
            host_fraction.append(host / dt)
        # per-tensor IPC
        t0 = time.perf_counter()
        for c in conns:
            c.send("per_tensor")
        for r, c in enumerate(conns):
            tensors = c.recv()
            for (name, _, _), t in zip(spec, tensors):
                scatter(r, name, t)
            del tensors
        sync_all()
        torch.cuda.ipc_collect()
        dt = time.perf_counter() - t0
        for c in conns:
            c.send("ack")
        if it:
            results["per-tensor IPC"].append(dt)
        # flattened bucket
        t0 = time.perf_counter()
        for c in conns:
            c.send("flat")
        for r, c in enumerate(conns):
            flat = c.recv()
            o = 0
            for name, shape, dtype in spec:
                row = rows[name][r][0]
                n = (row.stop - row.start) * shape[1] * (4 if dtype == "float32" else 2)
                src = flat[o : o + n].view(_torch_dtype(torch, dtype)).view(row.stop - row.start, shape[1])
                scatter(r, name, src)
                o += -(-n // 512) * 512
            del flat
        sync_all()
        torch.cuda.ipc_collect()
        dt = time.perf_counter() - t0
        for c in conns:
            c.send("ack")
        if it:
            results["flattened bucket"].append(dt)
        # peer bandwidth
        torch.cuda.synchronize(0)
        t0 = time.perf_counter()
        stridex.copy(peer_dst, peer_src)
        sync_all()
        if it:
            results["peer bandwidth"].append(time.perf_counter() - t0)
    out.put({"results": results, "host_fraction": host_fraction, "bytes": total, "gpus": gpus})


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--gib", type=float, default=8.0)
    p.add_argument("--tensors", type=int, default=300)
    p.add_argument("--trainers", type=int, default=2)
    p.add_argument("--inference-shards", type=int, default=2)
    p.add_argument("--iters", type=int, default=5)
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    ctx = mp.get_context("spawn")
    ready, out = ctx.Queue(), ctx.Queue()
    pipes = [ctx.Pipe() for _ in range(args.trainers)]
    procs = [ctx.Process(target=trainer, args=(r, args, pipes[r][1], ready), daemon=True) for r in range(args.trainers)]
    for q in procs:
        q.start()
    addresses = dict(ready.get(timeout=600) for _ in procs)
    inf = ctx.Process(
        target=inference, args=(args, [addresses[r] for r in range(args.trainers)], [a for a, _ in pipes], out)
    )
    inf.start()
    report = out.get(timeout=3600)
    inf.join()
    for a, _ in pipes:
        a.send("stop")
    for q in procs:
        q.join(60)
    gb = report["bytes"] / 1e9
    rows = {}
    for method, samples in report["results"].items():
        med = statistics.median(samples)
        rows[method] = {"median_s": med, "min_s": min(samples), "max_s": max(samples), "GB_per_s": gb / med}
    rows["NCCL broadcast"] = {
        "skipped": "needs 2 GPUs (NCCL cannot put two ranks on one GPU)"
        if report["gpus"] < 2
        else "not implemented in this version of the benchmark"
    }
    ref = rows["stridex.refit"]["median_s"]
    summary = {
        "bytes": report["bytes"],
        "tensors": args.tensors,
        "gpus": report["gpus"],
        "peer_row": "same-device D2D (one GPU)" if report["gpus"] < 2 else "cuda:0 -> inference GPU",
        "rows": rows,
        "ratio_to_stridex": {m: r["median_s"] / ref for m, r in rows.items() if "median_s" in r},
        "fraction_of_peer_bandwidth": rows["peer bandwidth"]["median_s"] / ref,
        "trainer_host_blocked_fraction": statistics.median(report["host_fraction"]),
    }
    if args.json:
        print(json.dumps(summary, indent=2))
        return
    print(f"refit of {gb:.2f} GB in {args.tensors} tensors, {report['gpus']} GPU(s); peer row: {summary['peer_row']}")
    for m, r in rows.items():
        if "skipped" in r:
            print(f"  {m:18s} skipped: {r['skipped']}")
        else:
            print(
                f"  {m:18s} {r['median_s']:.4f} s (min {r['min_s']:.4f}, max {r['max_s']:.4f})  "
                f"{r['GB_per_s']:.1f} GB/s  x{summary['ratio_to_stridex'][m]:.2f} of stridex"
            )
    print(f"  stridex.refit reaches {summary['fraction_of_peer_bandwidth']:.0%} of the peer bandwidth")
    print(f"  trainers' host blocked: {summary['trainer_host_blocked_fraction']:.2%} of the refit")


if __name__ == "__main__":
    os.environ.setdefault("CUDA_MODULE_LOADING", "EAGER")
    main()
