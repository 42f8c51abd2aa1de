"""A torch trainer process for the GPU refit tests (test_refit_gpu.py), driven through ipc_harness.

Rank `rank` of `ranks` holds row shards of every weight on cuda:`device`, all carved from ONE
torch allocation (several tensors per allocation: shared with one handle), or, with
`flat=True`, as FSDP-style flat shards (one flat buffer, each weight's rows a view of it). Each
version sets every element of weight k to version * 1000 + k (exact in every dtype used here).
"""

from __future__ import annotations

import os
import time

import torch

import stridex.ipc
from stridex import ShardLayout
from stridex.refit import Publisher

SHAPES = {
    "wq": ((512, 256), torch.float32),
    "wo": ((300, 64), torch.bfloat16),
    "emb": ((1000, 48), torch.float16),
    "bias": ((257,), torch.float32),
}


def value(version: int, k: int) -> float:
    return float((version % 50) * 8 + k)  # small integers: exact in float16 and bfloat16


def shards(rank: int, ranks: int, device: int) -> dict[str, tuple]:
    out, sizes = {}, []
    boxes = {}
    for name, (shape, dtype) in SHAPES.items():
        index, _ = ShardLayout.rows(shape, ["cpu"] * ranks).shards[rank]
        boxes[name] = index
        sizes.append((name, [s.stop - s.start for s in index], dtype))
    nbytes = sum(torch.Size(e).numel() * torch.empty((), dtype=d).element_size() + 256 for _, e, d in sizes)
    pool = torch.empty(nbytes, dtype=torch.uint8, device=f"cuda:{device}")  # one allocation for all
    off = 0
    for name, extent, dtype in sizes:
        n = torch.Size(extent).numel() * torch.empty((), dtype=dtype).element_size()
        t = pool[off : off + n].view(dtype).view(extent)
        off += n + 256 - n % 256
        out[name] = (t, [s.start for s in boxes[name]], SHAPES[name][0])
    return out


def fill(ws: dict[str, tuple], version: int) -> None:
    for k, (t, _, _) in enumerate(ws.values()):
        t.fill_(value(version, k))


def serve(requests, replies, rank: int, ranks: int, device: int) -> None:
    from ipc_harness import serve as harness_serve

    torch.cuda.set_device(device)
    pub = Publisher()
    ws = shards(rank, ranks, device)
    stream = torch.cuda.Stream(device)

    def handle(cmd: str, args: tuple):
        if cmd == "address":
            return pub.address
        if cmd == "publish":  # (version, sleep_cycles): the update runs behind a sleeping kernel
            version, cycles = args
            with torch.cuda.stream(stream):
                t0 = time.monotonic()
                pub.begin_update(stream)
                if cycles:
                    torch.cuda._sleep(cycles)
                fill(ws, version)
                pub.publish(ws, version, stream=stream)
                host = time.monotonic() - t0
            return {"host_s": host, "done": stream.query()}
        if cmd == "begin_update":
            t0 = time.monotonic()
            pub.begin_update(stream)
            return time.monotonic() - t0
        if cmd == "sync":
            stream.synchronize()
            return None
        if cmd == "stats":
            return {
                **pub.stats(),
                "pending": stridex.ipc.pending(),
                "fds": len(os.listdir("/proc/self/fd")),
                "allocated": torch.cuda.memory_allocated(device),
            }
        raise ValueError(f"unknown command {cmd!r}")

    harness_serve(requests, replies, handle)


def hold_open(address: str, device: int, held) -> None:
    """A subscriber on cuda:`device` that opens a hold and never closes it (the test kills it)."""
    from stridex.refit import Subscriber

    torch.cuda.set_device(device)
    sub = Subscriber(address)
    with sub.hold() as (version, _):
        held.put(version)
        time.sleep(600)
