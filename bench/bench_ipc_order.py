"""Stream order across processes: how long a consumer process's host waits, and whether it reads
the right data, when the producer's work is still running (docs/distributed.md, "Ordering").

    python bench/bench_ipc_order.py [--seconds 3] [--only stridex|torch]

A producer runs a `seconds`-long kernel on its stream S, then writes a tensor on S (7.0 everywhere)
and sends it to a freshly spawned child at once: as `stridex.view(x, stream=S)` (a stridex.View:
CUDA IPC handle plus the interprocess event recorded on S) or as the tensor itself through
torch.multiprocessing. The child reads it on a stream C of its own (`torch.from_dlpack` with C
current, then a sum on C). Reported, from the send (one clock: same machine):

* enqueue -- when the child's read was enqueued: the host waited this long before it could go on;
* done -- when the read finished (at least the producer's kernel, when ordered);
* legacy -- (warm children only) how long unrelated work on the child's legacy default stream took
  after the View arrived and before it was taken: a wait parked on that stream shows here;
* data -- correct (the sum is 7 * N) or stale (the read ran before the producer's write).

Each row is one fresh child, under CUDA's default lazy module loading or CUDA_MODULE_LOADING=EAGER;
"warm" children ran the same read once before receiving, so its kernel is loaded.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import time

N = 1 << 20
VALUE = 7.0


def _child(conn, mode: str, warm: bool) -> None:
    import torch

    if mode == "stridex":
        import stridex
        import stridex.ipc  # noqa: F401  (the unpickler's home)
    else:
        import torch.multiprocessing  # noqa: F401  (torch's CUDA reductions)
    dev = torch.device("cuda", 0)
    torch.zeros(1, device=dev)  # the context, before anything is timed
    c = torch.cuda.Stream(dev)
    y = torch.ones(16, device=dev)
    if warm:
        with torch.cuda.stream(c):
            torch.ones(N, device=dev).sum()
        (y + 1).sum()
        torch.cuda.synchronize()
    conn.send("ready")
    obj = conn.recv()  # unpickled here: the memory opened, nothing waited for yet
    legacy = None
    if warm:
        t0 = time.time()
        (y + 1).sum()  # unrelated work on the legacy default stream
        torch.cuda.default_stream(dev).synchronize()
        legacy = time.time() - t0
    with torch.cuda.stream(c):
        t = torch.from_dlpack(obj) if mode == "stridex" else obj
        s = t.sum()
    enqueued = time.time()
    c.synchronize()
    done = time.time()
    conn.send({"enqueued": enqueued, "done": done, "legacy": legacy, "sum": float(s.item())})
    conn.recv()  # the producer's go: its memory outlives our last use


def cycles_per_second(torch) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda._sleep(1_000_000)  # loads the kernel
    start.record()
    torch.cuda._sleep(200_000_000)
    end.record()
    end.synchronize()
    return 200_000_000 / (start.elapsed_time(end) / 1000)


def measure(mode: str, loading: str, warm: bool, seconds: float = 3.0, timeout: float = 90.0) -> dict:
    """One hand-over to a fresh child; `loading` is "lazy" (CUDA's default) or "eager"."""
    import torch
    import torch.multiprocessing  # noqa: F401

    import stridex
    import stridex.ipc  # noqa: F401

    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    saved = os.environ.get("CUDA_MODULE_LOADING")
    os.environ["CUDA_MODULE_LOADING"] = "EAGER" if loading == "eager" else "LAZY"
    try:
        p = ctx.Process(target=_child, args=(child, mode, warm), daemon=True)
        p.start()
    finally:
        if saved is None:
            del os.environ["CUDA_MODULE_LOADING"]
        else:
            os.environ["CUDA_MODULE_LOADING"] = saved
    try:
        if not parent.poll(timeout):
            raise TimeoutError("the child did not start")
        assert parent.recv() == "ready"
        x = torch.zeros(N, device="cuda")
        cycles = int(seconds * cycles_per_second(torch))
        torch.cuda.synchronize()
        s = torch.cuda.Stream()
        with torch.cuda.stream(s):
            torch.cuda._sleep(cycles)
            x.fill_(VALUE)
        obj = stridex.view(x, stream=s) if mode == "stridex" else x
        sent = time.time()
        parent.send(obj)
        if not parent.poll(timeout):
            raise TimeoutError("the child did not answer")
        r = parent.recv()
        parent.send("go")
        p.join(timeout)
        torch.cuda.synchronize()
    finally:
        if p.is_alive():
            p.kill()
    return {
        "mode": mode,
        "loading": loading,
        "warm": warm,
        "seconds": seconds,
        "enqueue_s": r["enqueued"] - sent,
        "done_s": r["done"] - sent,
        "legacy_s": r["legacy"],
        "correct": r["sum"] == VALUE * N,
    }


ROWS = [
    ("stridex", "lazy", False),
    ("stridex", "lazy", True),
    ("stridex", "eager", False),
    ("torch", "lazy", False),
    ("torch", "eager", False),
]


def row_text(r: dict) -> str:
    legacy = "-" if r["legacy_s"] is None else f"{r['legacy_s']:.3f} s"
    shared = "stridex.View" if r["mode"] == "stridex" else "torch.multiprocessing"
    return (
        f"| {shared} | {r['loading']}{' (warm)' if r['warm'] else ''} | {r['enqueue_s']:.3f} s | "
        f"{r['done_s']:.3f} s | {legacy} | {'correct' if r['correct'] else 'stale'} |"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--only", choices=["stridex", "torch"])
    a = ap.parse_args()
    print(f"producer kernel {a.seconds} s; times from the send")
    print("| shared as | child's module loading | read enqueued | read done | legacy-stream work | data |")
    print("|---|---|---|---|---|---|")
    for mode, loading, warm in ROWS:
        if a.only and mode != a.only:
            continue
        print(row_text(measure(mode, loading, warm, a.seconds)), flush=True)


if __name__ == "__main__":
    main()
