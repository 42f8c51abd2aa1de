"""torch trainer processes feed an inference process with another tensor-parallel layout.

    python examples/refit/torch_tp.py [--trainers 2] [--layout rows|columns|fsdp] [--inference-shards 3] [--steps 5]

Trainer rank r holds its shard of every weight on cuda:r % G: TP row shards, TP column shards, or
FSDP-style flat shards (each weight flattened, the flat vector cut into equal pieces; shared as
(array, offsets, global_shape) of the flat weight). The inference process holds each weight cut
along its last dimension over --inference-shards shards on cuda:(k + 1) % G (all on cuda:0 with one
GPU), pulls each step's version, and checks it.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp

SHAPES = {"attn.wq": (1024, 512), "attn.wo": (512, 1024), "mlp.up": (2048, 512), "mlp.down": (512, 2048)}


def trainer(rank: int, args: argparse.Namespace, addresses, steps) -> None:
    import torch

    from stridex import ShardLayout
    from stridex.refit import Publisher

    device = rank % torch.cuda.device_count()
    torch.cuda.set_device(device)
    shards = {}
    for name, shape in SHAPES.items():
        if args.layout == "fsdp":
            n = shape[0] * shape[1]
            (index, _) = ShardLayout.rows((n,), ["cpu"] * args.trainers).shards[rank]
            t = torch.zeros(index[0].stop - index[0].start, device=device)
            shards[name] = (t, (index[0].start,), (n,))
        else:
            cut = ShardLayout.rows if args.layout == "rows" else ShardLayout.columns
            (index, _) = cut(shape, ["cpu"] * args.trainers).shards[rank]
            t = torch.zeros([s.stop - s.start for s in index], device=device)
            shards[name] = (t, tuple(s.start for s in index), shape)
    pub = Publisher()
    addresses.put((rank, pub.address))
    stream = torch.cuda.current_stream()
    for step in range(1, args.steps + 1):
        with pub.updating(stream):  # the "optimizer step", in place
            for t, _, _ in shards.values():
                t.fill_(step)
        pub.publish(shards, step, stream=stream)
        steps.get()  # the inference process pulled this step


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--trainers", type=int, default=2)
    p.add_argument("--layout", choices=("rows", "columns", "fsdp"), default="rows")
    p.add_argument("--inference-shards", type=int, default=3)
    p.add_argument("--steps", type=int, default=5)
    args = p.parse_args()
    ctx = mp.get_context("spawn")
    addresses, steps = ctx.Queue(), [ctx.Queue() for _ in range(args.trainers)]
    procs = [ctx.Process(target=trainer, args=(r, args, addresses, steps[r])) for r in range(args.trainers)]
    for q in procs:
        q.start()
    found = dict(addresses.get(timeout=300) for _ in procs)

    import torch

    from stridex import ShardedView, ShardLayout
    from stridex.refit import Subscriber

    gpus = torch.cuda.device_count()
    devices = [f"cuda:{(k + 1) % gpus}" for k in range(args.inference_shards)]
    dest = {}
    for name, shape in SHAPES.items():
        if args.layout == "fsdp":
            shape = (shape[0] * shape[1],)  # the flat weight; a real engine views it as its shape
        layout = ShardLayout.grid(shape, [1] * (len(shape) - 1) + [len(devices)], devices)
        arrays = [torch.empty([s.stop - s.start for s in i], device=str(d)) for i, d in layout.shards]
        dest[name] = ShardedView.from_arrays(arrays, [[s.start for s in i] for i, _ in layout.shards], shape)
    sub = Subscriber([found[r] for r in range(args.trainers)])
    version = None
    for _ in range(args.steps):
        version = sub.pull(sub.wait(after=version), into=dest)
        torch.cuda.synchronize()
        assert all(bool((t == version).all()) for sv in dest.values() for _, t in sv.to_torch())
        print(f"step {version}: every element of {len(dest)} weights checked")
        for q in steps:
            q.put(version)
    sub.close()
    for q in procs:
        q.join()


if __name__ == "__main__":
    main()
