"""A helper process for test_sanitizer_gpu.py: a pickled CUDA View used with and without ordering,
with the sanitizer on from the start (STRIDEX_SANITIZE, read when stridex is imported)."""

import os
import warnings

import ipc_harness


def _handle(torch, stridex, cmd, args):
    """One command: the StreamRaceWarning messages its hand-over gave (with the View's stream)."""
    (v,) = args
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        if cmd == "no_sync":  # read at once on a stream of its own, with no ordering: the race
            stridex.view(v, stream=stridex.NO_SYNC)
        elif cmd == "ordered":  # the corrected program: the consumer's stream is ordered
            stridex.view(v, stream=torch.cuda.Stream())
        else:
            raise ValueError(f"unknown command {cmd!r}")
    torch.cuda.synchronize()
    return [str(w.message) for w in record if issubclass(w.category, stridex.StreamRaceWarning)]


def serve(requests, replies):
    os.environ["STRIDEX_SANITIZE"] = "streams"
    import torch

    import stridex
    import stridex.ipc  # noqa: F401 (Views unpickle through it)

    ipc_harness.serve(requests, replies, lambda cmd, args: _handle(torch, stridex, cmd, args))
