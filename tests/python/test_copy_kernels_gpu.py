"""The copy engine's transpose kernels on a GPU, against NumPy.

Every element size the vector transpose serves (1, 2, 4 and 8 bytes) with full tiles, ragged edge
tiles, batch axes and more tiles than one grid holds; then the layouts it leaves to the shifted and
element tiles (16-byte units, extents that are no multiple of a vector, misaligned bases, padded
rows); then the narrow transposes (one short axis packed on one side, both directions, every unit,
lined-up and misaligned). Destinations are poisoned first so that an unwritten element shows.
Skips without a GPU.
"""

from __future__ import annotations

import numpy as np
import pytest

import stridex

pytestmark = pytest.mark.skipif(
    not stridex.cuda_available(), reason="no CUDA device (stridex.cuda_available() is False)"
)
POISON = 0xA5


def on_gpu(host: np.ndarray) -> stridex.View:
    buf = stridex.empty(host.shape, str(host.dtype), device="cuda:0")
    return stridex.copy(buf, stridex.view(host), stream=stridex.NO_SYNC)


def to_host(v: stridex.View) -> np.ndarray:
    out = stridex.empty(v.shape, v.dtype, device="cpu")
    stridex.copy(out, v, stream=stridex.NO_SYNC)
    return np.asarray(out)


def random_array(shape, dtype, seed=3) -> np.ndarray:
    n = int(np.prod(shape)) * np.dtype(dtype).itemsize
    return np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8).view(dtype).reshape(shape)


def check(src: stridex.View, expected: np.ndarray) -> None:
    """Copies `src` (on the GPU) into a poisoned C-contiguous GPU array and compares the bytes."""
    dst = on_gpu(np.frombuffer(bytes([POISON]) * expected.nbytes, expected.dtype).reshape(expected.shape))
    stridex.copy(dst, src, stream=stridex.NO_SYNC)
    got = to_host(dst)
    assert got.dtype == expected.dtype and got.shape == expected.shape
    assert got.tobytes() == np.ascontiguousarray(expected).tobytes()


VECTOR_CASES = [
    ((256, 384), (1, 0), "uint8"),  # 16-element vectors, whole tiles
    ((272, 336), (1, 0), "uint8"),  # extents multiples of 16, not of the tile: ragged edge tiles
    ((3, 48, 80), (0, 2, 1), "uint8"),  # a batch axis
    ((4096, 4096), (1, 0), "uint8"),  # more tiles than one grid of resident blocks
    ((200, 136), (1, 0), "int16"),
    ((4, 16, 24, 40), (0, 2, 3, 1), "int16"),  # NCHW -> NHWC: two batch axes
    ((264, 520), (1, 0), "float32"),
    ((24, 100, 36), (2, 0, 1), "float32"),
    ((2048, 4096), (1, 0), "float32"),
    ((18, 34, 20), (2, 1, 0), "float64"),
    ((6, 40, 66), (0, 2, 1), "complex64"),
]


FALLBACK_CASES = [
    ((32, 48), (1, 0), "complex128"),  # 16-byte units: the element tile
    ((301, 203), (1, 0), "uint8"),  # extents no multiple of 16 (nor of 4): the shifted tile
    ((96, 40), (1, 0), "uint8"),  # 40: no multiple of 16 (rows 4-byte aligned): the shifted tile
    ((100, 36), (1, 0), "int16"),  # 36: no multiple of 8: the shifted tile
    ((66, 34), (1, 0), "float32"),  # 34: no multiple of 4 (rows of 136 bytes): the element tile
]


@pytest.mark.parametrize("dtype", ["uint8", "int16", "float32", "float64"])
def test_misaligned_and_padded_sources(dtype):
    item = np.dtype(dtype).itemsize
    host = random_array((1 + 64 * 160,), dtype)
    buf = on_gpu(host)
    # One element past a 16-byte boundary: no vectors on the source side.
    src = stridex.from_pointer(buf.ptr + item, (64, 160), dtype, owner=buf).T
    check(src, host[1:].reshape(64, 160).T)
    # A column block of a transposed array: aligned, rows padded to 160 elements.
    check(src[16:144, 16:48], host[1:].reshape(64, 160).T[16:144, 16:48])
    aligned = on_gpu(host[: 64 * 160].reshape(64, 160)).T
    check(aligned[16:144, 16:48], host[: 64 * 160].reshape(64, 160).T[16:144, 16:48])


def test_reversed_and_broadcast_batch_axes():
    # Batch strides that are negative (a reversed axis) or zero (broadcast) keep the vectors lined up.
    host = random_array((3, 64, 48), "float32")
    buf = on_gpu(host)
    check(buf[::-1].permute((0, 2, 1)), host[::-1].transpose(0, 2, 1))
    rows = on_gpu(host[0])
    wide = stridex.from_pointer(rows.ptr, (3, 64, 48), "float32", strides=(0, 48, 1), owner=rows)
    check(wide.permute((0, 2, 1)), np.broadcast_to(host[0], (3, 64, 48)).transpose(0, 2, 1))


