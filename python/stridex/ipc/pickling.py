"""How pickles of other libraries learn about Views: multiprocessing's ForkingPickler and Dask
distributed's serializers.

Plain ``pickle`` needs nothing: a View's ``__reduce__`` (native) hands it to stridex.ipc. The
registrations here run once multiprocessing.reduction (or distributed.protocol) is imported, or at
once if it already was: ``import stridex`` asks for that (stridex._post_import) and imports neither.
This module imports nothing of stridex.ipc's machinery (sockets, threads): the reducer registered
is the View's own, which imports it when a View is first pickled.
"""

from __future__ import annotations

import sys
from types import ModuleType

from .. import _stridex


def register_multiprocessing(reduction: ModuleType) -> None:
    """Registers the View reducer with `reduction` (multiprocessing.reduction)'s ForkingPickler,
    and the exit step that waits for importers of what this process exported."""
    reduction.ForkingPickler.register(_stridex.View, _stridex.View._reduce_in_flight)
    _register_exit_wait()
    import multiprocessing.util

    # A forked child starts with multiprocessing's finalizers cleared (Process._bootstrap): again.
    multiprocessing.util.register_after_fork(_register_exit_wait, lambda _: _register_exit_wait())


def _register_exit_wait() -> None:
    """Registers, now, the exit step that waits for importers of what this process exported.

    Now, not when the first View is exported: a multiprocessing queue pickles in its feeder
    thread, which exit joins (priority -5) after it took its list of finalizers, so a View put
    just before exit could be exported -- and a finalizer registered -- too late to be waited for.
    Priority -10 runs after those joins; multiprocessing's children leave through os._exit,
    past atexit, and run these finalizers instead."""
    import multiprocessing.util

    multiprocessing.util.Finalize(None, _exit_wait, exitpriority=-10)


def _exit_wait() -> None:
    broker = sys.modules.get("stridex.ipc.broker")
    if broker is not None:  # else nothing was ever exported
        broker.wait_at_exit()


def register_dask(_protocol: ModuleType) -> None:
    """Registers the View serializers with Dask distributed (dask.py)."""
    from .dask import register

    register()


# What this module registers, by the module each registration waits for.
_HOOKS = {"multiprocessing.reduction": register_multiprocessing, "distributed.protocol": register_dask}


def on_import(module: ModuleType) -> None:
    """Registers Views with `module`, now imported: one of the modules stridex waits for."""
    _HOOKS[module.__name__](module)
