"""The hand-over race sanitizer without a GPU (docs/sanitizer.md): the log's bookkeeping, each
report class, warnings and raise mode, the switch (environment variable and context manager),
threads and leaks.

CUDA memory is faked: __cuda_array_interface__ pointers are taken as cuda:0 memory and orderings
are recorded (stridex_testing), and the sanitizer's "may work on this stream still be running?"
is answered by the test (stridex._stridex._sanitizer_pending_override) instead of the driver.
test_sanitizer_gpu.py seeds the same races on a GPU.
"""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import threading
import warnings
import weakref

import numpy as np
import pytest
import stridex_testing as _testing
from quirky_producers import CAI

import stridex
from stridex import _stridex

PRODUCER = 7  # the producer's stream handle (a CAI's 'stream' key)
# STRIDEX_SANITIZE=streams (the whole suite run with the sanitizer on) turns it on from the start.
ENV_ON = _stridex._sanitizer_state()[0] and os.environ.get("STRIDEX_SANITIZE", "") not in ("", "0")
needs_off = pytest.mark.skipif(ENV_ON, reason="STRIDEX_SANITIZE turned the sanitizer on for the whole run")
SIDE = 11  # a consumer's side stream


@pytest.fixture
def pending():
    """A fake GPU: CAI pointers are cuda:0 memory, orderings are recorded, and the streams in the
    returned set are the ones with pending work. The sanitizer's log and reports start empty."""
    busy: set[int] = set()
    _testing.fake_cuda_pointers(True)
    _testing.capture_orders(True)
    _stridex._sanitizer_pending_override(lambda stream, device: stream in busy)
    _stridex._sanitizer_reset()
    yield busy
    _stridex._sanitizer_pending_override(None)
    _stridex._sanitizer_reset()
    _testing.capture_orders(False)
    _testing.fake_cuda_pointers(False)


def producer(array, stream=PRODUCER):
    return CAI(array, stream=stream)


def races(record):
    return [w for w in record if issubclass(w.category, stridex.StreamRaceWarning)]


@needs_off
def test_off_by_default_logs_nothing(pending):
    assert _stridex._sanitizer_state()[:2] == (False, False)
    pending.add(PRODUCER)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        stridex.view(producer(np.zeros(4)), stream=stridex.NO_SYNC)
    assert races(record) == [] and _stridex._sanitizer_log() == []


def test_no_sync_while_producer_pending_is_reported(pending):
    a = np.zeros(16, np.float32)
    pending.add(PRODUCER)
    with stridex.sanitize(), pytest.warns(stridex.StreamRaceWarning) as record:
        stridex.view(producer(a), stream=stridex.NO_SYNC)
    (w,) = races(record)
    text = str(w.message)
    assert text.startswith("stridex sanitizer: no_sync: handed over with stream=NO_SYNC")
    assert "stream 0x7 still has pending work" in text
    assert "producer quirky_producers.CAI" in text and "cuda:0" in text
    assert f"[{hex(a.ctypes.data)}, {hex(a.ctypes.data + 64)}) (64 bytes)" in text
    assert "test_sanitizer.py" in text and "test_no_sync_while_producer_pending_is_reported" in text
    assert stridex.sanitizer_counts()["no_sync"] == 1


def test_no_sync_silent_when_ordered_or_idle(pending):
    a = np.zeros(4)
    with stridex.sanitize(), warnings.catch_warnings():
        warnings.simplefilter("error", stridex.StreamRaceWarning)
        stridex.view(producer(a), stream=stridex.NO_SYNC)  # nothing pending
        pending.add(PRODUCER)
        stridex.view(producer(a), stream=SIDE)  # ordered: SIDE waits for PRODUCER
        stridex.view(producer(a))  # ordered on the legacy default stream
    assert sum(stridex.sanitizer_counts().values()) == 0


def test_raise_mode_raises_at_the_hand_over(pending):
    pending.add(PRODUCER)
    with stridex.sanitize(raise_=True):
        with pytest.raises(stridex.StreamRaceError, match="no_sync: handed over with stream=NO_SYNC"):
            stridex.view(producer(np.zeros(4)), stream=stridex.NO_SYNC)
    assert issubclass(stridex.StreamRaceError, RuntimeError)
    assert issubclass(stridex.StreamRaceWarning, RuntimeWarning)


