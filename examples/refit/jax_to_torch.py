"""A JAX trainer process feeds a torch inference process.

    python examples/refit/jax_to_torch.py [--steps 3]

The trainer's weights are jax.Arrays on its GPU (cuda:0). XLA's memory usually cannot be shared by
handle (the publisher finds that out at publish, once per allocation): it is packed into one
bucket per GPU, which the torch process pulls from into torch tensors on cuda:(1 % G). Ordering
on the GPU uses torch's interprocess events, so the trainer process needs torch importable too
(docs/refit.md, "System requirements"). Any failure ends both processes with an error, never a hang.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import queue
import sys

SHAPES = {"w1": (512, 256), "w2": (256, 1024)}
TIMEOUT = 120  # seconds any step may take before the example gives up


def trainer(steps: int, addresses, pulled) -> None:
    import jax
    import jax.numpy as jnp

    from stridex.refit import Publisher

    with Publisher() as pub:
        addresses.put(pub.address)
        for step in range(1, steps + 1):
            # JAX arrays are immutable: each step makes new ones, and a publish of weights that
            # moved shares anew (a new epoch, stats()["epochs"]).
            weights = {n: jnp.full(s, step, jnp.float32) for n, s in SHAPES.items()}
            jax.block_until_ready(weights)
            pub.publish(weights, step)
            if pulled.get(timeout=TIMEOUT) is None:
                return  # the inference process gave up
        pulled.get(timeout=TIMEOUT)  # it closed its subscriber: nothing of ours is mapped there


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=3)
    args = p.parse_args()
    ctx = mp.get_context("spawn")
    addresses, pulled = ctx.Queue(), ctx.Queue()
    proc = ctx.Process(target=trainer, args=(args.steps, addresses, pulled), daemon=True)
    proc.start()
    sub = None
    try:
        try:
            address = addresses.get(timeout=300)
        except queue.Empty:
            raise RuntimeError(f"the trainer did not start (exit code {proc.exitcode})") from None

        import torch

        import stridex
        from stridex.refit import Subscriber

        device = 1 % torch.cuda.device_count()
        dest = {n: torch.empty(s, device=device) for n, s in SHAPES.items()}
        sub = Subscriber(address, timeout=TIMEOUT)
        version = None
        for _ in range(args.steps):
            version = sub.pull(sub.wait(after=version), into=dest)
            torch.cuda.synchronize()
            assert all(bool((t == version).all()) for t in dest.values())
            print(f"step {version}: JAX -> torch on cuda:{device}, every element checked", flush=True)
            pulled.put(version)
        sub.close()
        open_handles = stridex._stridex._ipc_open_handles()
        assert open_handles == 0, f"{open_handles} CUDA IPC handles still open after close()"
        pulled.put("closed")
        proc.join(TIMEOUT)
        if proc.exitcode != 0:
            raise RuntimeError(f"the trainer exited with {proc.exitcode}")
        return 0
    except Exception as e:  # noqa: BLE001 - the example's one report
        print(f"jax_to_torch: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
        if sub is not None:
            sub.close()
        pulled.put(None)
        proc.join(10)
        if proc.is_alive():
            proc.kill()
        return 1
    finally:
        for q in (addresses, pulled):
            q.close()
            q.join_thread()


if __name__ == "__main__":
    sys.exit(main())
