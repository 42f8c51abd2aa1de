"""A helper process for the IPC tests: runs commands from a queue on Views it receives."""

import gc


def serve(requests, replies):
    import numpy as np

    import stridex
    import stridex.ipc

    held = []
    while True:
        cmd, *args = requests.get()
        try:
            if cmd == "stop":
                return
            if cmd == "describe":
                (v,) = args
                replies.put((v.shape, v.strides, v.dtype.name, v.readonly, str(v.device)))
            elif cmd == "read":
                (v,) = args
                replies.put(np.asarray(v).tolist())
            elif cmd == "write":
                v, index, value = args
                np.asarray(v)[index] = value
                replies.put("ok")
            elif cmd == "hold":
                held.append(args[0])
                replies.put("ok")
            elif cmd == "read_held":
                replies.put(np.asarray(held[args[0]]).tolist())
            elif cmd == "write_held":
                index, value = args
                np.asarray(held[0])[index] = value
                replies.put("ok")
            elif cmd == "drop":
                held.clear()
                gc.collect()
                replies.put("ok")
            elif cmd == "make_shared":
                v = stridex.ipc.shared_empty((4,), "int32")
                np.asarray(v)[:] = [10, 20, 30, 40]
                held.append(v)
                replies.put(v)
            elif cmd == "pending":
                replies.put(stridex.ipc.pending())
        except Exception as e:  # noqa: BLE001 - the test reads the error
            replies.put(("error", type(e).__name__, str(e)))
        args = v = None  # noqa: F841 - what a command received dies with it


def produce_and_exit(replies):
    """Puts a View of fresh shared memory on the queue and exits at once."""
    import numpy as np

    import stridex.ipc

    v = stridex.ipc.shared_empty((3,), "int16")
    np.asarray(v)[:] = [5, 6, 7]
    replies.put(v)
    del v  # only the ticket keeps the memory now