def test_view_exported_with_no_sync_while_pending(pending):
    v = stridex.view(producer(np.zeros(4)), stream=SIDE)
    pending.add(SIDE)
    with (
        stridex.sanitize(),
        pytest.warns(stridex.StreamRaceWarning, match=r"no ordering \(stream=-1\) while the View's stream 0xb"),
    ):
        v.__dlpack__(stream=-1)
    pending.clear()
    del v  # nothing pending now: released without a report (STRIDEX_SANITIZE may keep it on)


def test_reuse_after_release_names_both_hand_overs(pending):
    memory = np.zeros(8, np.float32)
    with stridex.sanitize():
        first = producer(memory)
        v = stridex.view(first, stream=SIDE)  # the earlier consumer reads on SIDE
        del v, first
        gc.collect()
        pending.add(SIDE)  # ... and is still reading
        second = producer(memory[2:6])  # the block handed out again, to another owner
        with pytest.warns(stridex.StreamRaceWarning) as record:
            stridex.view(second)
    (w,) = races(record)
    text = str(w.message)
    assert text.startswith("stridex sanitizer: reuse_after_release: memory handed over again")
    assert "earlier hand-over (owner released): stridex.view" in text and "consumer on stream 0xb" in text
    assert "this hand-over: stridex.view" in text and "consumer on legacy default stream" in text
    assert text.count("test_reuse_after_release_names_both_hand_overs") == 2  # both stacks


def test_reuse_silent_when_owner_alive_idle_or_same_stream(pending):
    memory = np.zeros(8, np.float32)
    with stridex.sanitize(), warnings.catch_warnings():
        warnings.simplefilter("error", stridex.StreamRaceWarning)
        keep = []  # the Views live on: their releases are not what this test is about
        first = producer(memory)
        keep.append(stridex.view(first, stream=SIDE))
        pending.add(SIDE)
        keep.append(stridex.view(producer(memory)))  # the first owner is alive: its memory is not reused
        keep.clear()
        del first
        gc.collect()
        keep.append(stridex.view(producer(memory), stream=SIDE))  # same stream: ordered after the reads
        pending.clear()
        keep.append(stridex.view(producer(memory)))  # the reads are done
    assert stridex.sanitizer_counts()["reuse_after_release"] == 0


def test_release_with_pending_consumer_work(pending):
    owner = producer(np.zeros(4))
    with stridex.sanitize():
        v = stridex.view(owner, stream=SIDE)
        del owner  # the View holds the last reference
        pending.add(SIDE)
        with pytest.warns(stridex.StreamRaceWarning) as record:
            del v
    (w,) = races(record)
    text = str(w.message)
    assert text.startswith("stridex sanitizer: release_pending: View released with the last reference")
    assert "producer's allocator (on stream 0x7) was given no event" in text
    assert "hand-over: stridex.view" in text and "release: View released" in text


def test_a_use_on_the_views_stream_keeps_the_producers_stream(pending):
    # As torch.from_dlpack(v) on the consumer's stream does after stridex.view(x, stream=side): the
    # use names the View's stream as its producer. The log keeps the import's producer stream, so
    # both races stay visible (found on a GPU: the use hid them).
    memory = np.zeros(8, np.float32)
    with stridex.sanitize():
        owner = producer(memory)
        v = stridex.view(owner, stream=SIDE)
        del owner
        # The consumer's use (its capsule dropped at once), through a View of no stream of its own:
        # an export on a stream asks the driver about it, and SIDE is made up (a GPU machine's
        # driver would be handed a bogus stream handle).
        v._with_stream(-1).__dlpack__(stream=SIDE)
        ((_, _, _, door, producer_stream, consumer_stream, _, _),) = _stridex._sanitizer_log()
        assert (door, producer_stream, consumer_stream) == ("stridex.view", PRODUCER, SIDE)
        pending.add(SIDE)
        with pytest.warns(stridex.StreamRaceWarning, match="release_pending: View released") as record:
            del v
        assert "producer's allocator (on stream 0x7)" in str(races(record)[0].message)
        with pytest.warns(stridex.StreamRaceWarning, match="reuse_after_release: memory handed over again"):
            stridex.view(producer(memory))


def test_release_silent_when_owner_kept_idle_or_same_stream(pending):
    with stridex.sanitize(), warnings.catch_warnings():
        warnings.simplefilter("error", stridex.StreamRaceWarning)
        owner = producer(np.zeros(4))
        v = stridex.view(owner, stream=SIDE)
        pending.add(SIDE)
        del v  # the owner lives on
        v = stridex.view(producer(np.zeros(4)), stream=PRODUCER)  # consumer = producer's stream
        pending.add(PRODUCER)
        del v
        pending.clear()
        v = stridex.view(producer(np.zeros(4)), stream=SIDE)
        del v  # nothing pending
    assert stridex.sanitizer_counts()["release_pending"] == 0


