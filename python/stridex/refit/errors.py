"""The errors of stridex.refit: one base, and the two a caller handles differently."""

from __future__ import annotations


class RefitError(RuntimeError):
    """A refit failed: a malformed message, a pull the publisher gave up on, weights that do not
    match what a pull asked for."""


class PublisherGone(RefitError):
    """A publisher exited, crashed or stopped answering (within the subscriber's timeout): raised by
    every later call of the subscriber that needs it, never a hang."""


class VersionGone(RefitError):
    """The version asked for is not the one a publisher holds now (it moved on, or has not published
    it yet): nothing was copied. ``current`` holds the publishers' versions."""

    def __init__(self, message: str, current: dict[str, int | None]):
        super().__init__(message)
        self.current = current
