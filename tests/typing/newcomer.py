"""A newcomer's first hour, as a script: the habits NumPy, the array API and cuda.core users bring.
`mypy --strict` must accept it (tests/python/test_typing.py), and it runs on a machine without a GPU."""

from __future__ import annotations

import operator
from collections.abc import Iterator

import numpy as np

import stridex
import stridex.typing
from stridex import *  # noqa: F403 - what `from stridex import *` gives is part of the API


def scalars(v: stridex.View) -> tuple[float, int, complex, bool, int]:
    return float(v), int(v), complex(v), bool(v), operator.index(v)


def rows(v: stridex.View) -> Iterator[stridex.View]:
    yield from v  # a View iterates along its first axis


def first_hour() -> None:
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    v = stridex.view(a, dtype="float32", ndim=2, shape=(None, 3), device="cpu", writable=True, contiguous="C")
    ro: stridex.View = stridex.view(a, writable=False)
    assert ro.readonly and not v.readonly

    # Dtype and Device compare with every spelling the entry points take.
    assert v.dtype == np.float32 and v.dtype == "f4" and v.dtype == "float32"
    assert v.device == "cpu" and v.device == "cpu:0" and v.device == (1, 0)
    dt: stridex.typing.DtypeLike = np.float32
    dev: stridex.typing.DeviceLike = "cpu"
    assert stridex.dtype(dt) == v.dtype and stridex.Device(dev) == v.device

    # Python scalars and lists, as NumPy's arrays.
    zero_d = stridex.view(np.array(7, dtype=np.int64))
    f, i, c, b, index = scalars(zero_d)
    item: bool | int | float | complex = zero_d.item()
    nested = v.tolist()
    assert (f, i, c, b, index, item) == (7.0, 7, 7 + 0j, True, 7, 7) and nested == [[0, 1, 2], [3, 4, 5]]
    assert [r.tolist() for r in rows(v)] == nested and [r.shape for r in v] == [(3,), (3,)]

    # The names `from stridex import *` gives, copy and empty among them.
    out = empty((2, 3), "float32")  # noqa: F405
    same: stridex.View = copy(out, v)  # noqa: F405
    assert same is out and out.tolist() == nested
    flipped: stridex.View = v.T.permute(1, 0).reshape(3, 2).squeeze()
    assert flipped.shape == (3, 2)

    # memory_stats is a TypedDict: each key has its type (on a machine without CUDA, the cpu pool).
    stats: stridex.typing.MemoryStats = stridex.memory_stats("cpu")
    in_use: int = stats["in_use"]
    why: str | None = stats["not_shareable"]
    assert in_use >= 0 and stats["device"] == "cpu" and (why is None or isinstance(why, str))


if __name__ == "__main__":
    first_hour()
