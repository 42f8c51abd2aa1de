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
import sys

TIMEOUT = 120  # seconds any step may take before the example gives up
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
    with Publisher() as pub:
        addresses.put((rank, pub.address))
        stream = torch.cuda.current_stream()
        for step in range(1, args.steps + 1):
            with pub.updating(stream):  # the "optimizer step", in place
                for t, _, _ in shards.values():
                    t.fill_(step)
            pub.publish(shards, step, stream=stream)
            if steps.get(timeout=TIMEOUT) is None:  # the inference process pulled this step
                return  # or gave up
        steps.get(timeout=TIMEOUT)  # it closed its subscriber: nothing of ours is mapped there


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--trainers", type=int, default=2)
    p.add_argument("--layout", choices=("rows", "columns", "fsdp"), default="rows")
    p.add_argument("--inference-shards", type=int, default=3)
    p.add_argument("--steps", type=int, default=5)
    args = p.parse_args()
    ctx = mp.get_context("spawn")
    addresses, steps = ctx.Queue(), [ctx.Queue() for _ in range(args.trainers)]
    procs = [
        ctx.Process(target=trainer, args=(r, args, addresses, steps[r]), daemon=True) for r in range(args.trainers)
    ]
    for q in procs:
        q.start()
    sub = None
    try:
        found = dict(addresses.get(timeout=300) for _ in procs)

        import torch

        import stridex
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
        sub = Subscriber([found[r] for r in range(args.trainers)], timeout=TIMEOUT)
        version = None
        for _ in range(args.steps):
            version = sub.pull(sub.wait(after=version), into=dest)
            torch.cuda.synchronize()
            assert all(bool((t == version).all()) for sv in dest.values() for _, t in sv.to_torch())
            print(f"step {version}: every element of {len(dest)} weights checked", flush=True)
            for q in steps:
                q.put(version)
        sub.close()
        open_handles = stridex._stridex._ipc_open_handles()
        assert open_handles == 0, f"{open_handles} CUDA IPC handles still open after close()"
        for q in steps:
            q.put("closed")  # the trainers may exit: nothing of theirs is mapped here any more
        for q in procs:
            q.join(TIMEOUT)
        codes = [q.exitcode for q in procs]
        if codes != [0] * len(procs):
            raise RuntimeError(f"trainers exited with {codes}")
        return 0
    except Exception as e:  # noqa: BLE001 - the example's one report
        print(f"torch_tp: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
        if sub is not None:
            sub.close()
        for q in steps:
            q.put(None)
        for q in procs:
            q.join(10)
            if q.is_alive():
                q.kill()
        return 1
    finally:
        for q in [addresses, *steps]:
            q.close()
            q.join_thread()


if __name__ == "__main__":
    sys.exit(main())
