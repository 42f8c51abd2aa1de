"""Views across processes on one machine (stridex.ipc), CPU part: host shared memory through
pickle and multiprocessing -- aliasing both ways, layouts, lifetime, and every refusal."""

import gc
import multiprocessing as mp
import os
import pickle
import subprocess
import sys
import time
import weakref
from multiprocessing import shared_memory

import numpy as np
import pytest

import stridex
import stridex.ipc
from stridex.ipc import _rebuild
from stridex.ipc.codecs import CODECS

import ipc_harness
import ipc_worker


@pytest.fixture(scope="module")
def worker():
    w = ipc_harness.Worker(ipc_worker.serve)
    yield w
    w.stop()
    w.process.join(timeout=30)


@pytest.fixture
def shm():
    block = shared_memory.SharedMemory(create=True, size=4096)
    yield block
    block.close()
    block.unlink()


def test_shared_memory_view_aliases_both_ways(worker, shm):
    a = np.ndarray((8,), dtype=np.float32, buffer=shm.buf)
    a[:] = np.arange(8)
    v = stridex.view(a)
    assert worker("write", v, 3, 42.0) == "ok"
    assert a[3] == 42.0  # the child's write is visible here
    assert worker("hold", v) == "ok"
    a[5] = -1.0
    assert worker("read_held", 0)[5] == -1.0  # and ours there
    assert worker("drop") == "ok"
    del v, a
    gc.collect()


def test_view_exported_by_the_child_aliases_here(worker):
    v = worker("make_shared")
    assert np.asarray(v).tolist() == [10, 20, 30, 40]
    # Host memory: no event travels, so nothing is pending (only CUDA imports carry one).
    assert v.pending_event is False and v._pending_event_waited() is None and v._pending_event_waited(7) is None
    np.asarray(v)[0] = 7
    assert worker("read_held", 0) == [7, 20, 30, 40]
    assert worker("drop") == "ok"


@pytest.mark.parametrize("index", [np.s_[::2, 1:], np.s_[::-1, ::-3], np.s_[2], np.s_[:, 3]])
def test_layout_dtype_and_flags_travel(worker, shm, index):
    a = np.ndarray((5, 6), dtype=np.int16, buffer=shm.buf)
    a[:] = np.arange(30).reshape(5, 6)
    v = stridex.view(a[index])
    assert worker("describe", v) == (v.shape, v.strides, "int16", False, "cpu")
    assert worker("read", v) == a[index].tolist()


def test_readonly_travels_and_is_enforced(worker, shm):
    a = np.ndarray((4,), dtype=np.int64, buffer=shm.buf)
    ro = a.view()
    ro.flags.writeable = False
    v = stridex.view(ro)
    assert v.readonly
    assert worker("describe", v)[3] is True
    with pytest.raises(AssertionError, match="read-only|readonly|not writeable"):
        worker("write", v, 0, 1)


def test_memory_outlives_the_producers_references(worker):
    v = stridex.ipc.shared_empty((3,), "float64")
    np.asarray(v)[:] = [1.5, 2.5, 3.5]
    data = pickle.dumps(v)  # the ticket now keeps the memory
    del v
    gc.collect()
    held = pickle.loads(data)  # same process: the original View comes back
    assert np.asarray(held).tolist() == [1.5, 2.5, 3.5]
    assert worker("hold", held) == "ok"
    del held
    gc.collect()
    assert stridex.ipc.pending() == {}
    assert worker("read_held", 0) == [1.5, 2.5, 3.5]  # the importer's mapping is its own
    assert worker("write_held", 1, 9.0) == "ok"
    assert worker("read_held", 0) == [1.5, 9.0, 3.5]
    assert worker("drop") == "ok"


def test_unlinked_block_still_travels_once_pickled(worker):
    block = shared_memory.SharedMemory(create=True, size=64)
    a = np.ndarray((4,), dtype=np.int32, buffer=block.buf)
    a[:] = [4, 3, 2, 1]
    v = stridex.view(a)
    data = pickle.dumps(v)
    block.unlink()  # the name is gone; the exporter's ticket holds a file descriptor
    del v, a
    gc.collect()
    # Another process loads it: route the bytes through the worker as an opaque blob.
    assert worker("read", pickle.loads(pickle.dumps(_Opaque(data)))) == [4, 3, 2, 1]
    block.close()


