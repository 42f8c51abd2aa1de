"""Refit: a synthetic state dict from trainer processes to an inference process with another
sharding, stridex.refit against the usual ways, interleaved in one run (docs/refit.md).

    PYTHONPATH=<staged stridex> python bench/bench_refit.py [--gib 2] [--tensors 300] [--trainers 2]
        [--inference-shards 2] [--iters 5] [--budget 100] [--per-tensor-max 32] [--json]

State dict: `--tensors` 2-D weights of mixed shapes and dtypes (float32, bfloat16, float16)
totalling `--gib` GiB, row-sharded over `--trainers` trainer processes (trainer r on
cuda:r % G, every shard of a trainer carved from one allocation, as a torch caching-allocator
segment holds many tensors); the inference process holds them column-sharded over
`--inference-shards` shards on cuda:(k + 1) % G (G: the GPUs; all on cuda:0 with one GPU).
Methods, one refit each per round, rounds interleaved; every measurement is printed (flushed) as
soon as it is made, and rounds stop once `--budget` seconds passed (what was measured is reported):

* stridex.refit: the trainers publish (begin_update + publish on their stream), the inference
  process pulls into its column shards (one copy-engine call) and synchronizes.
* per-tensor IPC: each trainer sends its tensors (one torch tensor per weight, separately
  allocated) through torch.multiprocessing (one CUDA IPC handle per tensor); the inference process
  copies the columns it needs from each and calls torch.cuda.ipc_collect(). Slow by nature (a
  handle opened and closed per tensor per step): only the first `--per-tensor-max` weights travel,
  and its GB/s are over those bytes (the row says so).
* flattened bucket: each trainer packs its tensors into one flat buffer and sends that one
  tensor (one handle per process, the sglang/verl way); the inference process unpacks.
* NCCL broadcast (torch.distributed): each trainer rank broadcasts its shards, one call per weight,
  to the inference rank (a group of the two per trainer), which copies the columns it needs. NCCL
  puts one rank per GPU: it runs when there are more GPUs than trainers (the inference rank on
  cuda:<trainers>); otherwise its row says why it was skipped.
* peer bandwidth: one contiguous copy of the same byte count from the trainers' GPU to the
  inference GPU (same-device D2D with one GPU, and the row says so).

Reported: seconds per refit (median, min-max), GB/s, ratios to stridex (by GB/s), and the trainers'
host blocked fraction (time inside begin_update + publish over the refit time). Goals: >= 80 % of
peer bandwidth end to end; faster than every baseline, >= 2x the flattened bucket; host blocked
<= 1 %.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import statistics
import sys
import tempfile
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


def nccl_reason(gpus: int, trainers: int) -> str | None:
    """Why the NCCL baseline cannot run here, or None."""
    if gpus <= trainers:
        return (
            f"NCCL puts one rank per GPU: {trainers} trainers + 1 inference rank need {trainers + 1} GPUs, found {gpus}"
        )
    return None


def nccl_init(rank: int, args: argparse.Namespace) -> list[Any]:
    """Joins the NCCL job (trainers 0..T-1, inference rank T); one group {r, T} per trainer."""
    import datetime

    import torch.distributed as dist

    world = args.trainers + 1
    dist.init_process_group(
        "nccl",
        init_method=f"file://{args.nccl_file}",
        rank=rank,
        world_size=world,
        timeout=datetime.timedelta(seconds=120),
    )
    return [dist.new_group([r, args.trainers]) for r in range(args.trainers)]


def trainer(rank: int, args: argparse.Namespace, conn: Any) -> None:
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
    for k, (name, shape, dtype) in enumerate(spec):
        index = boxes[name]
        extent = (index[0].stop - index[0].start, shape[1])
        n = extent[0] * extent[1] * (4 if dtype == "float32" else 2)
        t = pool[off : off + n].view(_torch_dtype(torch, dtype)).view(extent)
        t.normal_()
        off += -(-n // 512) * 512
        shards[name] = (t, (index[0].start, 0), shape)
        if k < args.per_tensor_max:
            separate.append(t.clone())  # the per-tensor baseline's tensors: one allocation each
    flat = torch.empty(sizes, dtype=torch.uint8, device=device)
    stream = torch.cuda.Stream(device)
    with Publisher() as pub:
        conn.send(pub.address)
        # After the address: the parent starts the inference process, the last rank to join, once
        # every trainer has sent it.
        groups = nccl_init(rank, args) if nccl_reason(gpus, args.trainers) is None else None
        version = 0
        while True:
            cmd = conn.recv()
            if cmd == "stop":
                break
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
                elif cmd == "nccl":
                    import torch.distributed as dist

                    for t, _, _ in shards.values():
                        dist.broadcast(t, src=rank, group=groups[rank])
                    torch.cuda.synchronize(device)
                    conn.send(None)
            if cmd in ("per_tensor", "flat"):
                conn.recv()  # the receiver is done with this step's handles
    if groups is not None:
        import torch.distributed as dist

        dist.destroy_process_group()
    conn.close()


def inference(args: argparse.Namespace, addresses: list[str], conns: list[Any], out: Any) -> None:
    import torch
    import torch.multiprocessing  # noqa: F401

    import stridex
    from stridex import ShardedView, ShardLayout
    from stridex.refit import Subscriber

    started = time.perf_counter()
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

    def nbytes(items: list[tuple[str, tuple[int, int], str]]) -> int:
        return sum(shape[0] * shape[1] * (4 if dt == "float32" else 2) for _, shape, dt in items)

    total = nbytes(spec)
    per_tensor_spec = spec[: args.per_tensor_max]
    sub = None  # made at the first refit: a Subscriber waits for its publishers' first publish
    rows = {
        name: [ShardLayout.rows(shape, ["cpu"] * args.trainers).shards[r][0] for r in range(args.trainers)]
        for name, shape, _ in spec
    }
    groups = None
    nccl_device = args.trainers
    if nccl_reason(gpus, args.trainers) is None:
        groups = nccl_init(args.trainers, args)
        received = [
            {
                name: torch.empty(
                    (rows[name][r][0].stop - rows[name][r][0].start, shape[1]),
                    dtype=_torch_dtype(torch, dtype),
                    device=nccl_device,
                )
                for name, shape, dtype in spec
            }
            for r in range(args.trainers)
        ]

    def scatter(r: int, name: str, src: Any) -> None:
        """The columns each destination shard needs of trainer r's rows of `name`."""
        row = rows[name][r][0]
        for index, t in views[name]:
            t[row.start : row.stop].copy_(src[:, index[1].start : index[1].stop], non_blocking=True)

    def sync_all() -> None:
        for d in range(gpus):
            torch.cuda.synchronize(d)

    results: dict[str, list[float]] = {m: [] for m in ("stridex.refit", "per-tensor IPC", "flattened bucket")}
    if groups is not None:
        results["NCCL broadcast"] = []
    results["peer bandwidth"] = []
    sizes = {m: total for m in results}
    sizes["per-tensor IPC"] = nbytes(per_tensor_spec)
    host_fraction = []
    peer_src = torch.empty(total, dtype=torch.uint8, device=0)
    peer_dst = torch.empty(total, dtype=torch.uint8, device=devices[0])

    def measured(method: str, it: int, dt: float) -> None:
        if it:
            results[method].append(dt)
        label = "warm-up" if not it else f"round {it}"
        print(
            f"  [{time.perf_counter() - started:6.1f} s] {label:8s} {method:18s} {dt:.4f} s  "
            f"{sizes[method] / 1e9 / dt:.1f} GB/s",
            flush=True,
        )

    rounds = 0
    for it in range(args.iters + 1):  # the first round warms up every method
        if time.perf_counter() - started > args.budget:
            print(f"  budget of {args.budget:g} s spent: {rounds} measured rounds", flush=True)
            break
        # stridex.refit
        t0 = time.perf_counter()
        for c in conns:
            c.send("refit")
        host = max(c.recv() for c in conns)
        if sub is None:
            sub = Subscriber(addresses)
        v = sub.wait()  # every trainer has published this round's version
        sub.pull(v, into=dest)
        sync_all()
        dt = time.perf_counter() - t0
        if it:
            host_fraction.append(host / dt)
        measured("stridex.refit", it, dt)
        # per-tensor IPC (the first --per-tensor-max weights)
        t0 = time.perf_counter()
        for c in conns:
            c.send("per_tensor")
        for r, c in enumerate(conns):
            tensors = c.recv()
            for (name, _, _), t in zip(per_tensor_spec, tensors):
                scatter(r, name, t)
            del tensors
        sync_all()
        torch.cuda.ipc_collect()
        dt = time.perf_counter() - t0
        for c in conns:
            c.send("ack")
        measured("per-tensor IPC", it, dt)
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
        measured("flattened bucket", it, dt)
        # NCCL broadcast
        if groups is not None:
            import torch.distributed as dist

            t0 = time.perf_counter()
            for c in conns:
                c.send("nccl")
            with torch.cuda.device(nccl_device):
                for r in range(args.trainers):
                    for name, _, _ in spec:
                        dist.broadcast(received[r][name], src=r, group=groups[r])
                for r in range(args.trainers):
                    for name, _, _ in spec:
                        scatter(r, name, received[r][name])
            sync_all()
            for c in conns:
                c.recv()
            measured("NCCL broadcast", it, time.perf_counter() - t0)
        # peer bandwidth
        sync_all()
        t0 = time.perf_counter()
        stridex.copy(peer_dst, peer_src)
        sync_all()
        measured("peer bandwidth", it, time.perf_counter() - t0)
        rounds = it
    if sub is not None:
        sub.close()
    if groups is not None:
        import torch.distributed as dist

        dist.destroy_process_group()
    out.send(
        {
            "results": results,
            "host_fraction": host_fraction,
            "bytes": total,
            "sizes": sizes,
            "gpus": gpus,
            "per_tensor": len(per_tensor_spec),
        }
    )
    out.close()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--gib", type=float, default=2.0)
    p.add_argument("--tensors", type=int, default=300)
    p.add_argument("--trainers", type=int, default=2)
    p.add_argument("--inference-shards", type=int, default=2)
    p.add_argument("--iters", type=int, default=5)
    p.add_argument("--budget", type=float, default=100.0, help="seconds of rounds (after set-up); then report")
    p.add_argument("--per-tensor-max", type=int, default=32, help="weights the per-tensor IPC baseline sends")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        args.nccl_file = os.path.join(tmp, "nccl-rendezvous")
        return run(args)


