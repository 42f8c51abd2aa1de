"""stridex.copy, View.copy / contiguous / to, and __dlpack__ copies across devices.

Randomised layouts (0-d, empty, up to 8-d; negative strides, broadcast sources, gaps, permuted
axes) over every pair of memory kinds, against NumPy as the reference; destinations are poisoned
before each copy so unwritten elements show. The CPU kinds run everywhere; the CUDA kinds
(cuda:0, pinned cuda_host, cuda_managed, and cuda:1 for peer copies) skip without a GPU.
"""

from __future__ import annotations

import copy
import gc
import time
import zlib

import numpy as np
import pytest

import stridex
import stridex.ipc

GPU = stridex.cuda_available()
TWO_GPUS = GPU and stridex.device_count() >= 2
KINDS = ["cpu", "cuda:0", "cuda_host", "cuda_managed", "cuda:1"]
DTYPES = ["uint8", "int16", "float32", "float64", "complex128"]
POISON = 0xA5


def needs(kind: str):
    if kind == "cuda:1" and not TWO_GPUS:
        pytest.skip("needs two CUDA devices")
    if kind != "cpu" and not GPU:
        pytest.skip("no CUDA device (stridex.cuda_available() is False)")


def place(host: np.ndarray, kind: str) -> stridex.View:
    """A fresh 1-d buffer on `kind` holding the bytes of `host` (a contiguous copy)."""
    buf = stridex.empty(host.shape, str(host.dtype), device=kind)
    return stridex.copy(buf, stridex.view(host), stream=stridex.NO_SYNC)


def fetch(buf: stridex.View) -> np.ndarray:
    out = stridex.empty(buf.shape, buf.dtype, device="cpu")
    stridex.copy(out, buf, stream=stridex.NO_SYNC)
    return np.asarray(out)


def random_layout(rng, shape, broadcast: bool):
    """Strides (elements), offset of element 0 and the buffer length a layout of `shape` needs."""
    n = len(shape)
    order = rng.permutation(n)
    strides = [0] * n
    step = int(rng.integers(1, 3))
    for a in order[::-1]:
        if broadcast and rng.integers(6) == 0:
            continue
        strides[a] = step
        step *= shape[a] + int(rng.integers(2))
    offset = 0
    for a in range(n):
        if rng.integers(4) == 0 and shape[a] > 0:
            offset += (shape[a] - 1) * strides[a]
            strides[a] = -strides[a]
    return strides, offset, step + offset + 1


def strided(base, offset, shape, strides, itemsize):
    return np.lib.stride_tricks.as_strided(base[offset:], shape, [s * itemsize for s in strides])


def random_case(rng, max_extent=5):
    nd = int(rng.integers(0, 9))
    shape = tuple(int(rng.integers(0, 3 if nd > 4 else max_extent + 1)) for _ in range(nd))
    return shape, str(rng.choice(DTYPES))


def random_bytes(rng, n, dtype):
    raw = rng.integers(0, 256, size=n * np.dtype(dtype).itemsize, dtype=np.uint8)
    return raw.view(dtype)


def check_copy(rng, src_kind, dst_kind, shape, dtype):
    item = np.dtype(dtype).itemsize
    s_strides, s_off, s_len = random_layout(rng, shape, broadcast=True)
    d_strides, d_off, d_len = random_layout(rng, shape, broadcast=False)
    s_host = random_bytes(rng, s_len, dtype)
    d_host = np.frombuffer(bytes([POISON]) * (d_len * item), dtype=dtype).copy()
    s_buf, d_buf = place(s_host, src_kind), place(d_host, dst_kind)
    src = stridex.from_pointer(s_buf.ptr + s_off * item, shape, dtype, strides=s_strides, owner=s_buf)
    dst = stridex.from_pointer(d_buf.ptr + d_off * item, shape, dtype, strides=d_strides, owner=d_buf)
    out = stridex.copy(dst, src, stream=stridex.NO_SYNC)
    assert out.stream is None
    expected = d_host.copy()
    strided(expected, d_off, shape, d_strides, item)[...] = strided(s_host, s_off, shape, s_strides, item)
    got = fetch(d_buf)
    assert got.tobytes() == expected.tobytes(), f"{src_kind}->{dst_kind} {shape} {dtype} {s_strides}->{d_strides}"


