"""Run a callback once a module has been imported, without importing it ourselves.

stridex.ipc registers Views with multiprocessing and Dask distributed (ipc/pickling.py), yet
``import stridex`` must import neither: a callback runs at once when the module is already loaded,
else right after the module's own code ran, through a finder on sys.meta_path that wraps the real
loader. Cheap: the finder answers only for the names it waits for. A mechanism alone: it imports
nothing of stridex.
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
