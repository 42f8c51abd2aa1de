"""Writability provenance (docs/export.md, "Writability"): a View remembers whether its producer
said writable, said read-only, could not say (a legacy DLPack capsule) or is immutable by contract
(JAX), and every export gives the consumer what the producer itself would have given it, never
more. One test per rule, on CPU, with NumPy, JAX, Warp and pure-Python producers; the cuda:0 part
is test_writability_gpu.py."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

import stridex
from quirky_producers import make_capsule
from export_support import (
    FLAG_READ_ONLY,
    DLTensor,
    DLTensorFromPyObject,
    aligned,
    capsule_name,
    exchange_api,
    managed_of,
    optional,
)

jax = optional("jax")
jnp = optional("jax.numpy")
wp = optional("warp")

needs_jax = pytest.mark.skipif(jax is None, reason="jax is not installed")
needs_warp = pytest.mark.skipif(wp is None, reason="warp is not installed")


def on_cpu(x):
    """A jax array on the CPU (these tests hand JAX data to NumPy; JAX defaults to the GPU where
    there is one; test_writability_gpu.py covers cuda:0)."""
    return jax.device_put(x, jax.devices("cpu")[0])


def _warp():
    wp.config.quiet = True
    wp.init()
    return wp


def capsule_flags(capsule) -> int | None:
    """READ_ONLY & co of an unconsumed capsule; None for a legacy capsule (no flags at all)."""
    if capsule_name(capsule) == "dltensor":
        return None
    return managed_of(capsule).flags


# ---- producers ----------------------------------------------------------------------------------


class LegacyOnly:
    """A producer that speaks only legacy DLPack: __dlpack__ takes no max_version and returns a
    "dltensor" capsule, which cannot say whether the array is writable (old CuPy, MLX, Warp ...)."""

    def __init__(self, array):
        self.array = array

    def __dlpack__(self, stream=None):
        return make_capsule(self.array, versioned=False)[0]

    def __dlpack_device__(self):
        return (1, 0)


class ImmutableVersioned:
    """A producer whose rows say "immutable" (its type's module is jax's) but that answers with a
    versioned capsule without READ_ONLY: read-only by contract, whatever the capsule says."""

    __module__ = "jax._writability_test"

    def __init__(self, array):
        self.array = array

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        return make_capsule(self.array, versioned=max_version is not None)[0]

    def __dlpack_device__(self):
        return (1, 0)


# ---- the producer said writable / read-only --------------------------------------------------------


def test_writable_numpy_array_is_writable_everywhere():
    arr = aligned((4,), np.float32)
    v = stridex.view(arr)
    assert (v.writability, v.readonly) == ("writable", False)
    legacy, versioned = v.__dlpack__(), v.__dlpack__(max_version=(1, 3))
    assert capsule_name(legacy) == "dltensor" and capsule_flags(versioned) & FLAG_READ_ONLY == 0
    out = np.from_dlpack(v)
    assert out.flags.writeable
    out[0] = 42
    assert arr[0] == 42


def test_read_only_numpy_array_is_still_refused_as_a_legacy_capsule():
    arr = aligned((4,), np.float32)
    arr.flags.writeable = False
    v = stridex.view(arr)
    assert (v.writability, v.readonly) == ("readonly", True)
    with pytest.raises(BufferError, match="read-?only"):
        arr.__dlpack__()  # NumPy's own refusal ...
    with pytest.raises(BufferError, match="read-only"):
        v.__dlpack__()  # ... and stridex's, for the same array
    assert capsule_flags(v.__dlpack__(max_version=(1, 3))) & FLAG_READ_ONLY
    assert not np.from_dlpack(v).flags.writeable
    assert v[1:].__array_interface__["data"][1] is True  # read-only everywhere, derived views too
    assert memoryview(v).readonly
    with pytest.raises(TypeError, match="not writable"):
        ctypes.c_char.from_buffer(v)  # a writable buffer request, refused


@needs_jax
def test_read_only_numpy_array_does_not_reach_jax_through_stridex_either():
    arr = aligned((4,), np.float32)
    arr.flags.writeable = False
    with pytest.raises(BufferError, match="read-?only"):
        jnp.from_dlpack(arr)
    with pytest.raises(BufferError, match="read-only"):
        jnp.from_dlpack(stridex.view(arr))


def test_read_only_view_refuses_a_borrowed_dltensor():
    arr = aligned((2,), np.float32)
    arr.flags.writeable = False
    t = DLTensor()
    with pytest.raises(BufferError, match="read-only"):
        DLTensorFromPyObject(exchange_api().dltensor_from_py_object_no_sync)(stridex.view(arr), ctypes.byref(t))


# ---- JAX: immutable by contract ------------------------------------------------------------------------


@needs_jax
def test_jax_array_goes_back_to_jax_as_jax_exports_it():
    x = on_cpu(jnp.arange(8, dtype=jnp.float32).reshape(2, 4))
    v = stridex.view(x)
    assert (v.writability, v.readonly) == ("immutable", True)
    assert capsule_name(v.__dlpack__()) == "dltensor"  # what JAX itself hands a legacy consumer
    y = jnp.from_dlpack(v)
    assert y.unsafe_buffer_pointer() == x.unsafe_buffer_pointer() == v.ptr, "a copy, not the same memory"
    np.testing.assert_array_equal(np.asarray(y), np.asarray(x))
    z = jax.dlpack.from_dlpack(v.T)
    np.testing.assert_array_equal(np.asarray(z), np.asarray(x).T)


@needs_jax
@needs_warp
def test_jax_array_reaches_warp_through_stridex():
    x = on_cpu(jnp.arange(6, dtype=jnp.float32))
    v = stridex.view(x)
    w = _warp().from_dlpack(v)
    assert w.ptr == v.ptr == x.unsafe_buffer_pointer()
    np.testing.assert_array_equal(w.numpy(), np.asarray(x))
    native = _warp().from_dlpack(x)  # the hand-over stridex stands in for
    assert native.ptr == w.ptr


@needs_jax
def test_jax_array_is_read_only_for_versioned_consumers():
    x = on_cpu(jnp.arange(4, dtype=jnp.float32))
    v = stridex.view(x)
    assert capsule_flags(v.__dlpack__(max_version=(1, 3))) & FLAG_READ_ONLY
    out = np.from_dlpack(v)  # NumPy asks for a versioned capsule
    assert not out.flags.writeable and out.ctypes.data == v.ptr
    assert v.__array_interface__["data"][1] is True
    assert memoryview(v).readonly
    # A borrowed DLTensor cannot say read-only, but JAX's own legacy capsules do not either: allowed.
    t = DLTensor()
    assert DLTensorFromPyObject(exchange_api().dltensor_from_py_object_no_sync)(v, ctypes.byref(t)) == 0
    assert t.data == v.ptr


@needs_jax
def test_immutable_producer_with_an_unflagged_versioned_capsule_is_immutable():
    arr = aligned((3,), np.float32)
    v = stridex.view(ImmutableVersioned(arr))
    assert (v.writability, v.readonly) == ("immutable", True)
    assert capsule_name(v.__dlpack__()) == "dltensor"
    assert capsule_flags(v.__dlpack__(max_version=(1, 3))) & FLAG_READ_ONLY


def test_writability_carries_over_to_derived_views():
    arr = aligned((4, 4), np.float32)
    v = stridex.view(LegacyOnly(arr))
    assert v.writability == "unknown"
    for derived in (v[1:, ::2], v.T, v.reshape(16), v[2:3].squeeze(), stridex.view(v)):
        assert derived.writability == "unknown"
    if jax is not None:
        j = stridex.view(on_cpu(jnp.ones((4, 4), jnp.float32)))
        for derived in (j[1:, ::2], j.T, j.reshape(16), stridex.view(j)):
            assert derived.writability == "immutable"


# ---- the producer could not say: a legacy-only producer -------------------------------------------------


def test_legacy_only_producer_reaches_numpy_read_only_as_natively():
    arr = aligned((2, 3), np.float32)
    native = np.from_dlpack(LegacyOnly(arr))
    assert not native.flags.writeable, "NumPy's own rule for capsules that cannot say writable"
    v = stridex.view(LegacyOnly(arr))
    assert (v.writability, v.readonly) == ("unknown", False)
    out = np.from_dlpack(v)
    assert out.flags.writeable == native.flags.writeable
    assert out.ctypes.data == arr.ctypes.data == v.ptr
    arr[1, 2] = 99  # same memory: written by the producer, read through NumPy
    assert out[1, 2] == 99


def test_unknown_writability_answers_a_versioned_request_with_a_legacy_capsule():
    v = stridex.view(LegacyOnly(aligned((3,), np.float32)))
    assert capsule_name(v.__dlpack__(max_version=(1, 3))) == "dltensor"
    assert capsule_name(v.__dlpack__()) == "dltensor"
    # A copy is the consumer's own memory: versioned, as asked, and writable.
    copied = v.__dlpack__(max_version=(1, 3), copy=True)
    assert capsule_name(copied) == "dltensor_versioned"
    assert capsule_flags(copied) & FLAG_READ_ONLY == 0
    out = np.from_dlpack(v, copy=True)
    assert out.flags.writeable


def test_unknown_writability_is_writable_where_an_answer_must_be_yes_or_no():
    arr = aligned((3,), np.float32)
    v = stridex.view(LegacyOnly(arr))
    assert v.__array_interface__["data"][1] is False
    m = memoryview(v)
    assert not m.readonly
    np.asarray(v)[0] = 5  # the array interface: writable, like torch's and CuPy's legacy rule
    assert arr[0] == 5


@needs_warp
def test_warp_array_through_stridex_reaches_numpy_as_warp_gives_it():
    w = _warp().array(np.arange(4, dtype=np.float32), device="cpu")
    native = np.from_dlpack(w)
    v = stridex.view(w)
    assert v.writability == "unknown"
    out = np.from_dlpack(v)
    assert out.flags.writeable == native.flags.writeable
    assert out.ctypes.data == w.ptr
    w.fill_(3.0)
    assert (out == 3.0).all()


@needs_jax
def test_legacy_only_producer_reaches_jax_through_stridex():
    arr = aligned((4,), np.float32)
    native = jnp.from_dlpack(LegacyOnly(arr))
    y = jnp.from_dlpack(stridex.view(LegacyOnly(arr)))
    assert y.unsafe_buffer_pointer() == native.unsafe_buffer_pointer() == arr.ctypes.data