class _Opaque:
    """Carries pickled View bytes so that the worker, not this process, loads them."""

    def __init__(self, data):
        self.data = data

    def __reduce__(self):
        return pickle.loads, (self.data,)


def test_a_request_the_worker_cannot_unpickle_is_an_error_reply_not_a_hang(worker, shm):
    v = stridex.view(np.ndarray((2,), dtype=np.uint8, buffer=shm.buf))
    data = pickle.dumps(v)
    pickle.loads(data)  # loaded here: the ticket is spent, so the worker's load fails
    start = time.monotonic()
    with pytest.raises(ipc_harness.WorkerError, match="while receiving a request: .*unknown ticket"):
        worker("read", _Opaque(data))
    assert time.monotonic() - start < 10
    assert worker("pending") == {}  # and the worker still serves


def test_a_dead_worker_is_a_failure_naming_its_exit_code_not_a_hang():
    w = ipc_harness.Worker(ipc_worker.serve)
    assert w("pending") == {}
    start = time.monotonic()
    with pytest.raises(AssertionError, match=r"died \(exit code 3\) while running 'die'"):
        w("die", 3)
    assert time.monotonic() - start < 5


def test_same_process_roundtrip_is_the_same_memory(shm):
    a = np.ndarray((4,), dtype=np.uint8, buffer=shm.buf)
    v = stridex.view(a)
    data = pickle.dumps(v)
    w = pickle.loads(data)
    assert w.ptr == v.ptr and w.shape == v.shape
    with pytest.raises(BufferError, match="already loaded"):
        pickle.loads(data)


def test_private_memory_refuses_and_names_the_ways_out():
    v = stridex.view(np.arange(4))
    with pytest.raises(BufferError, match="private to this process.*shared_empty.*to_shared"):
        pickle.dumps(v)
    assert stridex.ipc.pending() == {}  # nothing half-exported


def test_to_shared_is_an_explicit_copy(worker):
    src = np.arange(12, dtype=np.float32).reshape(3, 4)[:, ::-2]
    copy = stridex.ipc.to_shared(src)
    assert copy.is_c_contiguous and np.asarray(copy).tolist() == src.tolist()
    assert copy.ptr != stridex.view(src).ptr
    assert worker("write", copy, (0, 0), 100.0) == "ok"
    assert np.asarray(copy)[0, 0] == 100.0 and src[0, 0] == 3.0


def test_to_shared_refuses_what_is_not_host_memory():
    with pytest.raises(TypeError):
        stridex.ipc.to_shared(42)


def test_empty_views_roundtrip_without_memory():
    v = stridex.view(np.zeros((0, 3), dtype=np.float32))
    w = pickle.loads(pickle.dumps(v))
    assert w.shape == (0, 3) and w.dtype.name == "float32"


def test_malformed_payloads_are_value_errors():
    with pytest.raises(ValueError, match="payload version"):
        _rebuild({"v": 99})
    with pytest.raises(ValueError, match="payload version"):
        _rebuild("junk")


def test_unreachable_exporter_is_a_buffer_error():
    payload = {
        "v": 1,
        "kind": "host",
        "pid": 1,
        "broker": b"\0stridex-ipc-none",
        "ticket": b"x" * 16,
        "shape": [1],
        "strides": [1],
        "dtype": "int8",
        "readonly": False,
        "file_offset": 0,
        "length": 1,
        "lo": 0,
        "writable": True,
    }
    with pytest.raises(BufferError, match="cannot reach the process that pickled"):
        _rebuild(payload)


