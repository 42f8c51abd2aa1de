"""stridex.refit on the CPU (docs/refit.md): trainer processes publish host weights, this process
subscribes. Host buckets and shared regions, resharding with every element checked, version
atomicity under concurrent readers, the fence before an in-place update, killed subscribers and
publishers, and leaks over 1,000 refits. GPU variants: test_refit_gpu.py."""

from __future__ import annotations

import multiprocessing as mp
import os
import pickle
import signal
import threading
import time

import numpy as np
import pytest

import stridex
import stridex.ipc
from stridex import ShardedView, ShardLayout
from stridex.refit import Publisher, PublisherGone, RefitError, Slots, Subscriber, VersionGone
from stridex.refit import wire

import ipc_harness
import refit_worker

pytestmark = pytest.mark.skipif(not hasattr(os, "memfd_create"), reason="stridex.ipc needs Linux")

SHAPES = refit_worker.SHAPES


def trainers(mode: str, ranks: int) -> list[ipc_harness.Worker]:
    return [ipc_harness.Worker(refit_worker.serve, mode, r, ranks) for r in range(ranks)]


def stop(workers: list[ipc_harness.Worker]) -> None:
    for w in workers:
        w.stop()
    for w in workers:
        w.process.join(30)


def columns(k: int) -> dict[str, ShardedView]:
    """Destinations in another sharding: columns (the last dimension) over k host shards."""
    out = {}
    for name, (shape, dtype) in SHAPES.items():
        grid = [1] * (len(shape) - 1) + [k]
        layout = ShardLayout.grid(shape, grid, ["cpu"] * k)
        arrays = [np.full([s.stop - s.start for s in i], -1, dtype) for i, _ in layout.shards]
        out[name] = ShardedView.from_arrays(arrays, [[s.start for s in i] for i, _ in layout.shards], shape)
    return out


def whole() -> dict[str, np.ndarray]:
    return {name: np.full(shape, -1, dtype) for name, (shape, dtype) in SHAPES.items()}


def values(dest) -> list[np.ndarray]:
    out = []
    for d in dest.values():
        out += [a for _, a in d.to_numpy()] if isinstance(d, ShardedView) else [np.asarray(d)]
    return out


def assert_all(dest, version: int) -> None:
    for a in values(dest):
        assert (a == version).all(), f"expected every element == {version}, found {np.unique(a)}"


@pytest.mark.parametrize("mode", ["private", "shared"])
def test_rows_to_columns_every_element(mode):
    ws = trainers(mode, 2)
    try:
        addresses = [w("address") for w in ws]
        for w in ws:
            w("publish", 1)
        with Subscriber(addresses) as sub:
            dest = columns(3)
            assert sub.pull(1, into=dest) == 1
            assert_all(dest, 1)
            for w in ws:
                w("publish", 2)
            full = whole()
            assert sub.pull(sub.wait(after=1), into=full) == 2
            assert_all(full, 2)
            assert sub.pull(2, into=dest) == 2
            assert_all(dest, 2)
            stats = [w("stats") for w in ws]
            for s in stats:
                assert s["epochs"] == 1 and s["exports"] == s["regions"]  # shared once, for this subscriber
                if mode == "private":
                    assert s["regions"] == 1 and s["bucket_bytes"] > 0  # one bucket, whatever the tensor count
                else:
                    assert s["bucket_bytes"] == 0  # shared where the weights live
            assert sub.stats["plans"] == 2  # one per destination layout, reused
    finally:
        stop(ws)


def test_hold_lends_the_publishers_memory_and_fences_the_update():
    (w,) = trainers("shared", 1)
    try:
        w("publish", 5)
        with Subscriber(w("address")) as sub:
            result = {}

            def update():
                result["waited"] = w("begin_update")

            with sub.hold() as (version, weights):
                assert version == 5
                for name, sv in weights.items():
                    assert sv.shape == SHAPES[name][0]
                    for _, a in sv.to_numpy():
                        assert (a == 5).all() and not a.flags.writeable
                t = threading.Thread(target=update)
                t.start()
                time.sleep(0.5)
                assert t.is_alive(), "begin_update returned while a pull of the version was open"
            t.join(10)
            assert result["waited"] >= 0.4
            with pytest.raises(VersionGone):
                sub.pull(5, into=whole())  # closed for the update: nothing is copied
    finally:
        stop([w])