def test_release_report_in_raise_mode_is_a_warning(pending):
    with stridex.sanitize(raise_=True):
        v = stridex.view(producer(np.zeros(4)), stream=SIDE)
        pending.add(SIDE)
        with pytest.warns(stridex.StreamRaceWarning, match="release_pending"):
            del v


def test_ipc_view_used_unordered_before_its_event(pending):
    with stridex.sanitize():
        # As stridex.ipc's import makes it: ready after the producer's event, which no stream of
        # this process has waited for yet (a stand-in event that only records its waiters).
        v = _stridex._sanitizer_mark_ipc(stridex.view(producer(np.zeros(4)), stream=stridex.NO_SYNC), None)
        assert v.pending_event is True and v._pending_event_waited() is False
        with pytest.warns(stridex.StreamRaceWarning) as record:
            stridex.view(v, stream=stridex.NO_SYNC)
        (ipc,) = [str(w.message) for w in races(record) if "ipc_unwaited" in str(w.message)]
        assert ipc.startswith("stridex sanitizer: ipc_unwaited: IPC View used before its producer's event")
        assert "IPC import: stridex.ipc import" in ipc and "this use: stridex.view" in ipc
        with warnings.catch_warnings():
            warnings.simplefilter("error", stridex.StreamRaceWarning)
            stridex.view(v, stream=SIDE)  # ordered: SIDE waits for the producer's event
            assert v._pending_event_waited(SIDE) is True
            stridex.view(v, stream=stridex.NO_SYNC)  # a stream of this process waited: ordered after it
        del v


def test_log_keeps_one_entry_per_range_and_owner(pending):
    memory = np.zeros(64, np.uint8)
    owner = producer(memory)
    with stridex.sanitize():
        for _ in range(10):
            stridex.view(owner, stream=SIDE)
        stridex.view(producer(memory[:16]), stream=SIDE)
    log = _stridex._sanitizer_log()
    assert len(log) == 2
    spans = sorted((hi - lo) for _, lo, hi, *_ in log)
    assert spans == [16, 64]
    device, lo, hi, door, producer_stream, consumer_stream, alive, ipc = max(log, key=lambda e: e[2] - e[1])
    assert (device, door, producer_stream, consumer_stream, alive, ipc) == (
        "cuda:0",
        "stridex.view",
        PRODUCER,
        SIDE,
        True,
        False,
    )
    assert lo == memory.ctypes.data and hi == lo + 64


def test_log_is_bounded_lru_and_prunes_dead_idle_owners(pending):
    previous = _stridex._sanitizer_set_cap(8)
    try:
        keep = [producer(np.zeros(4)) for _ in range(20)]
        with stridex.sanitize():
            for p in keep:
                stridex.view(p, stream=SIDE)
        log = _stridex._sanitizer_log()
        assert len(log) <= 8
        newest = {p.array.ctypes.data for p in keep[-6:]}
        assert newest <= {lo for _, lo, *_ in log}  # the least recently used went first
    finally:
        _stridex._sanitizer_set_cap(previous)
    with pytest.raises(ValueError, match="at least 4, found 1"):
        _stridex._sanitizer_set_cap(1)


class StreamObject:
    """A caller's stream object (the __cuda_stream__ protocol)."""

    def __init__(self, handle):
        self.handle = handle

    def __cuda_stream__(self):
        return (0, self.handle)


def test_stream_objects_are_held_while_named_never_weakly_referenced(pending):
    # torch.cuda.Stream of torch 2.9-2.11 leaves weak references dangling when it dies
    # (pytorch/pytorch#183403): releasing one crashed the process at exit. The log holds the
    # stream objects it may query later instead, while an entry names their stream.
    memory = np.zeros(8, np.float32)
    side = StreamObject(SIDE)
    ref = weakref.ref(side)
    with stridex.sanitize():
        owner = producer(memory)
        v = stridex.view(owner, stream=side)
        assert weakref.getweakrefcount(side) == 1  # the test's own
        del v, owner, side
        gc.collect()
        assert ref() is not None  # held: its handle may still be queried
    _stridex._sanitizer_reset()
    assert ref() is None  # the log forgot it, and let it go


