"""A trainer process for the CPU refit tests (test_refit.py), driven through ipc_harness: it holds
host weights, row-sharded over `ranks` trainer ranks of which it is `rank`, and publishes each
version with every element equal to the version.

mode "private": NumPy arrays (private memory: packed into the publisher's shared bucket);
mode "shared": arrays in stridex.ipc.shared_empty (shared where they live, updated in place after
begin_update).
"""

from __future__ import annotations

import os
import time

import numpy as np

import stridex
import stridex.ipc
from stridex import ShardLayout
from stridex.refit import Publisher

# name -> (global shape, dtype): mixed shapes and dtypes, rows cut over the ranks
SHAPES = {
    "embed": ((64, 24), "float32"),
    "proj": ((33, 16), "float64"),
    "bias": ((40,), "int32"),
    "norm": ((7, 3, 5), "float16"),
}


def weights(mode: str, rank: int, ranks: int) -> dict[str, tuple]:
    out = {}
    for name, (shape, dtype) in SHAPES.items():
        layout = ShardLayout.rows(shape, ["cpu"] * ranks)
        index, _ = layout.shards[rank]
        extent = [s.stop - s.start for s in index]
        if mode == "shared":
            array = np.asarray(stridex.ipc.shared_empty(extent, dtype))
        else:
            array = np.empty(extent, dtype)
        array[...] = 0
        out[name] = (array, [s.start for s in index], shape)  # this rank's shard of the global array
    return out


def fill(ws: dict[str, tuple], value: int) -> None:
    for array, _, _ in ws.values():
        array[...] = value


def serve(requests, replies, mode: str, rank: int, ranks: int) -> None:
    from ipc_harness import serve as harness_serve

    pub = Publisher()
    ws = weights(mode, rank, ranks)

    def step(v: int) -> None:
        if mode == "shared":
            with pub.updating():  # the in-place update waits for open pulls of the last version
                fill(ws, v)
        else:
            fill(ws, v)  # private memory: publish packs it after closing the last version
        pub.publish(ws, v)

    def handle(cmd: str, args: tuple):
        if cmd == "address":
            return pub.address
        if cmd == "publish":
            step(args[0])
            return pub.stats()
        if cmd == "begin_update":
            t0 = time.monotonic()
            pub.begin_update()
            return time.monotonic() - t0
        if cmd == "stats":
            return {**pub.stats(), "pending": stridex.ipc.pending(), "fds": len(os.listdir("/proc/self/fd"))}
        raise ValueError(f"unknown command {cmd!r}")

    harness_serve(requests, replies, handle)


def hold_open(address: str, held) -> None:
    """A subscriber that opens a pull (a zero-copy hold) and never finishes it: the test kills it."""
    from stridex.refit import Subscriber

    sub = Subscriber(address)
    with sub.hold() as (version, _):
        held.put(version)
        time.sleep(600)
