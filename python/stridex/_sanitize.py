"""The hand-over race sanitizer's switch (docs/sanitizer.md); the log and the checks are native
(src/extension/sanitizer/sanitizer.cpp).

``with stridex.sanitize(): ...`` turns it on for the block (nesting counts, any thread); so does
``STRIDEX_SANITIZE=streams`` for the whole process, read when stridex is imported.
``raise_=True`` (or ``STRIDEX_SANITIZE=streams,raise``) raises :class:`StreamRaceError` at the
hand-over instead of warning with :class:`StreamRaceWarning`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from . import _stridex
from ._stridex import StreamRaceError, StreamRaceWarning

__all__ = ["StreamRaceError", "StreamRaceWarning", "sanitize", "sanitizer_counts", "sanitizer_reports"]


@contextlib.contextmanager
def sanitize(*, raise_: bool = False) -> Iterator[None]:
    """Checks every hand-over stridex mediates in the block for stream races (docs/sanitizer.md).

    Reports are :class:`StreamRaceWarning` warnings, or :class:`StreamRaceError` raised at the
    hand-over with ``raise_=True`` (a View released at the wrong time cannot raise: that report
    stays a warning). Contexts nest and may be entered from several threads: the sanitizer is on
    while any is open, in raise mode while any raising one is.
    """
    _stridex._sanitizer_enter(bool(raise_))
    try:
        yield
    finally:
        _stridex._sanitizer_exit(bool(raise_))


def sanitizer_counts() -> dict[str, int]:
    """Reports made so far in this process, per class: ``no_sync``, ``reuse_after_release``,
    ``release_pending``, ``ipc_unwaited``."""
    return dict(_stridex._sanitizer_counts())


def sanitizer_reports() -> list[tuple[str, str]]:
    """The first reports made in this process (at most 256), as (class, message)."""
    return list(_stridex._sanitizer_reports())
