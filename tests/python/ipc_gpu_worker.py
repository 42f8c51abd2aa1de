"""A helper process for the GPU IPC tests: torch on the far side of a pickled CUDA View."""

import gc

import ipc_harness


def _handle(torch, stridex, held, cmd, args):
    """One command. A function of its own, so the Views it received die when it returns."""
    if cmd == "sum":  # read at once, on torch's default (legacy) stream
        (v,) = args
        pending = v.pending_event, v._pending_event_waited()  # as unpickled: nothing waited yet
        t = torch.from_dlpack(v)  # the legacy stream waits for the producer's event here
        return float(t.double().sum()), str(t.device), (v.stream, *pending, v._pending_event_waited(1))
    if cmd == "fill":
        v, value = args
        torch.from_dlpack(v).fill_(value)
        torch.cuda.synchronize()
        return "ok"
    if cmd == "hold":
        held.append(args[0])
        return "ok"
    if cmd == "sum_held":
        return float(torch.from_dlpack(held[args[0]]).double().sum())
    if cmd == "drop":
        held.clear()
        gc.collect()
        return stridex._stridex._ipc_open_handles()
    if cmd == "pools":  # exporters' pools imported here and still in use
        return stridex._stridex._ipc_open_pools()
    if cmd == "make":  # kind: torch, vmm or pool (stridex's own); filled with `value`
        kind, n, value = args
        if kind == "pool":
            v = stridex.empty(n, "float32", device="cuda")
            held.append(v)
            torch.from_dlpack(v).fill_(value)
        elif kind == "torch":
            t = torch.full((n,), value, device="cuda", dtype=torch.float32)
            held.append(t)
            v = stridex.view(t)
        else:
            buf = stridex.VirtualBuffer(n * 4, shareable=True)
            held.append(buf)
            v = buf.view("float32", (n,))
            torch.from_dlpack(v).fill_(value)
        torch.cuda.synchronize()
        return v
    raise ValueError(f"unknown command {cmd!r}")


def serve(requests, replies):
    import torch

    import stridex
    import stridex.ipc

    held = []
    ipc_harness.serve(requests, replies, lambda cmd, args: _handle(torch, stridex, held, cmd, args))