@pytest.mark.parametrize("mode", ["private", "shared"])
def test_concurrent_readers_never_see_a_mix(mode):
    ws = trainers(mode, 2)
    try:
        addresses = [w("address") for w in ws]
        for w in ws:
            w("publish", 1)
        sub = Subscriber(addresses)
        slots = Slots(columns(2), whole())  # two sets of different shardings: a reader sees one whole
        sub.pull(1, into=slots)
        stop_flag = threading.Event()
        reads, errors = [0], []

        def reader():
            while not stop_flag.is_set():
                with slots.read() as (version, weights):
                    for a in values(weights):
                        if not (a == version).all():
                            errors.append((version, np.unique(a)))
                reads[0] += 1

        readers = [threading.Thread(target=reader) for _ in range(3)]
        for t in readers:
            t.start()

        def train():  # the trainers step together, as ranks of one job do
            for v in range(2, 202):
                for w in ws:
                    w("publish", v)
                time.sleep(0.003)

        trainer = threading.Thread(target=train)
        trainer.start()
        seen = {1}
        deadline = time.monotonic() + 20
        last = 1
        while last < 201 and time.monotonic() < deadline:
            try:
                last = sub.pull(sub.wait(after=last, timeout=10), into=slots)
            except VersionGone:
                continue  # a trainer moved on between wait and open: nothing copied
            seen.add(last)
            # a plain pull into one destination set is all of one version too
            dest = whole()
            try:
                v = sub.pull(into=dest)
            except VersionGone:
                continue
            assert_all(dest, v)
        stop_flag.set()
        for t in readers:
            t.join(10)
        trainer.join(60)
        assert not errors, f"readers saw mixed versions: {errors[:3]}"
        assert reads[0] > 50 and len(seen) > 5
        sub.close()
    finally:
        stop(ws)


def test_subscriber_killed_mid_pull_leaves_the_others_healthy():
    (w,) = trainers("shared", 1)
    try:
        address = w("address")
        w("publish", 1)
        ctx = mp.get_context("spawn")
        held = ctx.Queue()
        victim = ctx.Process(target=refit_worker.hold_open, args=(address, held), daemon=True)
        victim.start()
        assert held.get(timeout=60) == 1
        with Subscriber(address) as other:
            assert w("stats")["open_pulls"] == 1
            os.kill(victim.pid, signal.SIGKILL)
            victim.join(10)
            t0 = time.monotonic()
            assert w("begin_update") < 5  # the dead subscriber's open pull is dropped, not waited for
            assert time.monotonic() - t0 < 10
            w("publish", 2)
            dest = columns(2)
            assert other.pull(2, into=dest) == 2
            assert_all(dest, 2)
            stats = w("stats")
            assert stats["subscribers"] == 1 and stats["open_pulls"] == 0
            assert stats["pending"] == {}
    finally:
        stop([w])


def test_publisher_killed_is_publisher_gone_never_a_hang():
    (w,) = trainers("private", 1)
    try:
        w("publish", 1)
        sub = Subscriber(w("address"), timeout=20)
        dest = whole()
        sub.pull(1, into=dest)
        waiting = {}

        def wait_next():
            try:
                sub2.wait(after=1)
            except PublisherGone as e:
                waiting["error"] = e

        sub2 = Subscriber(w("address"), timeout=20)
        t = threading.Thread(target=wait_next)
        t.start()
        time.sleep(0.3)
        os.kill(w.process.pid, signal.SIGKILL)
        w.process.join(10)
        t0 = time.monotonic()
        with pytest.raises(PublisherGone, match="went away"):
            sub.pull(1, into=dest)
        with pytest.raises(PublisherGone):
            sub.pull(1, into=dest)  # and again, at once
        t.join(10)
        assert isinstance(waiting.get("error"), PublisherGone)
        assert time.monotonic() - t0 < 5
        assert issubclass(PublisherGone, RefitError)
        sub.close()
        sub2.close()
    finally:
        if w.process.is_alive():
            stop([w])


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _maps() -> int:
    with open("/proc/self/maps") as f:
        return sum(1 for _ in f)


