"""The cases the doctor checks: one small array each, described once, built by every producer.

A case is a base array (shape, dtype, deterministic values) and a basic index applied to it, so
that every producer builds the same logical array with its own slicing, and the expected layout is
what NumPy says the same index gives. Values are small integers (exact in bfloat16) and never 0, so
a zero-filled or stale buffer is told apart from the real data.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def numpy_dtype(name: str) -> np.dtype:
    """The NumPy dtype of a stridex dtype name; ml_dtypes for bfloat16 and float8 (the doctor marks
    bfloat16 "—" for NumPy without ml_dtypes)."""
    if name == "bfloat16" or name.startswith("float8"):
        import ml_dtypes

        return np.dtype(getattr(ml_dtypes, name))
    return np.dtype(name)


@dataclass(frozen=True)
class Case:
    name: str  # what --cases takes and the JSON reports
    label: str  # the matrix column header (short)
    description: str
    dtype: str  # "float32" | "bool" | "bfloat16"
    shape: tuple[int, ...]  # of the base array
    index: tuple = ()  # basic index applied to the base; () means the whole base
    readonly: bool = False  # the producer marks the array read-only
    stream: bool = False  # the GPU stream-ordering case (not a layout case)
    copy: bool = False  # the copy case: stridex copies the array (not a zero-copy hand-over)
    race: bool = False  # the race case (a stream case): a seeded race the sanitizer must catch
    quick: bool = False  # part of --quick

    @property
    def gpu_only(self) -> bool:
        return self.stream

    def numpy_dtype(self) -> np.dtype:
        return numpy_dtype(self.dtype)

    def base_values(self) -> np.ndarray:
        """The base array's values as float64 (bool for bool), before the index."""
        n = int(np.prod(self.shape, dtype=np.int64))
        flat = np.arange(n, dtype=np.int64)
        if self.dtype == "bool":
            return (flat % 3 == 0).reshape(self.shape)
        return (flat % 7 + 1).astype(np.float64).reshape(self.shape)

    def expected_values(self) -> np.ndarray:
        """The values the case's array holds, as float64 (or bool)."""
        base = self.base_values()
        return base[self.index] if self.index else base[...]

    def expected_layout(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """(shape, strides in elements) of the case's array when the base is C-contiguous."""
        base = np.empty(self.shape, dtype=np.int8)  # itemsize 1: byte strides are element strides
        view = base[self.index] if self.index else base[...]
        return tuple(view.shape), tuple(view.strides)

    @property
    def size(self) -> int:
        return int(np.prod(self.expected_layout()[0], dtype=np.int64))

    def to_json(self) -> dict:
        shape, strides = self.expected_layout()
        return {
            "name": self.name,
            "label": self.label,
            "description": self.description,
            "dtype": self.dtype,
            "shape": list(shape),
            "strides": list(strides),
            "readonly": self.readonly,
            "gpu_only": self.gpu_only,
            "quick": self.quick,
            "copy": self.copy,
            "race": self.race,
        }


CASES: tuple[Case, ...] = (
    Case("contiguous", "contig", "(3, 4) float32, C-contiguous", "float32", (3, 4), quick=True),
    Case(
        "strided",
        "strided",
        "(4, 6)[::2, 1::2] float32: shape (2, 3), strides (12, 2), element 0 at offset 1",
        "float32",
        (4, 6),
        (slice(None, None, 2), slice(1, None, 2)),
        quick=True,
    ),
    Case(
        "negative",
        "neg",
        "(3, 4)[::-1, ::-1] float32: strides (-4, -1), element 0 at the highest address",
        "float32",
        (3, 4),
        (slice(None, None, -1), slice(None, None, -1)),
    ),
    Case("0-d", "0-d", "a 0-d float32 array (shape ())", "float32", ()),
    Case("empty", "empty", "(0, 3) float32: no elements (pointer and strides are not compared)", "float32", (0, 3)),
    Case("bool", "bool", "(2, 3) bool (DLPack kDLBool)", "bool", (2, 3), quick=True),
    Case("bfloat16", "bf16", "(2, 3) bfloat16 (DLPack kDLBfloat)", "bfloat16", (2, 3)),
    Case(
        "readonly",
        "ro",
        "(2, 3) float32 that its producer marks read-only (NumPy writeable=False; JAX arrays always are)",
        "float32",
        (2, 3),
        readonly=True,
    ),
    Case(
        "copy",
        "copy",
        "(4, 6)[::2, 1::2] float32 copied by stridex: View.copy() on the device, and on a "
        "GPU .to('cpu') and back, then handed to the consumer (values and C-contiguous layout checked; the native "
        "route has no counterpart)",
        "float32",
        (4, 6),
        (slice(None, None, 2), slice(1, None, 2)),
        copy=True,
    ),
    Case(
        "stream",
        "stream",
        "GPU: (4194304,) float32 written on the producer's stream A behind a ~100 ms "
        "kernel; the consumer copies it on its stream B and must see the new values",
        "float32",
        (1 << 22,),
        stream=True,
        quick=True,
    ),
    Case(
        "race",
        "race",
        "GPU: the stream case's write behind a ~100 ms kernel on stream A, handed over through stridex.view "
        "with stream=NO_SYNC inside stridex.sanitize(raise_=True): the sanitizer must raise StreamRaceError; "
        "the corrected hand-over (ordered on the consumer's stream B, then the consumer's import) must not "
        "(docs/sanitizer.md; the native route has no sanitizer)",
        "float32",
        (1 << 22,),
        stream=True,
        race=True,
    ),
)
CASES_BY_NAME = {c.name: c for c in CASES}


def select(names: list[str] | None = None, quick: bool = False) -> list[Case]:
    if names:
        unknown = [n for n in names if n not in CASES_BY_NAME]
        if unknown:
            raise ValueError(f"unknown case(s): {', '.join(unknown)}; known: {', '.join(CASES_BY_NAME)}")
        return [c for c in CASES if c.name in names]
    return [c for c in CASES if c.quick or not quick]


def sentinel(case: Case, current):
    """A value to write that differs from `current` and from every value the case holds."""
    if case.dtype == "bool":
        return not bool(current)
    return 42.0
