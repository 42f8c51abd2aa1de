"""Refit: a trainer's sharded weights to inference processes of another sharding, versioned and
atomic, zero-copy where memory can be shared (docs/refit.md).

In each trainer process::

    pub = stridex.refit.Publisher()          # pub.address: what subscribers connect to
    pub.publish(weights, version)            # first call shares; stream-ordered, no host wait
    with pub.updating(stream):               # before the weights change in place
        optimizer.step()
    pub.publish(weights, version + 1)

In each inference process::

    sub = stridex.refit.Subscriber(addresses)
    sub.pull(sub.wait(), into=destinations)  # every piece its sharding needs, one stream
"""

from __future__ import annotations

from .errors import PublisherGone, RefitError, VersionGone
from .publisher import Publisher
from .slots import Slots
from .subscriber import Subscriber

__all__ = ["Publisher", "Subscriber", "Slots", "RefitError", "PublisherGone", "VersionGone"]
