"""Host memory across processes: which memory is shareable, and mapping it in the importer.

Host memory is shareable when it lies in a MAP_SHARED mapping of a file: a
``multiprocessing.shared_memory`` block, an ``mmap`` of a file, memory from
:func:`stridex.ipc.shared_empty`, or ``multiprocessing`` heap blocks (RawArray, whose file is
already unlinked). The exporter finds the mapping in ``/proc/self/maps``, opens a file descriptor
of its file (by path, or among its own open fds by inode when the file is unlinked), and the
importer maps that fd. Memory of ``malloc`` (a NumPy array, a ``bytearray``) is private to the
process and cannot be shared: pickling it raises BufferError and says how to get shareable
memory, or to ask for a copy explicitly (:func:`stridex.ipc.to_shared`).
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, SupportsIndex

from .. import _stridex

if TYPE_CHECKING:
    import numpy

_NOT_SHAREABLE_HINT = (
    "allocate it with stridex.ipc.shared_empty() or in a multiprocessing.shared_memory "
    "block, or ask for a copy with stridex.ipc.to_shared(view)"
)


class _Mapping:
    __slots__ = ("start", "end", "perms", "offset", "dev", "inode", "path")

    def __init__(self, line: str):
        fields = line.split(maxsplit=5)
        start, end = fields[0].split("-")
        self.start, self.end = int(start, 16), int(end, 16)
        self.perms, self.offset, self.inode = fields[1], int(fields[2], 16), int(fields[4])
        major, minor = fields[3].split(":")
        self.dev = os.makedev(int(major, 16), int(minor, 16))
        self.path = fields[5].rstrip("\n") if len(fields) > 5 else ""


def _mapping_of(address: int) -> _Mapping | None:
    with open("/proc/self/maps") as f:
        for line in f:
            dash = line.index("-")
            if int(line[:dash], 16) <= address < int(line[dash + 1 : line.index(" ")], 16):
                return _Mapping(line)
    return None


def _fd_of(m: _Mapping, writable: bool) -> int | None:
    """A new fd of the mapping's file, or None when the file cannot be found."""
    flags = (os.O_RDWR if writable else os.O_RDONLY) | os.O_CLOEXEC
    if m.path.startswith("/") and not m.path.endswith(" (deleted)"):
        try:
            fd = os.open(m.path, flags)
        except OSError:
            fd = None
        if fd is not None:
            st = os.fstat(fd)
            if (st.st_dev, st.st_ino) == (m.dev, m.inode):
                return fd
            os.close(fd)  # the name now belongs to another file
    # Unlinked (or renamed) files: one of our own fds may still refer to the file.
    for name in os.listdir("/proc/self/fd"):
        try:
            st = os.stat(f"/proc/self/fd/{name}")
            if (st.st_dev, st.st_ino) == (m.dev, m.inode):
                return os.open(f"/proc/self/fd/{name}", flags)
        except OSError:
            continue
    return None


def export_host(view: _stridex.View) -> tuple[int, dict[str, Any]]:
    """(fd, payload) for a host View's memory; BufferError naming why when it is not shareable."""
    lo, hi = view.byte_span
    start = view.ptr + lo
    end = view.ptr + hi
    m = _mapping_of(start)
    if m is None:
        raise BufferError(f"host memory at {start:#x} is not in any mapping of this process")
    if "s" not in m.perms:
        what = "anonymous" if not m.path or m.path.startswith("[") else f"copy-on-write ({m.path})"
        raise BufferError(
            f"cannot share this host View with another process: its memory at {start:#x} is private "
            f"to this process ({what} memory, e.g. from malloc or NumPy); " + _NOT_SHAREABLE_HINT
        )
    if end > m.end:
        raise BufferError(
            f"cannot share this host View: its bytes [{start:#x}, {end:#x}) run past the shared "
            f"mapping that holds them (which ends at {m.end:#x})"
        )
    writable = "w" in m.perms and not view.readonly
    fd = _fd_of(m, writable)
    if fd is None:
        raise BufferError(
            f"cannot share this host View: the file behind its shared mapping ({m.path or 'anonymous'}) "
            "cannot be opened (anonymous MAP_SHARED memory has no file to pass); " + _NOT_SHAREABLE_HINT
        )
    payload = {"file_offset": m.offset + (start - m.start), "length": end - start, "lo": lo, "writable": writable}
    return fd, payload


class HostMapping:
    """The importer's mapping; the Views made from it keep it (and so the mapping) alive."""

    __slots__ = ("mm", "raw", "skip", "__weakref__")

    def __init__(self, fd: int, file_offset: int, length: int, writable: bool):
        aligned = file_offset - file_offset % mmap.ALLOCATIONGRANULARITY
        access = mmap.ACCESS_WRITE if writable else mmap.ACCESS_READ
        self.mm = mmap.mmap(fd, length + (file_offset - aligned), access=access, offset=aligned)
        self.raw = _stridex.view(memoryview(self.mm))  # the mapping's address
        self.skip = file_offset - aligned

    @property
    def address(self) -> int:
        return self.raw.ptr + self.skip


def import_host(fd: int, payload: dict[str, Any], meta: dict[str, Any]) -> _stridex.View:
    """A View of the exporter's host memory, mapped from `fd` (the payload was checked already)."""
    keeper = HostMapping(fd, payload["file_offset"], payload["length"], payload["writable"])
    return _stridex.from_pointer(
        keeper.address - payload["lo"],
        meta["shape"],
        meta["dtype"],
        strides=meta["strides"],
        owner=keeper,
        readonly=meta["readonly"] or not payload["writable"],
    )


def shared_empty(
    shape: SupportsIndex | Iterable[SupportsIndex], dtype: _stridex.Dtype | str | numpy.dtype[Any] | type
) -> _stridex.View:
    """A writable, C-contiguous host View in a fresh shared-memory block: it pickles to other
    processes as the same memory. The block is unlinked at once and lives while any View of it
    (in any process) does."""
    import tempfile

    from .._stridex import dtype as to_dtype

    dt = to_dtype(dtype)
    extents = tuple(shape) if isinstance(shape, Iterable) else (shape,)
    n = 1
    for e in extents:
        n *= int(e)
    nbytes = max(dt.itemsize * n, 1)
    directory = "/dev/shm" if os.path.isdir("/dev/shm") else None
    fd, path = tempfile.mkstemp(prefix="stridex-", dir=directory)
    os.unlink(path)
    try:
        os.ftruncate(fd, nbytes)
        mm = mmap.mmap(fd, nbytes, access=mmap.ACCESS_WRITE)
    except BaseException:
        os.close(fd)
        raise
    # The fd stays open as long as the mapping: exporting the unlinked file finds it by inode.
    keeper = _SharedBlock(mm, fd)
    base = _stridex.view(memoryview(mm))
    return _stridex.from_pointer(base.ptr, extents, dt, owner=keeper)


class _SharedBlock:
    __slots__ = ("mm", "fd", "__weakref__")

    def __init__(self, mm: mmap.mmap, fd: int):
        self.mm, self.fd = mm, fd

    def __del__(self) -> None:
        try:
            os.close(self.fd)
        except OSError:
            pass
