"""The request/reply harness of the IPC tests: a spawned worker process that runs commands on the
Views it receives, and the test's side that asks it.

Neither side can hang on the other. Both pickle a message before it leaves (so a View that
cannot be shared raises in the sender, not in a queue's feeder thread, which would only print it),
the worker replies every error -- unpickling what it received included -- with its traceback,
and the asking side polls: a worker that died is a failure naming its exit code within a second.
"""

from __future__ import annotations

import multiprocessing as mp
import pickle
import queue
import time
import traceback
from collections.abc import Callable
from multiprocessing.reduction import ForkingPickler
from typing import Any


class Sealed:
    """A message pickled by its sender: it unpickles in the receiver as the message itself."""

    def __init__(self, message: Any):
        self.data = bytes(ForkingPickler.dumps(message))  # Views become tickets here, synchronously

    def __reduce__(self):
        return pickle.loads, (self.data,)


class WorkerError(AssertionError):
    """The worker raised; the message carries its exception and traceback."""


class Worker:
    """A spawned worker running target(requests, replies, *args); calling it asks a command.
    worker(*cmd) returns the reply, raises WorkerError for an error reply, and AssertionError when
    the worker died or did not answer within `timeout` seconds."""

    def __init__(self, target: Callable, *args: Any, timeout: float = 60.0):
        ctx = mp.get_context("spawn")
        self.requests, self.replies = ctx.Queue(), ctx.Queue()
        self.process = ctx.Process(target=target, args=(self.requests, self.replies, *args), daemon=True)
        self.process.start()
        self.timeout = timeout

    def __call__(self, *cmd: Any, timeout: float | None = None) -> Any:
        self.requests.put(Sealed(cmd))
        limit = self.timeout if timeout is None else timeout
        deadline = time.monotonic() + limit
        while True:
            try:
                reply = self.replies.get(timeout=0.5)
                break
            except queue.Empty:
                if not self.process.is_alive():
                    raise AssertionError(
                        f"the worker process died (exit code {self.process.exitcode}) while running {cmd[0]!r}"
                    ) from None
                if time.monotonic() > deadline:
                    raise AssertionError(f"the worker did not answer {cmd[0]!r} within {limit:g} s") from None
        if isinstance(reply, tuple) and reply and reply[0] == "error":
            raise WorkerError(f"worker raised {reply[1]}: {reply[2]}\n{reply[3]}")
        return reply

    def stop(self) -> None:
        """Asks the worker to return (its exit then waits for importers of what it exported)."""
        self.requests.put(Sealed(("stop",)))


def serve(requests, replies, handle: Callable[[str, tuple], Any]) -> None:
    """The worker's loop: handle(cmd, args) for each request until "stop"; every error (receiving
    and unpickling the request, running it, pickling the reply) goes back as a reply."""
    while True:
        try:
            cmd, *args = requests.get()
        except Exception as e:  # noqa: BLE001 - unpickling what was sent failed: the asker must hear it
            reply: Any = ("error", type(e).__name__, f"while receiving a request: {e}", traceback.format_exc())
        else:
            if cmd == "stop":
                return
            try:
                reply = Sealed(handle(cmd, tuple(args)))
            except Exception as e:  # noqa: BLE001 - the test reads the error
                reply = ("error", type(e).__name__, str(e), traceback.format_exc())
            args = None  # noqa: F841 - what a command received dies with it, before the next one
        replies.put(reply)
        del reply
