"""``stridex.shortcuts_disabled``: framework shortcuts off for a ``with`` block.

The registry and the switch are the extension's (src/extension/stream/shortcuts.cpp, and
src/extension/import/bind_shortcuts.cpp: ``stridex.shortcuts``, ``stridex.set_shortcuts``,
``STRIDEX_DISABLE_SHORTCUTS``); this is the context manager over them."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from ._stridex import set_shortcuts


@contextlib.contextmanager
def shortcuts_disabled(*names: str) -> Iterator[None]:
    """Turns the named framework shortcuts off (every one when none is named) for the ``with``
    block, and restores each as it was on leaving it, exception or not::

        with stridex.shortcuts_disabled("jaxlib_export"):
            v = stridex.view(jax_array)   # through ArrayImpl.__dlpack__

    An unknown name is a ValueError before anything changes. See stridex.set_shortcuts."""
    previous = set_shortcuts(dict.fromkeys(names, False) if names else False)
    try:
        yield
    finally:
        set_shortcuts(previous)