def run(args: argparse.Namespace) -> int:
    ctx = mp.get_context("spawn")  # pipes only: no semaphores to leak
    pipes = [ctx.Pipe() for _ in range(args.trainers)]
    procs = [ctx.Process(target=trainer, args=(r, args, pipes[r][1]), daemon=True) for r in range(args.trainers)]
    for q in procs:
        q.start()
    report_in, report_out = ctx.Pipe(duplex=False)
    inf = None
    try:
        addresses = []
        for r, (a, _) in enumerate(pipes):
            if not a.poll(600):
                raise RuntimeError(f"trainer {r} did not start within 600 s")
            addresses.append(a.recv())
        print(f"trainers up: {args.trainers}; measuring (budget {args.budget:g} s)", flush=True)
        inf = ctx.Process(target=inference, args=(args, addresses, [a for a, _ in pipes], report_out), daemon=True)
        inf.start()
        report_out.close()
        if not report_in.poll(args.budget + 600):
            raise RuntimeError("the inference process did not report")
        report = report_in.recv()
        inf.join(60)
    except (RuntimeError, EOFError, OSError) as e:
        print(f"bench_refit: {e}", flush=True)
        return 1
    finally:
        for a, _ in pipes:
            try:
                a.send("stop")
            except OSError:
                pass
        for q in [*procs, *([inf] if inf is not None else [])]:
            q.join(60)
            if q.is_alive():
                q.kill()
                q.join(10)
        for a, b in pipes:
            a.close()
            b.close()
        report_in.close()
    summarize(args, report)
    return 0