NARROW_CASES = [
    ((2, 3, 40, 48), (0, 2, 3, 1), "uint8"),  # NCHW -> NHWC, 3 channels: dst packs them
    ((2, 40, 48, 3), (0, 3, 1, 2), "uint8"),  # NHWC -> NCHW: src packs them
    ((3, 5000), (1, 0), "int16"),  # a long axis of no whole chunk, rows of 10000 bytes
    ((5001, 3), (1, 0), "int16"),
    ((4, 4099), (1, 0), "float32"),  # rows no multiple of 16 bytes: element accesses there
    ((4099, 4), (1, 0), "float32"),
    ((7, 3, 1030), (0, 2, 1), "float64"),
    ((7, 1030, 15), (0, 2, 1), "float64"),  # the longest short axis
    ((2, 600), (1, 0), "complex128"),  # 16-byte units
    ((600, 2), (1, 0), "complex128"),
    ((9, 3, 256, 256), (0, 2, 3, 1), "float32"),  # more chunks than one grid holds
]


@pytest.mark.parametrize("shape,perm,dtype", VECTOR_CASES + FALLBACK_CASES + NARROW_CASES)
def test_transposes(shape, perm, dtype):
    """The vector, shifted, element and narrow tiles, each on the layouts its list names."""
    host = random_array(shape, dtype)
    check(on_gpu(host).permute(perm), host.transpose(perm))


@pytest.mark.parametrize("dtype", ["uint8", "int16", "float32", "float64"])
def test_narrow_transposes_misaligned(dtype):
    item = np.dtype(dtype).itemsize
    host = random_array((1 + 3 * 2048,), dtype)
    buf = on_gpu(host)
    # One element past a 16-byte boundary on the rows side, then on the packed side.
    rows = stridex.from_pointer(buf.ptr + item, (3, 2048), dtype, owner=buf)
    check(rows.T, host[1:].reshape(3, 2048).T)
    packed = stridex.from_pointer(buf.ptr + item, (2048, 3), dtype, owner=buf)
    check(packed.T, host[1:].reshape(2048, 3).T)
    # A reversed batch axis and a sliced long axis.
    cube = on_gpu(random_array((4, 3, 512), dtype, seed=5))
    expected = random_array((4, 3, 512), dtype, seed=5)
    check(cube[::-1, :, 7:500].permute((0, 2, 1)), expected[::-1, :, 7:500].transpose(0, 2, 1))


SHIFTED_CASES = [
    ((8191 // 32, 8195 // 32), (1, 0), "uint8"),  # rows of odd lengths: no vector lines up
    ((301, 203), (1, 0), "uint8"),
    ((131, 517), (1, 0), "int16"),
    ((129, 67), (1, 0), "float32"),
    ((67, 129), (1, 0), "float64"),
    ((5, 67, 35), (0, 2, 1), "int16"),  # a batch axis, tiles cut on both sides
    ((33, 7, 65), (2, 1, 0), "float32"),  # a batch axis between the transposed ones
]


@pytest.mark.parametrize("shape,perm,dtype", SHIFTED_CASES)
def test_shifted_transposes(shape, perm, dtype):
    host = random_array(shape, dtype)
    check(on_gpu(host).permute(perm), host.transpose(perm))
    # The same from every misaligned start (the rows then start 1 .. 15 bytes past a boundary).
    item = np.dtype(dtype).itemsize
    n = int(np.prod(shape))
    flat = random_array((n + 16,), dtype, seed=11)
    buf = on_gpu(flat)
    for skip in range(1, 16 // item):
        src = stridex.from_pointer(buf.ptr + skip * item, shape, dtype, owner=buf)
        check(src.permute(perm), flat[skip : skip + n].reshape(shape).transpose(perm))


def test_random_layouts_match_numpy():
    """Random shapes, permutations, slices (steps, reversals) and element sizes, every kernel the
    plan picks against NumPy's answer."""
    rng = np.random.default_rng(2026)
    for _ in range(60):
        ndim = int(rng.integers(2, 5))
        shape = tuple(int(rng.integers(1, 12 if ndim > 2 else 300)) for _ in range(ndim))
        dtype = ["uint8", "int16", "float32", "float64", "complex128"][int(rng.integers(0, 5))]
        host = random_array(shape, dtype, seed=int(rng.integers(0, 1 << 30)))
        index = []
        for e in shape:
            step = int(rng.choice([1, 1, 1, 2, -1]))
            start = int(rng.integers(0, max(1, e // 3)))
            index.append(slice(start, None, step) if step > 0 else slice(None, None, -1))
        perm = tuple(int(a) for a in rng.permutation(ndim))
        src = on_gpu(host)[tuple(index)].permute(perm)
        check(src, host[tuple(index)].transpose(perm))
