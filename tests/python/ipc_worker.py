"""A helper process for the IPC tests: runs commands (ipc_harness) on Views it receives."""

import gc

import ipc_harness


def serve(requests, replies):
    import numpy as np

    import stridex
    import stridex.ipc

    held = []

    def handle(cmd, args):
        if cmd == "describe":
            (v,) = args
            return v.shape, v.strides, v.dtype.name, v.readonly, str(v.device)
        if cmd == "read":
            (v,) = args
            return np.asarray(v).tolist()
        if cmd == "write":
            v, index, value = args
            np.asarray(v)[index] = value
            return "ok"
        if cmd == "hold":
            held.append(args[0])
            return "ok"
        if cmd == "read_held":
            return np.asarray(held[args[0]]).tolist()
        if cmd == "write_held":
            index, value = args
            np.asarray(held[0])[index] = value
            return "ok"
        if cmd == "drop":
            held.clear()
            gc.collect()
            return "ok"
        if cmd == "make_shared":
            v = stridex.ipc.shared_empty((4,), "int32")
            np.asarray(v)[:] = [10, 20, 30, 40]
            held.append(v)
            return v
        if cmd == "pending":
            return stridex.ipc.pending()
        if cmd == "die":
            import os

            os._exit(args[0])
        raise ValueError(f"unknown command {cmd!r}")

    ipc_harness.serve(requests, replies, handle)


class _SlowToPickle:
    """Pickles as its View, after a delay: the queue's feeder thread is still pickling it while
    the producer's exit has begun (the race test_a_producer_that_exits_at_once... pins down)."""

    def __init__(self, view, delay):
        self.view, self.delay = view, delay

    def __reduce__(self):
        import time

        import stridex.ipc

        time.sleep(self.delay)
        return stridex.ipc._reduce(self.view, in_flight=True)


def produce_and_exit(replies, pickling_delay=0.0, send_delay=0.0):
    """Puts a View of fresh shared memory on the queue and exits at once. The delays widen the two
    windows where exit could outrun an export: the queue's feeder thread pickling the View after
    exit began, and the broker sending the fds after the importer asked for them."""
    import socket

    import numpy as np

    import stridex.ipc

    if send_delay:
        send_fds = socket.send_fds

        def slow_send_fds(*args, **kwargs):
            import time

            time.sleep(send_delay)
            return send_fds(*args, **kwargs)

        socket.send_fds = slow_send_fds
    v = stridex.ipc.shared_empty((3,), "int16")
    np.asarray(v)[:] = [5, 6, 7]
    replies.put(_SlowToPickle(v, pickling_delay) if pickling_delay else v)
    del v  # only the ticket keeps the memory now
