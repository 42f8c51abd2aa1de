"""A JAX trainer process feeds a torch inference process.

    python examples/refit/jax_to_torch.py [--steps 3]

The trainer's weights are jax.Arrays on its GPU (cuda:0); stridex.refit shares XLA's allocations
where the driver can (else packs them into one reused bucket) and the torch process pulls them
into torch tensors on cuda:(1 % G). Ordering on the GPU uses torch's interprocess events, so the
trainer process needs torch importable too (docs/refit.md, "System requirements").
"""

from __future__ import annotations

import argparse
import multiprocessing as mp

SHAPES = {"w1": (512, 256), "w2": (256, 1024)}


def trainer(steps: int, addresses, pulled) -> None:
    import jax
    import jax.numpy as jnp

    from stridex.refit import Publisher

    pub = Publisher()
    addresses.put(pub.address)
    for step in range(1, steps + 1):
        # JAX arrays are immutable: each step makes new ones, so the regions may be shared anew
        # (stats()["epochs"]); a bucket keeps the shared memory fixed whatever XLA does.
        weights = {n: jnp.full(s, step, jnp.float32) for n, s in SHAPES.items()}
        jax.block_until_ready(weights)
        pub.publish(weights, step)
        pulled.get()


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=3)
    args = p.parse_args()
    ctx = mp.get_context("spawn")
    addresses, pulled = ctx.Queue(), ctx.Queue()
    proc = ctx.Process(target=trainer, args=(args.steps, addresses, pulled))
    proc.start()
    address = addresses.get(timeout=300)

    import torch

    from stridex.refit import Subscriber

    device = 1 % torch.cuda.device_count()
    dest = {n: torch.empty(s, device=device) for n, s in SHAPES.items()}
    sub = Subscriber(address)
    version = None
    for _ in range(args.steps):
        version = sub.pull(sub.wait(after=version), into=dest)
        torch.cuda.synchronize()
        assert all(bool((t == version).all()) for t in dest.values())
        print(f"step {version}: JAX -> torch on cuda:{device}, every element checked")
        pulled.put(version)
    sub.close()
    proc.join()


if __name__ == "__main__":
    main()