@pytest.mark.parametrize("dst_kind", KINDS)
@pytest.mark.parametrize("src_kind", KINDS)
def test_random_layouts_every_memory_pair(src_kind, dst_kind):
    needs(src_kind)
    needs(dst_kind)
    rng = np.random.default_rng(zlib.crc32(f"{src_kind}->{dst_kind}".encode()))  # stable across runs
    for _ in range(40):
        check_copy(rng, src_kind, dst_kind, *random_case(rng))


LARGE = [
    ((512, 384), (1, 0), "float32"),  # transpose: the tiled kernel
    ((300, 200), (1, 0), "uint16"),  # 2-byte transpose, words on both sides
    ((301, 203), (1, 0), "uint8"),  # 1-byte transpose, ragged edges
    ((64, 48, 40), (2, 1, 0), "float64"),
    ((8, 64, 40, 3), (0, 2, 1, 3), "complex128"),
    ((33, 65, 17), (1, 2, 0), "int16"),
]


@pytest.mark.parametrize("shape,perm,dtype", LARGE)
@pytest.mark.parametrize(
    "kinds",
    [
        ("cpu", "cpu"),
        ("cuda:0", "cuda:0"),
        ("cpu", "cuda:0"),
        ("cuda:0", "cpu"),
        ("cuda_host", "cuda:0"),
        ("cuda:0", "cuda_managed"),
        ("cuda:1", "cuda:0"),
    ],
)
def test_permutations_and_slices(shape, perm, dtype, kinds):
    src_kind, dst_kind = kinds
    needs(src_kind)
    needs(dst_kind)
    rng = np.random.default_rng(7)
    host = random_bytes(rng, int(np.prod(shape)), dtype).reshape(shape)
    src = place(host.reshape(-1), src_kind).reshape(shape).permute(perm)
    expected = host.transpose(perm)
    got = src.copy(device=dst_kind)
    assert got.is_c_contiguous and got.device == dst_kind
    assert fetch(got).tobytes() == np.ascontiguousarray(expected).tobytes()
    # Slices: every other row, a column block, reversed.
    for key in [(slice(None, None, 2),), (slice(None), slice(3, 17)), (slice(None, None, -1),)]:
        part = src[key]
        assert fetch(part.copy(device=dst_kind)).tobytes() == np.ascontiguousarray(expected[key]).tobytes()


def test_contiguous_and_to_keep_what_needs_no_copy():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    v = stridex.view(a)
    assert v.contiguous() is v
    assert v.to("cpu") is v
    t = v.T.contiguous()
    assert t.is_c_contiguous and t.owner is None
    np.testing.assert_array_equal(np.asarray(t), a.T)
    k = v.T.copy(order="K")
    assert k.strides == (1, 4)  # the source's axis order: a plain copy of the memory
    f = v.copy(order="F")
    assert f.is_f_contiguous
    np.testing.assert_array_equal(np.asarray(f), a)


def test_copy_takes_any_array_and_returns_dst():
    a = np.arange(6, dtype=np.int64).reshape(2, 3)
    b = np.zeros((3, 2), dtype=np.int64)
    out = stridex.copy(b, stridex.view(a).T)
    assert out is b  # dst itself, whatever its type
    np.testing.assert_array_equal(b, a.T)
    bt = b.T
    assert stridex.copy(bt, np.full((2, 3), 9, dtype=np.int64)) is bt  # numpy on both sides, no View in sight
    assert (b == 9).all()


def test_copy_returns_a_view_destination_with_its_stream_updated_in_place():
    a = np.arange(6, dtype=np.float32)
    b = np.zeros(6, dtype=np.float32)
    dst = stridex.view(b)._with_stream(7)  # pretend work was pending on stream 7
    assert dst.stream == 7
    out = stridex.copy(dst, a)
    assert out is dst
    assert dst.stream is None  # a host copy completes before returning: nothing pending any more
    np.testing.assert_array_equal(b, a)


class CountingStream:
    """A stream object (the __cuda_stream__ protocol) that counts how often it is asked."""

    def __init__(self, handle: int):
        self.handle, self.calls = handle, 0

    def __cuda_stream__(self):
        self.calls += 1
        return (0, self.handle)


