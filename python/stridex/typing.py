"""Types for annotating code that calls stridex: the spellings its entry points take.

Every signature in stridex's stubs and in ``help()`` names these, as ``numpy.typing`` does for
NumPy. They exist at run time too (``stridex.typing.DtypeLike`` is a ``typing.Union``), so code may
import them without ``if TYPE_CHECKING``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, TypedDict, TypeVar, Union

from . import _stridex

if TYPE_CHECKING:
    import numpy
    from typing_extensions import TypeAlias

__all__ = ["ArrayT", "DeviceLike", "DtypeLike", "MemoryStats", "SupportsDtype"]


class SupportsDtype(Protocol):
    """Anything with a ``dtype`` attribute (an array of any framework): it stands for its dtype."""

    @property
    def dtype(self) -> object:
        """The array's dtype, in any spelling :data:`DtypeLike` takes."""
        ...


# NumPy is named as a string: importing stridex imports no framework.
DtypeLike: TypeAlias = Union[_stridex.Dtype, str, "numpy.dtype[Any]", type, SupportsDtype]
DtypeLike.__doc__ = """What a ``dtype`` argument takes (``stridex.dtype``, ``empty``, ``from_pointer``, ``view(dtype=)``): a
:class:`stridex.Dtype`, a name (``'float32'``, ``'torch.float32'``, NumPy's ``'f4'``), a NumPy,
ml_dtypes or torch dtype or scalar type (``np.float32``, ``float``), or an array (its dtype)."""

DeviceLike: TypeAlias = Union[_stridex.Device, str, "tuple[int, int]"]
DeviceLike.__doc__ = """What a ``device`` argument takes: a :class:`stridex.Device`, a name (``'cpu'``, ``'cuda:1'``,
``'cuda_host'``) or a DLPack ``(device_type, device_id)`` pair."""

ArrayT = TypeVar("ArrayT")
"""The type of ``stridex.copy``'s ``dst``, which it returns: a View stays a View, a tensor a tensor."""


class MemoryStats(TypedDict):
    """What :func:`stridex.memory_stats` returns for one pool, in bytes unless said otherwise."""

    device: str
    """The pool's device: ``'cuda:N'``, ``'cuda_host'`` (pinned) or ``'cpu'`` (large pageable results)."""
    in_use: int
    """Bytes handed out by stridex and not yet released."""
    peak_in_use: int
    """The most ``in_use`` has been."""
    reserved: int
    """Bytes the pool holds from the driver (in use or cached)."""
    peak_reserved: int
    """The most ``reserved`` has been."""
    allocations: int
    """Live allocations (a count)."""
    created: bool
    """False until the first allocation made the pool."""
    shareable: bool
    """The pool's memory can cross processes (``stridex.ipc``)."""
    not_shareable: str | None
    """Why not, when the pool exists and is not shareable; else None."""
    registered: int
    """cpu: bytes of the pool's blocks page-locked for the DMA engine; 0 elsewhere."""