def test_stream_objects_no_entry_names_are_let_go(pending):
    previous = _stridex._sanitizer_set_cap(4)
    try:
        memory = [np.zeros(4, np.float32) for _ in range(100)]
        refs = []
        with stridex.sanitize():
            for i, m in enumerate(memory):
                s = StreamObject(1000 + i)
                refs.append(weakref.ref(s))
                stridex.view(producer(m), stream=s)
                del s
                # Held at every step, the steps whose call pruned the others included.
                assert refs[-1]() is not None, f"hand-over {i}: its own stream object was let go"
        alive = [i for i, r in enumerate(refs) if r() is not None]
        assert len(alive) <= 65, len(alive)  # pruned once more than 64 are held
        named = {consumer - 1000 for *_, consumer, _alive, _ipc in _stridex._sanitizer_log()}
        assert named and named <= set(alive)  # those the log still names are held
    finally:
        _stridex._sanitizer_set_cap(previous)
        _stridex._sanitizer_reset()


def test_log_keeps_no_owner_alive(pending):
    owner = producer(np.zeros(4))
    ref = weakref.ref(owner)
    with stridex.sanitize():
        v = stridex.view(owner, stream=SIDE)
        del v, owner
        gc.collect()
        assert ref() is None
        ((*_, alive, _ipc),) = _stridex._sanitizer_log()
        assert alive is False


@needs_off
def test_contexts_nest_and_count():
    assert _stridex._sanitizer_state()[:2] == (False, False)
    with stridex.sanitize():
        assert _stridex._sanitizer_state()[:2] == (True, False)
        with stridex.sanitize(raise_=True):
            assert _stridex._sanitizer_state()[:2] == (True, True)
        assert _stridex._sanitizer_state()[:2] == (True, False)
    assert _stridex._sanitizer_state()[:2] == (False, False)
    with pytest.raises(ValueError, match="exit without a matching enter"):
        _stridex._sanitizer_exit(False)


@pytest.mark.filterwarnings("ignore::stridex.StreamRaceWarning")  # catch_warnings is not thread-safe
def test_eight_threads_hammering_hand_overs(pending):
    pending.add(PRODUCER)
    errors: list[BaseException] = []
    memory = [np.zeros(32, np.float32) for _ in range(8)]

    def work(i):
        try:
            with stridex.sanitize():
                for k in range(200):
                    owner = producer(memory[i][k % 8 :])
                    v = stridex.view(owner, stream=stridex.NO_SYNC if k % 4 == 0 else SIDE + i)
                    stridex.view(v, stream=SIDE)
                    del v, owner
        except BaseException as e:  # noqa: BLE001 (reported below)
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert stridex.sanitizer_counts()["no_sync"] == 8 * 50
    assert _stridex._sanitizer_state()[0] is ENV_ON


def run_python(code, env_value):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)  # stridex_testing, quirky_producers
    env.pop("STRIDEX_SANITIZE", None)
    if env_value is not None:
        env["STRIDEX_SANITIZE"] = env_value
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)


def test_environment_variable_and_summary_at_exit():
    code = "import stridex; from stridex import _stridex; print(_stridex._sanitizer_state()[:2])"
    on = run_python(code, "streams")
    assert on.returncode == 0, on.stderr
    assert on.stdout.strip() == "(True, False)"
    assert "stridex sanitizer" not in on.stderr  # no report: nothing to say at exit
    raising = run_python(code, "streams,raise")
    assert raising.stdout.strip() == "(True, True)"
    off = run_python(code, None)
    assert off.stdout.strip() == "(False, False)" and "stridex sanitizer" not in off.stderr
    bad = run_python(code, "stream")
    assert bad.returncode != 0
    assert "STRIDEX_SANITIZE must be 'streams' or 'streams,raise' (or empty/0: off), found 'stream'" in bad.stderr


def test_summary_counts_reports():
    code = (
        "import numpy as np, warnings, stridex, stridex_testing as t\n"
        "from stridex import _stridex\n"
        "from quirky_producers import CAI\n"
        "t.fake_cuda_pointers(True); t.capture_orders(True)\n"
        "_stridex._sanitizer_pending_override(lambda s, d: True)\n"
        "warnings.simplefilter('ignore')\n"
        "stridex.view(CAI(np.zeros(4), stream=7), stream=stridex.NO_SYNC)\n"
    )
    done = run_python(code, "streams")
    assert done.returncode == 0, done.stderr
    assert (
        "stridex sanitizer: 1 report(s), no_sync 1, reuse_after_release 0, release_pending 0, ipc_unwaited 0"
        in done.stderr
    )