@pytest.mark.parametrize("mode", ["private", "shared"])
def test_no_leak_over_1000_refits(mode):
    (w,) = trainers(mode, 1)
    try:
        w("publish", 1)
        with Subscriber(w("address")) as sub:
            dest = columns(2)
            for v in range(2, 12):  # warm up: mappings, plans
                w("publish", v)
                sub.pull(v, into=dest)
            before = (_fds(), _maps(), w("stats"), stridex.ipc.pending())
            for v in range(12, 1012):
                w("publish", v)
                sub.pull(v, into=dest)
            assert_all(dest, 1011)
            after = (_fds(), _maps(), w("stats"), stridex.ipc.pending())
            assert after[0] == before[0], "file descriptors leaked in the subscriber"
            assert after[1] == before[1], "mappings leaked in the subscriber"
            assert after[3] == before[3] == {}
            b, a = before[2], after[2]
            assert a["fds"] == b["fds"], "file descriptors leaked in the publisher"
            assert (a["exports"], a["epochs"], a["regions"], a["bucket_bytes"]) == (
                b["exports"],
                b["epochs"],
                b["regions"],
                b["bucket_bytes"],
            ), "something was shared anew after the first publish"
            assert a["pending"] == b["pending"]
            assert sub.stats["plans"] == 1
    finally:
        stop([w])


def test_in_process_publisher_and_errors():
    pub = Publisher()
    w = {"a": np.arange(12, dtype=np.float32).reshape(3, 4)}
    pub.publish(w, 3)
    with pytest.raises(ValueError, match="versions increase"):
        pub.publish(w, 3)
    with pytest.raises(TypeError, match="version must be an int"):
        pub.publish(w, "4")
    with Subscriber(pub.address) as sub:
        with pytest.raises(KeyError, match="no publisher publishes a weight named 'b'"):
            sub.pull(3, into={"b": np.zeros(3)})
        with pytest.raises(RefitError, match=r"\(3, 4\) float32 at the publishers"):
            sub.pull(3, into={"a": np.zeros((4, 3), np.float32)})
        with pytest.raises(VersionGone):
            sub.pull(7, into={"a": np.zeros((3, 4), np.float32)})
        out = np.zeros((3, 4), np.float32)
        sub.pull(3, into={"a": out})
        assert (out == w["a"]).all()
        # weights that moved are shared anew (a new epoch), and the subscriber re-attaches by itself
        w2 = {"a": w["a"] + 1}
        pub.publish(w2, 4)
        sub.pull(4, into={"a": out})
        assert (out == w2["a"]).all() and pub.stats()["epochs"] == 2
    pub.close()


def test_messages_are_plain_data():
    msg = {"op": "open", "version": 3, "blob": b"\x00\x01", "list": [1, 2.5, None, True, ("a", {"b": 1})]}
    assert wire.decode(wire.encode(msg)[8:]) == msg
    evil = pickle.dumps({"op": os.system})  # names a function: refused, never resolved
    with pytest.raises(pickle.UnpicklingError, match="only plain data"):
        wire.decode(evil)
    with pytest.raises(pickle.UnpicklingError, match="is a dict"):
        wire.decode(pickle.dumps([1, 2]))


def test_no_publisher_is_publisher_gone():
    with pytest.raises(PublisherGone, match="no refit publisher"):
        Subscriber("stridex-refit-nobody-here", timeout=0.3)