def test_unknown_ticket_is_refused(shm):
    v = stridex.view(np.ndarray((2,), dtype=np.uint8, buffer=shm.buf))
    _, (payload,) = v.__reduce__()
    from stridex.ipc import broker, importer

    broker.current().release(payload["ticket"])
    with pytest.raises(BufferError, match="unknown ticket"):
        # from another "process": open over the socket rather than taking the local shortcut
        importer.open_ticket(payload["broker"], payload["pid"], payload["ticket"])


def _pending_soon(expected, timeout=5.0):
    deadline = time.monotonic() + timeout
    while stridex.ipc.pending() != expected and time.monotonic() < deadline:
        time.sleep(0.01)
    return stridex.ipc.pending()


def test_work_overlapping_an_open_comes_back_with_the_reply_or_releases_the_ticket(shm):
    from stridex.ipc import broker, importer

    v = stridex.view(np.ndarray((2,), dtype=np.uint8, buffer=shm.buf))
    b = broker.broker()
    # A ticket that lives until released, as a CUDA IPC handle's does (no fds to pass).
    ticket = b.add(v, None, [], CODECS["cuda_ipc"], False)
    assert importer.open_ticket(b.address, 0, ticket, lambda: "made") == ([], "made")
    assert stridex.ipc.pending() == {"cuda_ipc opened": 1}
    importer.release_ticket(b.address, ticket)
    assert _pending_soon({}) == {}

    ticket = b.add(v, None, [], CODECS["cuda_ipc"], False)

    def fails():
        raise RuntimeError("the import failed")

    with pytest.raises(RuntimeError, match="the import failed"):
        importer.open_ticket(b.address, 0, ticket, fails)
    assert _pending_soon({}) == {}  # opened for nothing: released at once

    made = []
    with pytest.raises(BufferError, match="unknown ticket"):  # refused: what was made is dropped
        importer.open_ticket(b.address, 0, ticket, lambda: made.append(1) or "dropped")
    assert made == [1]


def test_reducer_is_registered_with_multiprocessing():
    from multiprocessing.reduction import ForkingPickler

    assert stridex.View in ForkingPickler._extra_reducers


_PICKLING_AFTER_IMPORT = """
import mmap, pickle, sys, tempfile
import stridex
assert "stridex.ipc" not in sys.modules and "multiprocessing.reduction" not in sys.modules
f = tempfile.TemporaryFile()
f.truncate(8)
m = mmap.mmap(f.fileno(), 8)
v = stridex.view(m)
w = pickle.loads(pickle.dumps(v))  # plain pickle: the View's own __reduce__, nothing registered
memoryview(w)[0] = 7
assert m[0] == 7, "the unpickled View aliases the memory"
assert "multiprocessing.reduction" not in sys.modules
from multiprocessing.reduction import ForkingPickler  # stridex.ipc registers itself now
assert ForkingPickler._extra_reducers[stridex.View] == stridex.View._reduce_in_flight
u = pickle.loads(ForkingPickler.dumps(v))
memoryview(u)[1] = 9
assert m[1] == 9
"""


def test_a_view_pickles_right_after_import_stridex_and_multiprocessing_learns_of_it_on_import():
    # A fresh interpreter: no test before this one imported stridex.ipc or multiprocessing.
    subprocess.run([sys.executable, "-c", _PICKLING_AFTER_IMPORT], check=True)