@pytest.mark.parametrize("dst_kind", ["numpy", "view"])
def test_copy_parses_its_stream_once(dst_kind):
    a = np.arange(6, dtype=np.float32)
    b = np.zeros(6, dtype=np.float32)
    dst = b if dst_kind == "numpy" else stridex.view(b)
    s = CountingStream(0x1234)
    assert stridex.copy(dst, a, stream=s) is dst
    assert s.calls == 1  # not once for the copy and once more for each array imported for it
    np.testing.assert_array_equal(b, a)
    s.calls = 0
    stridex.view(a).copy(stream=s)
    assert s.calls == 1


def test_copy_copy_is_a_view_of_the_same_memory():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    v = stridex.view(a)[::2, 1:]  # private memory: pickling it would raise BufferError
    c = copy.copy(v)
    assert type(c) is stridex.View and c is not v
    assert (c.ptr, c.shape, c.strides, c.dtype, c.device, c.readonly, c.stream) == (
        v.ptr,
        v.shape,
        v.strides,
        v.dtype,
        v.device,
        v.readonly,
        v.stream,
    )
    assert c.owner is a
    np.asarray(c)[0, 0] = 100  # an alias: writes show in the original
    assert a[0, 1] == 100
    ro = copy.copy(stridex.view(np.frombuffer(bytes(16), np.int32)))
    assert ro.readonly
    with pytest.raises(BufferError, match="read-only"):
        stridex.copy(ro, np.zeros(4, np.int32))
    del a, v
    gc.collect()
    np.testing.assert_array_equal(np.asarray(c)[1], [9, 10, 11])  # the owner is kept alive


@pytest.mark.parametrize("memory", ["private", "shared"])
def test_copy_deepcopy_copies_the_data(memory):
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    if memory == "shared":
        base = stridex.copy(stridex.ipc.shared_empty((3, 4), np.float32), a)  # pickles as the same memory
    else:
        base = stridex.view(a)
    v = base.T  # transposed: the copy keeps the axis order ('K'), as NumPy's deepcopy does
    d = copy.deepcopy(v)
    assert type(d) is stridex.View and d is not v and d.ptr != v.ptr
    assert (d.shape, d.strides, d.dtype, d.device, d.readonly) == ((4, 3), (1, 4), v.dtype, v.device, False)
    np.testing.assert_array_equal(np.asarray(d), a.T)
    np.asarray(d)[0, 0] = -1  # not an alias
    assert np.asarray(base)[0, 0] == 0
    ro = stridex.view(np.frombuffer(np.arange(4, dtype=np.int32).tobytes(), np.int32))
    assert not copy.deepcopy(ro).readonly  # fresh memory of its own, as NumPy's deepcopy
    pair = copy.deepcopy([v, v])  # the memo: one copy for one View
    assert pair[0] is pair[1] and pair[0].ptr != v.ptr


def test_copy_errors():
    a = np.zeros((2, 3), np.float32)
    with pytest.raises(ValueError, match="different dtypes"):
        stridex.copy(np.zeros((2, 3), np.int32), a)
    with pytest.raises(ValueError, match="different shapes"):
        stridex.copy(np.zeros((3, 2), np.float32), a)
    with pytest.raises(BufferError, match="read-only"):
        stridex.copy(np.frombuffer(bytes(24), np.float32).reshape(2, 3), a)
    broadcast = np.lib.stride_tricks.as_strided(np.zeros(3, np.float32), (2, 3), (0, 4))
    assert broadcast.flags.writeable
    with pytest.raises(BufferError, match="more than once"):
        stridex.copy(broadcast, a)
    with pytest.raises(ValueError, match="order"):
        stridex.view(a).copy(order="Z")
    with pytest.raises(TypeError, match="device"):
        stridex.view(a).copy(device=3.5)
    with pytest.raises(ValueError):
        stridex.copy(a, a, stream=0)


def test_empty():
    e = stridex.empty((2, 3), "float32")
    assert e.shape == (2, 3) and e.device == "cpu" and not e.readonly and e.is_c_contiguous
    assert stridex.empty([4, 5], stridex.Dtype("int8"), order="F").is_f_contiguous
    with pytest.raises(TypeError, match="shape"):
        stridex.empty(("a",), "float32")
    with pytest.raises(ValueError):
        stridex.empty((-1,), "float32")