def test_the_fence_holds_an_update_while_a_pull_is_open():
    """A subscriber holds version 5 open (zero-copy, the trainer's live memory) while the trainer
    tries to update in place: the update waits for the hold, and every read inside the hold sees
    version 5 only. Without the fence (begin_update), the trainer's fill would show here."""
    (w,) = trainers("shared", 1)
    try:
        w("publish", 5)
        with Subscriber(w("address")) as sub:
            published = {}

            def step():
                published["stats"] = w("publish", 6)  # updating(): fill in place, then publish

            t = threading.Thread(target=step)
            with sub.hold() as (version, weights):
                assert version == 5
                t.start()
                deadline = time.monotonic() + 0.6
                reads = 0
                while time.monotonic() < deadline:  # the trainer's fill, were it not held, lands here
                    for sv in weights.values():
                        for _, a in sv.to_numpy():
                            assert (a == 5).all(), f"an update landed during an open pull: {np.unique(a)}"
                    reads += 1
                assert t.is_alive() and "stats" not in published, "the update did not wait for the open pull"
                assert reads > 10
            t.join(30)
            assert published["stats"]["version"] == 6
            dest = columns(2)
            assert sub.pull(6, into=dest) == 6
            assert_all(dest, 6)
    finally:
        stop([w])


def test_slots_readers_never_wait_for_a_pull(monkeypatch):
    """A pull that takes long (its copies held here for 0.5 s) does not hold readers back: they read
    the front set, all of the previous version, while the back set is refilled."""
    from stridex.refit import plan as plan_module

    (w,) = trainers("shared", 1)
    try:
        w("publish", 1)
        with Subscriber(w("address")) as sub:
            slots = Slots(whole(), whole())
            sub.pull(1, into=slots)
            w("publish", 2)
            run, started = plan_module.Plan.run, threading.Event()

            def slow_run(self, stream):
                started.set()
                time.sleep(0.5)
                run(self, stream)

            monkeypatch.setattr(plan_module.Plan, "run", slow_run)
            puller = threading.Thread(target=sub.pull, args=(2,), kwargs={"into": slots})
            puller.start()
            assert started.wait(10)
            seen = []
            while puller.is_alive():
                t0 = time.monotonic()
                with slots.read() as (version, weights):
                    assert_all(weights, version)
                    seen.append((version, time.monotonic() - t0))
                time.sleep(0.01)
            puller.join()
            assert len(seen) > 5 and {v for v, _ in seen} <= {1, 2}
            assert max(dt for _, dt in seen) < 0.2, "a reader waited for the pull"
            with slots.read() as (version, weights):
                assert version == 2
                assert_all(weights, 2)
    finally:
        stop([w])


def test_one_copy_call_per_pull_and_no_per_tensor_work_after_the_first(monkeypatch):
    from stridex import _stridex
    from stridex.refit import plan as plan_module
    from stridex.refit import subscriber as subscriber_module

    ws = trainers("private", 2)
    try:
        for w in ws:
            w("publish", 1)
        with Subscriber([w("address") for w in ws]) as sub:
            dest = columns(3)
            sub.pull(1, into=dest)
            calls, made, named = [0], [0], [0]
            copy, make, named_fn = _stridex._copy_pieces, plan_module.make, subscriber_module.named

            def counting_copy(*a, **k):
                calls[0] += 1
                return copy(*a, **k)

            def counting_make(*a, **k):
                made[0] += 1
                return make(*a, **k)

            def counting_named(*a, **k):
                named[0] += 1
                return named_fn(*a, **k)

            monkeypatch.setattr(_stridex, "_copy_pieces", counting_copy)
            monkeypatch.setattr(plan_module, "make", counting_make)
            monkeypatch.setattr(subscriber_module, "named", counting_named)
            for v in range(2, 7):
                for w in ws:
                    w("publish", v)
                sub.pull(v, into=dest)
                assert_all(dest, v)
            assert calls[0] == 5, f"{calls[0]} copy-engine calls for 5 pulls"
            assert made[0] == 0 and named[0] == 0, "a pull into the same destinations redid per-tensor work"
    finally:
        stop(ws)