def test_the_registration_with_multiprocessing_imports_none_of_the_ipc_machinery():
    code = (
        "import sys, stridex, multiprocessing.reduction; "
        "bad = [m for m in ('stridex.ipc.broker', 'stridex.ipc.codecs', 'stridex.ipc.importer') if m in sys.modules]; "
        "assert not bad, bad; assert stridex.View in multiprocessing.reduction.ForkingPickler._extra_reducers"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_import_stridex_imports_neither_dask_nor_the_ipc_machinery():
    code = (
        "import sys, stridex; bad = [m for m in ('dask', 'distributed', 'stridex.ipc', 'socket') "
        "if m in sys.modules]; assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.filterwarnings("ignore:os.fork\\(\\) was called:RuntimeWarning")  # JAX's; the child uses no JAX
@pytest.mark.parametrize(
    "start, pickling_delay, send_delay",
    [
        ("spawn", 0.0, 0.0),
        ("forkserver", 0.0, 0.0),
        ("fork", 0.0, 0.0),
        ("spawn", 0.5, 0.0),
        ("forkserver", 0.5, 0.0),
        ("fork", 0.5, 0.0),
        ("spawn", 0.0, 0.5),
    ],
)
def test_a_producer_that_exits_at_once_waits_until_its_view_was_opened(start, pickling_delay, send_delay):
    # pickling_delay: the queue's feeder thread exports the View only after the producer's exit
    # began, so the exit wait must be in place before any export exists (children of fork and
    # forkserver, which leave through os._exit, included; fork also inherits stridex already
    # imported). send_delay: the importer asked, and the producer must not leave before the reply
    # with the fds is on its way.
    ctx = mp.get_context(start)
    replies = ctx.Queue()
    p = ctx.Process(target=ipc_worker.produce_and_exit, args=(replies, pickling_delay, send_delay))
    p.start()
    time.sleep(1.0 + pickling_delay)  # the producer has returned from its function by now, and waits in its exit
    assert p.is_alive()
    v = replies.get(timeout=60)
    p.join(timeout=60)
    assert p.exitcode == 0
    assert np.asarray(v).tolist() == [5, 6, 7]  # our mapping outlives the producer
    np.asarray(v)[0] = 1
    assert np.asarray(v).tolist() == [1, 6, 7]


@pytest.mark.parametrize(
    "change, needle",
    [
        ({"kind": "teleport"}, "unknown kind"),
        ({"length": -1}, "out of range"),
        ({"file_offset": "0"}, "field 'file_offset'"),
        ({"readonly": 1}, "field 'readonly'"),
        ({"strides": [1, 1]}, "shape and strides"),
        ({"ticket": None}, "field 'ticket'"),
    ],
)
def test_malformed_fields_are_value_errors(change, needle):
    payload = {
        "v": 1,
        "kind": "host",
        "pid": 1,
        "broker": b"\0x",
        "ticket": b"x" * 16,
        "shape": [2],
        "strides": [1],
        "dtype": "int8",
        "readonly": False,
        "file_offset": 0,
        "length": 2,
        "lo": 0,
        "writable": True,
    }
    with pytest.raises(ValueError, match=needle):
        _rebuild({**payload, **change})


def test_malformed_device_payload_is_a_value_error():
    payload = {
        "v": 1,
        "kind": "cuda_ipc",
        "pid": 1,
        "broker": b"\0x",
        "ticket": b"x" * 16,
        "shape": [2],
        "strides": [1],
        "dtype": "int8",
        "readonly": False,
        "device_uuid": b"u" * 16,
        "offset": -5,
        "extent": 2,
        "event": None,
        "handle": b"h" * 64,
    }
    with pytest.raises(ValueError, match="offset -5 is out of range"):
        _rebuild(payload)


@pytest.mark.parametrize(
    "change, needle",
    [
        ({"pool_id": -1}, "pool_id -1 is out of range"),
        ({"pool": None}, "field 'pool'"),
        ({"extent": 1 << 64}, "extent 18446744073709551616 is out of range"),
    ],
)
def test_malformed_pool_payloads_are_value_errors(change, needle):
    payload = {
        "v": 1,
        "kind": "cuda_pool",
        "pid": 1,
        "broker": b"\0x",
        "ticket": b"x" * 16,
        "shape": [2],
        "strides": [1],
        "dtype": "int8",
        "readonly": False,
        "device_uuid": b"u" * 16,
        "offset": 0,
        "extent": 2,
        "event": None,
        "pool": b"p" * 64,
        "pool_id": 7,
    }
    with pytest.raises(ValueError, match=needle):
        _rebuild({**payload, **change})


def test_a_pool_ticket_without_its_pools_fd_is_refused_and_released(shm):
    from stridex.ipc import broker

    v = stridex.view(np.ndarray((2,), dtype=np.uint8, buffer=shm.buf))
    b = broker.broker()
    ticket = b.add(v, None, [], CODECS["cuda_pool"], False)  # a reply that carries no fd
    payload = {
        "v": 1,
        "kind": "cuda_pool",
        "pid": 0,  # not this process: imported through the socket, not taken back locally
        "broker": b.address,
        "ticket": ticket,
        "shape": [2],
        "strides": [1],
        "dtype": "uint8",
        "readonly": False,
        "device_uuid": b"u" * 16,
        "offset": 0,
        "extent": 2,
        "event": None,
        "pool": b"p" * 64,
        "pool_id": 7,
    }
    with pytest.raises(BufferError, match="expected 1 file descriptor for a pool View, received 0"):
        _rebuild(payload)
    gc.collect()
    assert _pending_soon({}) == {}  # the failed import released its ticket


def test_a_pool_ticket_is_opened_once_kept_while_opened_and_freed_by_its_release():
    # The exporter's side of a cuda_pool View (what the GPU test checks with memory counts): the
    # importer's open marks it opened (exit and wait_released wait for it), the ticket keeps the
    # memory after the exporter dropped its own View, and the importer's release frees it.
    from stridex.ipc import _OwnedFd, broker, importer

    memory = np.zeros(4, dtype=np.uint8)
    gone = weakref.ref(memory)
    v = stridex.view(memory)
    del memory
    b = broker.broker()
    fd = os.memfd_create("stridex-test-pool", os.MFD_CLOEXEC)  # stands in for the pool's fd
    ticket = b.add(v, _OwnedFd(fd), [fd], CODECS["cuda_pool"], True)  # pickled by multiprocessing
    del v
    assert stridex.ipc.pending() == {"cuda_pool not opened": 1}
    assert not stridex.ipc.wait_released(0.05)  # on its way: waited for
    fds, _ = importer.open_ticket(b.address, 0, ticket)
    assert len(fds) == 1
    for f in fds:
        os.close(f)
    assert stridex.ipc.pending() == {"cuda_pool opened": 1}
    with pytest.raises(BufferError, match="unknown ticket"):
        importer.open_ticket(b.address, 0, ticket)  # opened once
    assert not stridex.ipc.wait_released(0.05)  # the importer holds it: kept
    gc.collect()
    assert gone() is not None
    importer.release_ticket(b.address, ticket)
    assert stridex.ipc.wait_released(5)
    assert stridex.ipc.pending() == {}
    deadline = time.monotonic() + 5
    while gone() is not None and time.monotonic() < deadline:  # dropped by the broker's thread
        gc.collect()
        time.sleep(0.01)
    assert gone() is None


def test_multiprocessing_heap_memory_travels_by_its_open_fd(worker):
    raw = mp.RawArray("i", 5)  # a block of an unlinked temporary file that multiprocessing keeps open
    a = np.frombuffer(raw, dtype=np.int32)
    a[:] = [1, 2, 3, 4, 5]
    v = stridex.view(a[1:4])
    assert worker("write", v, 0, 20) == "ok"
    assert a.tolist() == [1, 20, 3, 4, 5]


_U = b"u" * 16  # a device UUID's length
# A well-formed payload of each CUDA kind (what stridex.ipc pickles), and the fds it comes with.
_PLACEMENT = dict(shape=[1], strides=[1], dtype="int8", readonly=False, device_uuid=_U, offset=0, extent=1, event=None)
_PAYLOADS = {
    "cuda_ipc": ({**_PLACEMENT, "handle": b"h" * 64}, []),
    "cuda_vmm": ({**_PLACEMENT, "chunk_size": 1 << 21}, [3]),
    "cuda_pool": ({**_PLACEMENT, "pool": b"p" * 64, "broker": b"\0b", "pool_id": 7}, [3]),
}


def _import(kind, change=(), drop=(), fds=None):
    payload, default_fds = _PAYLOADS[kind]
    payload = {k: v for k, v in {**payload, **dict(change)}.items() if k not in drop}
    return stridex._stridex._ipc_import(kind, payload, default_fds if fds is None else fds, None)


# Every field every kind shares, checked once for all of them.
@pytest.mark.parametrize("kind", sorted(_PAYLOADS))
@pytest.mark.parametrize(
    "change, error, needle",
    [
        ({"offset": -1}, ValueError, r"payload\['offset'\] must be >= 0, found -1"),
        ({"offset": 1 << 64}, ValueError, r"payload\['offset'\] 18446744073709551616 does not fit in int64"),
        ({"extent": "1"}, TypeError, r"payload\['extent'\] must be an int, found str"),
        ({"extent": True}, TypeError, r"payload\['extent'\] must be an int, found bool"),
        ({"shape": "x"}, TypeError, r"payload\['shape'\] must be an int or a sequence of ints, found str"),
        ({"strides": [1, 1]}, ValueError, "payload's shape and strides differ in length: 1 and 2"),
        ({"dtype": "nope"}, TypeError, r"payload\['dtype'\]: unknown dtype name 'nope'"),
        ({"readonly": 0}, TypeError, r"payload\['readonly'\] must be a bool, found int"),
        ({"device_uuid": b"u"}, ValueError, r"payload\['device_uuid'\] must be 16 bytes, found 1"),
        ({"device_uuid": "u" * 16}, TypeError, r"payload\['device_uuid'\] must be bytes, found str"),
        ({"event": b"e"}, ValueError, r"payload\['event'\] must be 64 bytes, found 1"),
    ],
)
def test_native_import_checks_every_shared_field_of_the_payload(kind, change, error, needle):
    # The private entry is fed from a pickle: each field is checked before any driver call, and the
    # message names the kind, the field, what it expected and what it found.
    with pytest.raises(error, match=f"_ipc_import\\(\\): {kind} {needle}"):
        _import(kind, change)


@pytest.mark.parametrize(
    "kind, change, error, needle",
    [
        ("cuda_ipc", {"handle": b"h" * 3}, ValueError, r"cuda_ipc payload\['handle'\] must be 64 bytes, found 3"),
        ("cuda_ipc", {"handle": None}, TypeError, r"cuda_ipc payload\['handle'\] must be bytes, found NoneType"),
        ("cuda_vmm", {"chunk_size": True}, TypeError, r"cuda_vmm payload\['chunk_size'\] must be an int, found bool"),
        ("cuda_vmm", {"chunk_size": -2}, ValueError, r"cuda_vmm payload\['chunk_size'\] must be >= 0, found -2"),
        ("cuda_pool", {"pool": b"p"}, ValueError, r"cuda_pool payload\['pool'\] must be 64 bytes, found 1"),
        ("cuda_pool", {"broker": "b"}, TypeError, r"cuda_pool payload\['broker'\] must be bytes, found str"),
        (
            "cuda_pool",
            {"pool_id": 1 << 64},
            ValueError,
            r"cuda_pool payload\['pool_id'\] must be an address in \[0, 2\*\*64\), found 18446744073709551616",
        ),
    ],
)
def test_native_import_checks_the_fields_of_each_kind(kind, change, error, needle):
    with pytest.raises(error, match=needle):
        _import(kind, change)


@pytest.mark.parametrize(
    "kind, field, expected",
    [
        ("cuda_ipc", "handle", "bytes"),
        ("cuda_ipc", "shape", "a list of ints"),
        ("cuda_vmm", "chunk_size", r"an int >= 0"),
        ("cuda_vmm", "event", "bytes or None"),
        ("cuda_pool", "pool_id", r"an int in \[0, 2\*\*64\)"),
        ("cuda_pool", "readonly", "a bool"),
    ],
)
def test_native_import_names_a_missing_field_and_what_it_should_hold(kind, field, expected):
    with pytest.raises(ValueError, match=rf"_ipc_import\(\): {kind} payload has no '{field}' \({expected}\)"):
        _import(kind, drop=[field])


@pytest.mark.parametrize(
    "kind, fds, error, needle",
    [
        ("cuda_vmm", [-1], ValueError, r"fds must be open file descriptors \(>= 0\), found -1"),
        ("cuda_vmm", [1 << 40], ValueError, "fds 1099511627776 does not fit in int32"),
        ("cuda_vmm", "3", TypeError, "fds must be a sequence of ints, found str"),
        ("cuda_vmm", [], BufferError, "expected a file descriptor per chunk for a cuda_vmm View, received none"),
        ("cuda_pool", [3, 4], BufferError, "expected 1 file descriptor for a pool View, received 2"),
        ("cuda_ipc", [3], BufferError, "expected no file descriptor for a cuda_ipc View, received 1"),
    ],
)
def test_native_import_checks_the_fds_it_is_given(kind, fds, error, needle):
    with pytest.raises(error, match=needle):
        _import(kind, fds=fds)


@pytest.mark.parametrize(
    "kind, payload, error, needle",
    [
        ("cuda_nope", {}, ValueError, "kind must be 'cuda_ipc', 'cuda_vmm' or 'cuda_pool', found 'cuda_nope'"),
        ("host", {}, ValueError, "kind must be 'cuda_ipc', 'cuda_vmm' or 'cuda_pool', found 'host'"),
        (b"cuda_ipc", {}, TypeError, "kind must be a str, found bytes"),
        ("cuda_ipc", [("shape", [1])], TypeError, "cuda_ipc payload must be a dict, found list"),
    ],
)
def test_native_import_refuses_an_unknown_kind_or_a_payload_that_is_no_dict(kind, payload, error, needle):
    with pytest.raises(error, match=rf"_ipc_import\(\): {needle}"):
        stridex._stridex._ipc_import(kind, payload, [], None)


@pytest.mark.parametrize(
    "call, error, needle",
    [
        (lambda s: s.device_uuid(1 << 40), ValueError, r"device_uuid\(\): ordinal 1099511627776 does not fit in int32"),
        (lambda s: s.device_uuid("0"), TypeError, r"device_uuid\(\): ordinal must be an int, found str"),
    ],
)
def test_device_uuid_checks_its_argument(call, error, needle):
    with pytest.raises(error, match=needle):
        call(stridex._stridex)


def test_cuda_ipc_tickets_are_claimed_once_in_the_ticket_table(shm):
    # A legacy CUDA IPC ticket needs no fds: the importer claims it in the exporter's shared ticket
    # table (one compare-and-swap) and sends "claimed" without waiting for a reply.
    from stridex.ipc import broker, importer

    v = stridex.view(np.ndarray((2,), dtype=np.uint8, buffer=shm.buf))
    b = broker.broker()
    ticket = b.add(v, None, [], CODECS["cuda_ipc"], False)
    slot, serial = b.claim_words(ticket)
    assert 0 <= slot < stridex._stridex._IpcTicketTable.slots and serial >= 1
    importer.claim_ticket(b.address, 0, ticket, slot, serial)
    assert _pending_soon({"cuda_ipc opened": 1}) == {"cuda_ipc opened": 1}
    with pytest.raises(BufferError, match="unknown ticket: the View was already unpickled once"):
        importer.claim_ticket(b.address, 0, ticket, slot, serial)  # a second load of the same pickle
    importer.release_ticket(b.address, ticket)
    assert _pending_soon({}) == {}
    # The slot is free again; the old serial never claims what comes next in it.
    again = b.add(v, None, [], CODECS["cuda_ipc"], False)
    slot2, serial2 = b.claim_words(again)
    assert serial2 > serial
    with pytest.raises(BufferError, match="unknown ticket"):
        importer.claim_ticket(b.address, 0, again, slot2, serial)
    importer.claim_ticket(b.address, 0, again, slot2, serial2)
    importer.release_ticket(b.address, again)
    assert _pending_soon({}) == {}


def test_a_release_counts_only_from_the_connection_that_opened(shm):
    # A refused second load of a pickle must not release the first importer's ticket.
    import socket

    from stridex.ipc import broker, importer

    v = stridex.view(np.ndarray((2,), dtype=np.uint8, buffer=shm.buf))
    b = broker.broker()
    ticket = b.add(v, None, [], CODECS["cuda_ipc"], False)
    importer.claim_ticket(b.address, 0, ticket, *b.claim_words(ticket))
    assert _pending_soon({"cuda_ipc opened": 1}) == {"cuda_ipc opened": 1}
    with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as other:
        other.connect(b.address)
        other.send(b"R" + ticket)
        other.send(b"O" + ticket)
        assert other.recv(1024).startswith(b"er")  # and the R before it changed nothing
    assert stridex.ipc.pending() == {"cuda_ipc opened": 1}
    importer.release_ticket(b.address, ticket)
    assert _pending_soon({}) == {}


@pytest.mark.filterwarnings("ignore:os.fork\\(\\) was called:RuntimeWarning")  # JAX's; the child uses no JAX
def test_a_forked_child_starts_with_no_broker_and_no_connections(shm):
    # The tickets, the server thread, the connections to exporters and their ticket tables are the
    # parent's: a child that exports or imports makes its own (the fork handlers of broker.py and
    # importer.py). A child that kept the parent's connection would send on the parent's socket.
    import os

    from stridex.ipc import broker, importer

    v = stridex.view(np.ndarray((2,), dtype=np.uint8, buffer=shm.buf))
    b = broker.broker()
    ticket = b.add(v, None, [], CODECS["cuda_ipc"], False)
    importer.claim_ticket(b.address, 0, ticket, *b.claim_words(ticket))  # a connection and a table
    assert b.address in importer._connections and b.address in importer._tables
    pid = os.fork()
    if pid == 0:
        os._exit(0 if broker.current() is None and not importer._connections and not importer._tables else 1)
    _, status = os.waitpid(pid, 0)
    importer.release_ticket(b.address, ticket)
    assert os.waitstatus_to_exitcode(status) == 0
    assert _pending_soon({}) == {}
    assert broker.current() is b and b.address in importer._connections  # the parent's are untouched


def test_a_full_ticket_table_falls_back_to_opening_over_the_socket(shm):
    from stridex.ipc import broker

    v = stridex.view(np.ndarray((2,), dtype=np.uint8, buffer=shm.buf))
    b = broker.broker()
    tickets = [b.add(v, None, [], CODECS["cuda_ipc"], False) for _ in range(stridex._stridex._IpcTicketTable.slots + 1)]
    try:
        assert b.claim_words(tickets[-1])[0] == -1  # no slot left: the importer opens with "O"
        assert sorted(b.claim_words(t)[0] for t in tickets[:-1]) == list(range(len(tickets) - 1))
    finally:
        for t in tickets:
            b.release(t)
    last = b.add(v, None, [], CODECS["cuda_ipc"], False)
    assert b.claim_words(last)[0] >= 0
    # Released, not cleared: clear() is the exit path and ends this process's broker, which
    # every later test in the session (test_ipc_gpu.py's) still needs.
    b.release(last)


@pytest.mark.parametrize(
    "slot, serial, error",
    [
        (-1, 1, "ticket slot must be >= 0"),
        (4096, 1, "outside the table"),
        (2**64, 1, "ticket slot"),
        (0, 0, r"serial must be in \[1, 2\*\*62\)"),
        (0, 2**62, "serial must be"),
        (0, True, "ticket serial"),
    ],
)
def test_ticket_table_checks_slots_and_serials(slot, serial, error):
    import os

    fd = os.memfd_create("t")
    try:
        os.ftruncate(fd, stridex._stridex._IpcTicketTable.nbytes)
        table = stridex._stridex._IpcTicketTable(fd)
        with pytest.raises((ValueError, TypeError), match=error):
            table.claim(slot, serial)
    finally:
        os.close(fd)


def test_ticket_table_refuses_a_short_file():
    import os

    fd = os.memfd_create("t")
    try:
        os.ftruncate(fd, 100)
        with pytest.raises(ValueError, match="ticket table file has 100 bytes"):
            stridex._stridex._IpcTicketTable(fd)
    finally:
        os.close(fd)
