"""Run a callback once a module has been imported, without importing it ourselves.

stridex registers its View reducer with multiprocessing and its serializers with Dask
distributed, yet ``import stridex`` must import neither: a callback runs at once when the module
is already loaded, else right after the module's own code ran, through a finder on sys.meta_path
that wraps the real loader. Cheap: the finder answers only for the names it waits for.
"""

from __future__ import annotations

import sys

_waiting: dict[str, list] = {}


class _Finder:
    @staticmethod
    def find_spec(fullname, path=None, target=None):
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

        def exec_then_notify(module):
            exec_module(module)
            for callback in _waiting.pop(fullname, []):
                callback(module)

        loader.exec_module = exec_then_notify
        return spec


def when_imported(name: str, callback) -> None:
    module = sys.modules.get(name)
    if module is not None:
        callback(module)
        return
    _waiting.setdefault(name, []).append(callback)
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())


def _register_multiprocessing(reduction) -> None:
    from . import _stridex

    def reduce_view(view):  # stridex.ipc (sockets, threads) is imported only when a View is pickled
        from .ipc import _reduce

        return _reduce(view, in_flight=True)

    reduction.ForkingPickler.register(_stridex.View, reduce_view)


def _register_dask(_protocol) -> None:
    from .ipc.dask import register

    register()


def install() -> None:
    when_imported("multiprocessing.reduction", _register_multiprocessing)
    when_imported("distributed.protocol", _register_dask)