def test_close_releases_every_mapping_on_both_sides():
    """A subscriber's close() drops every mapping of the publishers' memory at once (no garbage
    collection needed), and neither side has a View pending in stridex.ipc afterwards."""
    import gc

    ws = trainers("shared", 2)
    gc.disable()
    try:
        for w in ws:
            w("publish", 1)
        before = _maps()
        sub = Subscriber([w("address") for w in ws])
        dest = columns(2)
        sub.pull(1, into=dest)
        with sub.hold() as (_, held):
            assert len(held) == len(SHAPES)
        del held
        assert _maps() > before
        sub.close()
        assert _maps() == before, "close() left mappings of the publishers' memory"
        assert stridex.ipc.pending() == {}
        for w in ws:
            assert w("stats")["pending"] == {}
        t0 = time.monotonic()
        stop(ws)
        assert time.monotonic() - t0 < 10 and all(w.process.exitcode == 0 for w in ws)
    finally:
        gc.enable()
        stop([w for w in ws if w.process.is_alive()])


def test_unshareable_memory_is_found_at_publish_and_bucketed(monkeypatch):
    from stridex.refit import regions as regions_module

    def refuse(region):
        raise BufferError("simulated: the driver refuses this allocation's handle")

    monkeypatch.setattr(regions_module, "_shareable", {})
    monkeypatch.setattr(regions_module, "export_check", refuse)
    a = np.asarray(stridex.ipc.shared_empty((3, 4), "float32"))  # shareable, were it not refused
    a[...] = 7
    with Publisher() as pub:
        pub.publish({"a": a}, 1)
        s = pub.stats()
        assert s["regions"] == 1 and s["bucket_bytes"] > 0  # packed, decided at publish
        with Subscriber(pub.address) as sub:
            out = np.zeros((3, 4), np.float32)
            assert sub.pull(1, into={"a": out}) == 1 and (out == 7).all()


def test_a_failed_attach_is_a_clear_error_never_a_hang(monkeypatch):
    """Should the export still fail at a subscriber's attach, the subscriber hears why at once (no
    hang, nothing left mapped), and the next publish packs that memory into a bucket."""
    import stridex.ipc as ipc

    a = np.asarray(stridex.ipc.shared_empty((3, 4), "float32"))
    a[...] = 1
    with Publisher() as pub:
        pub.publish({"a": a}, 1)
        assert pub.stats()["bucket_bytes"] == 0
        reduce = ipc._reduce

        def refuse(view, in_flight=False):
            raise BufferError("simulated: cuIpcGetMemHandle failed")

        monkeypatch.setattr(ipc, "_reduce", refuse)
        t0 = time.monotonic()
        with pytest.raises(RefitError, match=r"cannot be shared: simulated.*next publish packs"):
            Subscriber(pub.address, timeout=30)
        assert time.monotonic() - t0 < 5
        monkeypatch.setattr(ipc, "_reduce", reduce)
        a[...] = 2
        pub.publish({"a": a}, 2)
        s = pub.stats()
        assert s["epochs"] == 2 and s["bucket_bytes"] > 0
        with Subscriber(pub.address) as sub:
            out = np.zeros((3, 4), np.float32)
            assert sub.pull(2, into={"a": out}) == 2 and (out == 2).all()


def test_close_joins_the_publishers_threads():
    before = {t.ident for t in threading.enumerate()}
    pub = Publisher()
    pub.publish({"a": np.ones(4, np.float32)}, 1)
    subs = [Subscriber(pub.address) for _ in range(3)]
    waiting = threading.Thread(target=lambda: pytest.raises(RefitError, subs[0].wait, 1))
    waiting.start()  # a server thread inside a `wait`
    time.sleep(0.2)
    t0 = time.monotonic()
    pub.close()
    assert time.monotonic() - t0 < 3
    left = [t.name for t in threading.enumerate() if t.ident not in before and t.name.startswith("stridex-refit")]
    assert left == [], f"threads still running after close(): {left}"
    waiting.join(10)
    for s in subs:
        s.close()