def test_dlpack_copy_true_on_the_host():
    a = np.arange(6, dtype=np.float32)[::2]
    got = np.from_dlpack(stridex.view(a), copy=True)
    np.testing.assert_array_equal(got, a)
    assert got.ctypes.data != a.ctypes.data


# ---- GPU only -------------------------------------------------------------------------------------

gpu = pytest.mark.skipif(not GPU, reason="no CUDA device (stridex.cuda_available() is False)")


@gpu
def test_result_records_the_stream_and_device():
    host = np.arange(1 << 20, dtype=np.float32).reshape(1024, 1024)
    g = stridex.view(host).to("cuda:0")
    assert g.device == "cuda:0" and g.stream == 1 and g.owner is None
    t = g.T.contiguous()
    assert t.stream == 1
    np.testing.assert_array_equal(np.from_dlpack(t, device="cpu"), host.T)
    np.testing.assert_array_equal(np.array(g.T), host.T)  # an explicit copy
    with pytest.raises(TypeError, match="copy"):
        np.asarray(g)


@gpu
@pytest.mark.parametrize("strided_host", [False, True])
def test_staged_copies_wrap_the_stage_pool(strided_host):
    # Pageable and strided host memory moves through 4 pinned stages of 16 MiB each: 100 MiB is 7
    # pieces, so every stage is reused and a reuse that did not wait for its last DMA would show as
    # wrong bytes. Both directions, checked element by element.
    n = 25 << 20  # 100 MiB of uint32
    if strided_host:
        backing = np.zeros((n, 2), dtype=np.uint32)
        host = backing[:, 1]
    else:
        host = np.zeros(n, dtype=np.uint32)
    host[...] = np.arange(n, dtype=np.uint32) * np.uint32(2654435761)  # no two pieces alike
    g = stridex.view(host).to("cuda:0")
    back_backing = np.full((n, 2) if strided_host else (n,), 0xFFFFFFFF, dtype=np.uint32)
    back = back_backing[:, 0] if strided_host else back_backing
    stridex.copy(back, g, stream=stridex.NO_SYNC)
    np.testing.assert_array_equal(back, host)
    if strided_host:
        assert (back_backing[:, 1] == 0xFFFFFFFF).all()  # the gaps are left alone


@gpu
def test_dlpack_copies_across_devices():
    host = np.arange(24, dtype=np.int32).reshape(4, 6)
    g = stridex.view(host).to("cuda:0")
    cap = g.__dlpack__(dl_device=(1, 0), max_version=(1, 3))
    back = np.from_dlpack(
        type("C", (), {"__dlpack__": lambda self, **k: cap, "__dlpack_device__": lambda self: (1, 0)})()
    )
    np.testing.assert_array_equal(back, host)
    up = stridex.view(stridex.view(host).__dlpack__(dl_device=(2, 0), max_version=(1, 3), stream=1))
    assert up.device == "cuda:0"
    np.testing.assert_array_equal(np.from_dlpack(up, device="cpu"), host)
    with pytest.raises(BufferError, match="copy=False"):
        g.__dlpack__(dl_device=(1, 0), copy=False)


@gpu
def test_copy_records_the_stream_in_a_view_destination_and_returns_other_arrays_as_they_are():
    host = np.arange(1024, dtype=np.float32)
    dst = stridex.empty((1024,), "float32", device="cuda:0")
    assert stridex.copy(dst, host, stream=2) is dst
    assert dst.stream == 2  # the per-thread default stream: the copy is pending there
    np.testing.assert_array_equal(np.from_dlpack(dst, device="cpu"), host)
    assert stridex.copy(dst, host, stream=stridex.NO_SYNC) is dst and dst.stream is None
    torch = pytest.importorskip("torch")
    t = torch.zeros(1024, device="cuda")
    s = torch.cuda.current_stream()
    assert stridex.copy(t, host, stream=s) is t  # ready on s, where torch runs its next work
    assert torch.equal(t.cpu(), torch.from_numpy(host))


