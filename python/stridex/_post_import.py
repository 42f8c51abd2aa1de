"""Run a callback once a module has been imported, without importing it ourselves.

stridex registers its View reducer with multiprocessing and its serializers with Dask
distributed, yet ``import stridex`` must import neither: a callback runs at once when the module
is already loaded, else right after the module's own code ran, through a finder on sys.meta_path
that wraps the real loader. Cheap: the finder answers only for the names it waits for.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType

_waiting: dict[str, list[Callable[[ModuleType], None]]] = {}


class _Finder:
    @staticmethod
    def find_spec(
        fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if fullname not in _waiting:
            return None
        for finder in sys.meta_path:
            if isinstance(finder, _Finder) or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        exec_module = loader.exec_module

        def exec_then_notify(module: ModuleType) -> None:
            exec_module(module)
            for callback in _waiting.pop(fullname, []):
                callback(module)

        loader.exec_module = exec_then_notify  # type: ignore[method-assign]  # wraps this one loader object
        return spec


def when_imported(name: str, callback: Callable[[ModuleType], None]) -> None:
    module = sys.modules.get(name)
    if module is not None:
        callback(module)
        return
    _waiting.setdefault(name, []).append(callback)
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())


def _register_multiprocessing(reduction: ModuleType) -> None:
    from . import _stridex

    # stridex.ipc (sockets, threads) is imported only when a View is pickled: the reducer is the
    # View's own (native), which imports it then.
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


def _register_dask(_protocol: ModuleType) -> None:
    from .ipc.dask import register

    register()


def install() -> None:
    when_imported("multiprocessing.reduction", _register_multiprocessing)
    when_imported("distributed.protocol", _register_dask)