def summarize(args: argparse.Namespace, report: dict[str, Any]) -> None:
    gb = report["bytes"] / 1e9
    rows: dict[str, dict[str, Any]] = {}
    for method, samples in report["results"].items():
        if not samples:
            rows[method] = {"skipped": "no measured round within the budget"}
            continue
        med = statistics.median(samples)
        rows[method] = {
            "median_s": med,
            "min_s": min(samples),
            "max_s": max(samples),
            "GB_per_s": report["sizes"][method] / 1e9 / med,
            "rounds": len(samples),
        }
    rows["per-tensor IPC"]["note"] = (
        f"first {report['per_tensor']} of {args.tensors} tensors; GB/s over their "
        f"{report['sizes']['per-tensor IPC'] / 1e9:.2f} GB"
    )
    reason = nccl_reason(report["gpus"], args.trainers)
    if reason is not None:
        rows["NCCL broadcast"] = {"skipped": reason}
    ref = rows["stridex.refit"].get("GB_per_s")
    summary = {
        "bytes": report["bytes"],
        "tensors": args.tensors,
        "gpus": report["gpus"],
        "peer_row": "same-device D2D (one GPU)" if report["gpus"] < 2 else "cuda:0 -> inference GPU",
        "rows": rows,
        "ratio_to_stridex": {m: ref / r["GB_per_s"] for m, r in rows.items() if "GB_per_s" in r and ref},
        "fraction_of_peer_bandwidth": ref / rows["peer bandwidth"]["GB_per_s"]
        if ref and "GB_per_s" in rows["peer bandwidth"]
        else None,
        "trainer_host_blocked_fraction": statistics.median(report["host_fraction"])
        if report["host_fraction"]
        else None,
    }
    if args.json:
        print(json.dumps(summary, indent=2), flush=True)
        return
    print(f"refit of {gb:.2f} GB in {args.tensors} tensors, {report['gpus']} GPU(s); peer row: {summary['peer_row']}")
    for m, r in rows.items():
        if "skipped" in r:
            print(f"  {m:18s} skipped: {r['skipped']}")
        else:
            note = f"  ({r['note']})" if "note" in r else ""
            print(
                f"  {m:18s} {r['median_s']:.4f} s (min {r['min_s']:.4f}, max {r['max_s']:.4f}, {r['rounds']} rounds)  "
                f"{r['GB_per_s']:.1f} GB/s  stridex is x{summary['ratio_to_stridex'][m]:.2f} of it{note}"
            )
    if summary["fraction_of_peer_bandwidth"] is not None:
        print(f"  stridex.refit reaches {summary['fraction_of_peer_bandwidth']:.0%} of the peer bandwidth")
    if summary["trainer_host_blocked_fraction"] is not None:
        print(f"  trainers' host blocked: {summary['trainer_host_blocked_fraction']:.2%} of the refit", flush=True)


if __name__ == "__main__":
    os.environ.setdefault("CUDA_MODULE_LOADING", "EAGER")
    sys.exit(main())
