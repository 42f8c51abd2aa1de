"""A helper process for the GPU IPC tests: torch on the far side of a pickled CUDA View."""

import gc


def serve(requests, replies):
    import torch

    import stridex
    import stridex.ipc

    held = []
    while True:
        cmd, *args = requests.get()
        try:
            if cmd == "exit":
                return  # exit then waits for importers of what this process exported
            if cmd == "sum":  # read at once, on torch's default (legacy) stream
                (v,) = args
                t = torch.from_dlpack(v)
                replies.put((float(t.double().sum()), str(t.device), v.stream))
            elif cmd == "fill":
                v, value = args
                torch.from_dlpack(v).fill_(value)
                torch.cuda.synchronize()
                replies.put("ok")
            elif cmd == "hold":
                held.append(args[0])
                replies.put("ok")
            elif cmd == "sum_held":
                replies.put(float(torch.from_dlpack(held[args[0]]).double().sum()))
            elif cmd == "drop":
                held.clear()
                gc.collect()
                replies.put(stridex._stridex._ipc_open_handles())
            elif cmd == "make":  # kind: torch or vmm; filled with `value`
                kind, n, value = args
                if kind == "torch":
                    t = torch.full((n,), value, device="cuda", dtype=torch.float32)
                    v = stridex.view(t)
                    held.append(t)
                else:
                    buf = stridex.VirtualBuffer(n * 4, shareable=True)
                    v = buf.view("float32", (n,))
                    torch.from_dlpack(v).fill_(value)
                    held.append(buf)
                torch.cuda.synchronize()
                replies.put(v)
                del v
        except Exception as e:  # noqa: BLE001 - the test reads the error
            replies.put(("error", type(e).__name__, str(e)))
