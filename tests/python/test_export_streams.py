"""Stream order on export (GPU machine): a consumer's stream is ordered after the stream the view
is ready on with an event, never a host block; -1 orders nothing; None means the legacy default
stream; CAI hands the pending stream to the consumer (docs/export.md, "Streams")."""

from __future__ import annotations

import ctypes
import time

import numpy as np
import pytest

import stridex
from export_support import (
    CurrentWorkStream,
    DLManagedTensorVersioned,
    DLTensor,
    DLTensorFromPyObject,
    FromPyObject,
    exchange_api,
    optional,
    requires_cuda,
)

torch = optional("torch")
cp = optional("cupy")

pytestmark = [
    requires_cuda,
    pytest.mark.skipif(
        torch is None or not torch.cuda.is_available(), reason="needs torch with CUDA (its sleep kernel makes the race)"
    ),
]

N = 1 << 20
SLEEP_CYCLES = int(4e8)  # ~0.2 s at 2 GHz: long enough that a missing order is a certain race


def pending_ones(stream):
    """A tensor of zeros that becomes ones on `stream` after a long sleep, and its View (ready on
    `stream`, as an importer would have left it)."""
    x = torch.zeros(N, device="cuda")
    torch.cuda.synchronize()
    with torch.cuda.stream(stream):
        torch.cuda._sleep(SLEEP_CYCLES)
        x.fill_(1.0)
    v = stridex.from_pointer(x.data_ptr(), (N,), "float32", owner=x)
    return x, v._with_stream(stream.cuda_stream)


def test_consumer_stream_waits_without_a_host_block():
    # The sum's kernel loaded now: under CUDA's lazy loading its first launch may synchronize the
    # context, which would wait for the producer on the host (docs/distributed.md, "Measured").
    torch.ones(N, device="cuda").sum()
    torch.cuda.synchronize()
    producer, consumer = torch.cuda.Stream(), torch.cuda.Stream()
    _, v = pending_ones(producer)
    with torch.cuda.stream(consumer):
        start = time.perf_counter()
        t = torch.from_dlpack(v)  # torch passes its current stream: `consumer`
        elapsed = time.perf_counter() - start
        total = t.sum()
    assert elapsed < 0.05, f"export blocked the host for {elapsed:.3f} s"
    assert not producer.query(), "the producer is still sleeping: the sum must wait for it on the GPU"
    consumer.synchronize()  # torch streams are non-blocking: sync before reading on another stream
    assert total.item() == N


def test_explicit_stream_argument_and_cuda_stream_values():
    producer, consumer = torch.cuda.Stream(), torch.cuda.Stream()
    x, v = pending_ones(producer)
    start = time.perf_counter()
    capsule = v.__dlpack__(stream=consumer.cuda_stream, max_version=(1, 0))
    assert time.perf_counter() - start < 0.05
    with torch.cuda.stream(consumer):
        total = x.sum()
    consumer.synchronize()
    assert total.item() == N
    del capsule


def test_none_means_the_legacy_default_stream():
    producer = torch.cuda.Stream()
    x, v = pending_ones(producer)
    v.__dlpack__(max_version=(1, 0))  # stream=None
    legacy = torch.cuda.default_stream()  # handle 0: the legacy default stream
    assert legacy.cuda_stream == 0
    with torch.cuda.stream(legacy):
        total = x.sum()
    assert total.item() == N


def test_minus_one_orders_nothing_and_zero_is_refused():
    producer = torch.cuda.Stream()
    _, v = pending_ones(producer)
    # -1: the consumer orders the work itself. Nothing waits, not even the host, and the sanitizer
    # reports the unordered hand-over while the producer is busy (a seeded race, on purpose).
    with stridex.sanitize(), pytest.warns(stridex.StreamRaceWarning, match="no_sync: handed over with no ordering"):
        v.__dlpack__(stream=-1, max_version=(1, 0))
    assert not producer.query()  # still sleeping: the export returned without waiting for it
    with pytest.raises(ValueError, match="stream 0"):
        v.__dlpack__(stream=0, max_version=(1, 0))
    v.__dlpack__(stream=2, max_version=(1, 0))  # per-thread default stream: a valid target
    torch.cuda.synchronize()


