"""The control channel of stridex.refit: length-prefixed messages of plain data over an abstract
Unix stream socket, between one publisher and each of its subscribers.

A message is a dict of plain data (str, int, float, bool, None, bytes, lists, tuples and dicts of
them) pickled with no reference to any class or function: the loader resolves no global, so a
message can never run code (``Unpickler.find_class`` refuses every name). Views travel as their
pickled payload (a dict of plain data) and are rebuilt by stridex.ipc's rebuild, never by
unpickling code. Only processes of the same user may connect (SO_PEERCRED).
"""

from __future__ import annotations

import io
import os
import pickle
import socket
import struct
from typing import Any

_HEADER = struct.Struct("<Q")
MAX_MESSAGE = 1 << 30  # a descriptor of a million shards is far below this

Message = dict[str, Any]


class _PlainData(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"a refit message names {module}.{name}: only plain data is accepted")


def encode(message: Message) -> bytes:
    data = pickle.dumps(message, protocol=5)
    return _HEADER.pack(len(data)) + data


def decode(data: bytes) -> Message:
    out = _PlainData(io.BytesIO(data)).load()
    if not isinstance(out, dict):
        raise pickle.UnpicklingError(f"a refit message is a dict, found {type(out).__name__}")
    return out


def send(s: socket.socket, message: Message) -> None:
    s.sendall(encode(message))


def _exactly(s: socket.socket, n: int) -> bytes | None:
    chunks = []
    while n:
        chunk = s.recv(min(n, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def recv(s: socket.socket) -> Message | None:
    """The next message, or None when the peer closed the connection (exited or crashed)."""
    header = _exactly(s, _HEADER.size)
    if header is None:
        return None
    (n,) = _HEADER.unpack(header)
    if n > MAX_MESSAGE:
        raise ValueError(f"a refit message of {n} bytes is over the limit of {MAX_MESSAGE}")
    data = _exactly(s, n)
    if data is None:
        return None
    return decode(data)


def abstract(name: str) -> bytes:
    """The abstract socket address of a publisher's name."""
    return b"\0" + name.encode()


def same_user(conn: socket.socket) -> bool:
    """Whether the peer runs as this process's user (SO_PEERCRED: pid, uid, gid)."""
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", creds)
    return uid == os.getuid()