@gpu
def test_pinned_source_is_ordered_on_the_gpu():
    # A pinned View whose data a producer stream is still writing: the copy engine's DMA waits for
    # it on the GPU (an event), so the call returns while the producer still sleeps, and the copy
    # still reads what the producer wrote.
    torch = pytest.importorskip("torch")
    n = 1 << 20
    values = torch.arange(n, dtype=torch.float32, device="cuda")
    pinned = torch.zeros(n, dtype=torch.float32).pin_memory()
    producer = torch.cuda.Stream()
    torch.cuda.synchronize()
    with torch.cuda.stream(producer):
        torch.cuda._sleep(1_000_000_000)  # ~0.5-1 s of GPU cycles
        pinned.copy_(values, non_blocking=True)  # written only after the sleep
    src = stridex.from_pointer(pinned.data_ptr(), (n,), "float32", owner=pinned)._with_stream(producer.cuda_stream)
    assert src.device == "cuda_host"
    dst = stridex.empty((n,), "float32", device="cuda:0")
    consumer = torch.cuda.Stream()
    start = time.perf_counter()
    assert stridex.copy(dst, src, stream=consumer) is dst
    returned_after = time.perf_counter() - start
    assert not producer.query(), f"the copy waited for the producer on the host ({returned_after:.3f} s)"
    assert dst.stream == consumer.cuda_stream
    consumer.synchronize()
    np.testing.assert_array_equal(np.from_dlpack(dst, device="cpu"), np.arange(n, dtype=np.float32))
    # The other direction: a pinned destination another stream still reads is written after it.
    pinned_out = torch.full((n,), -1.0).pin_memory()
    with torch.cuda.stream(producer):
        torch.cuda._sleep(1_000_000_000)
        snapshot = pinned_out.to("cuda", non_blocking=True)  # reads the old values after the sleep
    out = stridex.from_pointer(pinned_out.data_ptr(), (n,), "float32", owner=pinned_out)._with_stream(
        producer.cuda_stream
    )
    assert stridex.copy(out, dst, stream=consumer) is out
    assert not producer.query(), "the copy waited for the reader of the destination on the host"
    consumer.synchronize()
    assert (snapshot == -1).all()  # the reader saw the old values: the copy came after it
    np.testing.assert_array_equal(pinned_out.numpy(), np.arange(n, dtype=np.float32))


@gpu
def test_copy_and_deepcopy_of_device_views():
    host = np.arange(24, dtype=np.int32).reshape(4, 6)
    g = stridex.view(host).to("cuda:0")
    c = copy.copy(g)
    assert c is not g and (c.ptr, c.shape, c.strides, c.device, c.stream) == (
        g.ptr,
        g.shape,
        g.strides,
        g.device,
        g.stream,
    )
    d = copy.deepcopy(g.T)
    assert d.device == "cuda:0" and d.ptr != g.ptr and d.strides == (1, 6) and d.stream == 1
    np.testing.assert_array_equal(np.from_dlpack(d, device="cpu"), host.T)


@gpu
def test_ordered_on_a_side_stream():
    torch = pytest.importorskip("torch")
    s = torch.cuda.Stream()
    x = torch.arange(1 << 22, device="cuda", dtype=torch.float32).reshape(2048, 2048)
    with torch.cuda.stream(s):
        x.mul_(2)  # pending on s
        v = stridex.view(x, stream=s)
        t = v.T.contiguous(stream=s)
    assert t.stream == s.cuda_stream
    s.synchronize()
    expected = (torch.arange(1 << 22, device="cuda", dtype=torch.float32).reshape(2048, 2048) * 2).T
    assert torch.equal(torch.from_dlpack(t), expected)


def test_empty_takes_what_view_arguments_take_and_refuses_the_rest():
    # stridex.empty parses shape and dtype with the same rules as every other argument from Python.
    assert stridex.empty((2, 3), np.float32).dtype == "float32"
    assert stridex.empty(4, "int16").shape == (4,)
    with pytest.raises(ValueError, match=r"empty\(\): shape .* does not fit in int64"):
        stridex.empty((2**70,), "float32")
    with pytest.raises(TypeError, match=r"empty\(\): shape must be an int, found bool"):
        stridex.empty((True,), "float32")
    with pytest.raises(ValueError, match="not in native byte order"):
        stridex.empty((2,), ">f4")
    with pytest.raises(ValueError) as error:
        stridex.empty((2,), "float32", order="X" * 10_000)
    assert len(str(error.value)) < 200  # the echo of a huge argument stays short