def test_cuda_array_interface_hands_over_the_pending_stream():
    producer = torch.cuda.Stream()
    _, v = pending_ones(producer)
    assert v.__cuda_array_interface__["stream"] == producer.cuda_stream
    if cp is not None:
        assert float(cp.asarray(v).sum()) == N  # CuPy waits on the stream it is given


def test_pinned_memory_with_pending_work_syncs_for_host_readers():
    pinned = torch.zeros(N, pin_memory=True)
    device = torch.ones(N, device="cuda")
    producer = torch.cuda.Stream()
    torch.cuda.synchronize()
    with torch.cuda.stream(producer):
        torch.cuda._sleep(SLEEP_CYCLES)
        pinned.copy_(device, non_blocking=True)
    v = stridex.from_pointer(pinned.data_ptr(), (N,), "float32", owner=pinned)._with_stream(producer.cuda_stream)
    assert v.device == "cuda_host"
    out = np.from_dlpack(v, device="cpu")  # a host reader: the only order it can see is a host sync
    assert out.sum() == N
    assert np.asarray(v).sum() == N


def test_device_copies_through_the_copy_engine():
    x = torch.arange(4, device="cuda", dtype=torch.float32)
    v = stridex.from_pointer(x.data_ptr(), (4,), "float32", owner=x)
    same = torch.from_dlpack(
        type(
            "P",
            (),
            {
                "__dlpack__": lambda s, **k: v.__dlpack__(max_version=(1, 0), copy=True),
                "__dlpack_device__": lambda s: (2, 0),
            },
        )()
    )
    assert same.data_ptr() != x.data_ptr() and torch.equal(same, x)  # a copy, on the GPU, IS_COPIED
    host = np.from_dlpack(v, device="cpu")
    np.testing.assert_array_equal(host, np.arange(4, dtype=np.float32))
    with pytest.raises(BufferError, match="copy=False"):
        v.__dlpack__(max_version=(1, 0), dl_device=(1, 0), copy=False)
    with pytest.raises(BufferError, match="cuda:4096"):
        v.__dlpack__(max_version=(1, 0), dl_device=(2, 4096))  # no such GPU


def test_current_work_stream_is_the_legacy_stream():
    f = CurrentWorkStream(exchange_api().current_work_stream)
    out = ctypes.c_void_p()
    assert f(2, 0, ctypes.byref(out)) == 0 and out.value == 1


def test_exchange_api_hands_out_data_ready_on_its_work_stream():
    # No host sync, but the legacy stream (current_work_stream's answer) waits for pending work.
    api = exchange_api()
    legacy = torch.cuda.default_stream()  # handle 0: the legacy default stream
    x, v = pending_ones(torch.cuda.Stream())
    out = ctypes.POINTER(DLManagedTensorVersioned)()
    start = time.perf_counter()
    assert FromPyObject(api.managed_tensor_from_py_object_no_sync)(v, ctypes.byref(out)) == 0
    assert time.perf_counter() - start < 0.05
    with torch.cuda.stream(legacy):
        total = x.sum()
    assert total.item() == N
    ctypes.cast(out.contents.deleter, ctypes.CFUNCTYPE(None, ctypes.c_void_p))(ctypes.cast(out, ctypes.c_void_p))

    x, v = pending_ones(torch.cuda.Stream())
    t = DLTensor()
    assert DLTensorFromPyObject(api.dltensor_from_py_object_no_sync)(v, ctypes.byref(t)) == 0
    with torch.cuda.stream(legacy):
        total = x.sum()
    assert total.item() == N
