"""Resharding bandwidth over all visible GPUs: stridex.copy between two ShardedViews against JAX's
jax.device_put(x, new_sharding) on the same arrays, and against the peer-to-peer bandwidth of
contiguous blocks moved by cuMemcpyPeerAsync (docs/sharded.md).

    python bench/bench_reshard.py [--gib 16] [--repeat 7] [--dtypes float32 bfloat16] [--json out.json]

A square global array of --gib GiB is resharded between row, column and (from 4 GPUs on) 2-D block
shardings. Candidates run interleaved (stridex, JAX, peer, stridex, ...), each timed by the host
around the call with every GPU synchronized before and after; the rows give the median and the
spread (min-max) of --repeat runs. GB/s counts the bytes that cross between GPUs (the plan's pieces
whose source and destination GPUs differ), the work every candidate must do. The peer reference
moves that many bytes as contiguous blocks, every GPU pulling from every other at once with one
cuMemcpyPeerAsync a pair (stridex.copy of contiguous views, each on its destination's stream), the
same concurrency as the reshard. Every element of every destination shard is checked once per case.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # JAX beside torch on the same GPUs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gib", type=float, default=16, help="size of the global array (GiB)")
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16"])
    parser.add_argument("--no-jax", action="store_true", help="leave JAX's device_put out")
    parser.add_argument("--json", help="write the rows here too")
    args = parser.parse_args()

    import numpy
    import torch

    import stridex
    from stridex import ShardedView, ShardLayout

    n = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if n < 2 or not stridex.cuda_available():
        print(f"bench_reshard: needs 2 or more GPUs, found {n}", file=sys.stderr)
        return 2
    jax = None
    if not args.no_jax:
        try:
            import jax as jax_module

            if len(jax_module.devices("gpu")) >= n:
                jax = jax_module
        except Exception as e:  # noqa: BLE001 - JAX is optional here; the rows say it is missing
            print(f"bench_reshard: JAX left out ({type(e).__name__}: {e})", file=sys.stderr)
    devices = [f"cuda:{i}" for i in range(n)]

    def sync() -> None:
        for i in range(n):
            torch.cuda.synchronize(i)

    def timed(fn) -> float:
        sync()
        t = time.perf_counter()
        fn()
        sync()
        return time.perf_counter() - t

    rows = []
    for dtype_name in args.dtypes:
        dtype = getattr(torch, dtype_name)
        itemsize = torch.empty(0, dtype=dtype).element_size()
        side = math.isqrt(int(args.gib * (1 << 30)) // itemsize) // (128 * n) * (128 * n)
        shape = (side, side)
        kinds = {"rows": ShardLayout.rows(shape, devices), "columns": ShardLayout.columns(shape, devices)}
        if n >= 4:
            kinds["blocks"] = ShardLayout.blocks(shape, (2, n // 2), devices)

        def fill(index, device):
            # Small integers, exact in bfloat16: every element checkable against its global index.
            # int32: half the temporary of int64 (i * 131 + j * 7 < 2**31 for sides below 2**23).
            i = torch.arange(index[0].start, index[0].stop, device=device, dtype=torch.int32).view(-1, 1)
            j = torch.arange(index[1].start, index[1].stop, device=device, dtype=torch.int32).view(1, -1)
            return ((i * 131 + j * 7) % 251).to(dtype)

        def sharded(layout, filled):
            parts = [
                fill(i, d) if filled else torch.empty(tuple(s.stop - s.start for s in i), dtype=dtype, device=d)
                for i, d in layout.shards
            ]
            sync()
            return ShardedView.from_arrays(parts, [[s.start for s in i] for i, _ in layout.shards], shape=shape), parts

        def jax_sharding(kind):
            from jax.sharding import Mesh, NamedSharding
            from jax.sharding import PartitionSpec as P

            gpus = jax.devices("gpu")[:n]
            if kind == "blocks":
                return NamedSharding(Mesh(numpy.array(gpus).reshape(2, n // 2), ("x", "y")), P("x", "y"))
            mesh = Mesh(numpy.array(gpus), ("d",))
            return NamedSharding(mesh, P("d", None) if kind == "rows" else P(None, "d"))

        for a_kind, a_layout in kinds.items():
            src, _ = sharded(a_layout, True)
            for b_kind, b_layout in kinds.items():
                if a_kind == b_kind:
                    continue
                dst, dst_parts = sharded(b_layout, False)
                pieces = a_layout.plan(b_layout)
                cross = sum(
                    math.prod(s.stop - s.start for s in p.index) * itemsize
                    for p in pieces
                    if a_layout.shards[p.src][1] != b_layout.shards[p.dst][1]
                )
                # The peer reference: every GPU pulls cross / (n * (n - 1)) bytes from every other.
                per_pair = cross // (n * (n - 1)) // 16 * 16
                blocks = {
                    (d, s): (
                        stridex.empty((per_pair,), "uint8", device=devices[d]),
                        stridex.empty((per_pair,), "uint8", device=devices[s]),
                    )
                    for d in range(n)
                    for s in range(n)
                    if d != s
                }

                def peer():
                    for to, frm in blocks.values():
                        stridex.copy(to, frm)

                x = None
                cands = {"stridex": lambda: stridex.copy(dst, src), "peer": peer}
                if jax is not None:
                    x = src.to_jax()  # the same memory: JAX reshards what stridex does
                    target = jax_sharding(b_kind)
                    cands["JAX"] = lambda: jax.device_put(x, target).block_until_ready()
                for fn in cands.values():  # warm-up: kernels, peer access, JAX's compilation
                    fn()
                times = {k: [] for k in cands}
                for _ in range(args.repeat):
                    for k, fn in cands.items():
                        times[k].append(timed(fn))
                # Every element of every destination shard, after one more stridex copy.
                for p in dst_parts:
                    p.zero_()
                stridex.copy(dst, src)
                sync()
                ok = all(torch.equal(p, fill(i, d)) for p, (i, d) in zip(dst_parts, b_layout.shards))
                if jax is not None:
                    y = jax.device_put(x, target)
                    ok = ok and all(
                        torch.equal(torch.from_dlpack(s.data), fill(s.index, devices[s.device.local_hardware_id]))
                        for s in y.addressable_shards
                    )
                    del y
                row = {
                    "dtype": dtype_name,
                    "case": f"{a_kind} -> {b_kind}",
                    "shape": shape,
                    "cross_bytes": cross,
                    "ok": ok,
                }
                for k, ts in times.items():
                    moved = per_pair * n * (n - 1) if k == "peer" else cross
                    rates = [moved / t / 1e9 for t in ts]
                    row[k] = (statistics.median(rates), min(rates), max(rates))
                rows.append(row)
                # Released before the next case allocates (the closures above hold them too).
                dst = dst_parts = blocks = cands = x = None
                torch.cuda.empty_cache()

    name = torch.cuda.get_device_name(0)
    print(
        f"\n## stridex reshard · {n}x {name} · torch {torch.__version__}"
        f"{f' · jax {jax.__version__}' if jax else ''} · {args.gib:g} GiB global arrays · "
        f"median (min-max) of {args.repeat}, GB/s across GPUs"
    )
    head = ["dtype", "case", "stridex", "JAX device_put", "peer (contiguous)", "stridex/peer", "stridex/JAX", "ok"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for r in rows:
        s, p = r["stridex"], r["peer"]
        j = r.get("JAX")
        print(
            f"| {r['dtype']} | {r['case']} | {s[0]:.0f} ({s[1]:.0f}-{s[2]:.0f}) | "
            f"{f'{j[0]:.0f} ({j[1]:.0f}-{j[2]:.0f})' if j else '-'} | {p[0]:.0f} ({p[1]:.0f}-{p[2]:.0f}) | "
            f"{100 * s[0] / p[0]:.0f}% | {f'{s[0] / j[0]:.2f}x' if j else '-'} | {'yes' if r['ok'] else 'WRONG'} |"
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": name, "gpus": n, "rows": rows}, f, indent=1)
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
