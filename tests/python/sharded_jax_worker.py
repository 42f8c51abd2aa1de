"""Run by test_sharded.py in a process of its own, with XLA_FLAGS giving JAX four CPU devices:
JAX sharded arrays -> ShardedView -> JAX and NumPy, pointers equal per shard, and reshards among
row, column, 2-D block and replicated layouts with every element checked. Prints "checked" last."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import stridex
from stridex import ShardedView, ShardLayout

devices = jax.devices()
assert len(devices) == 4, devices
mesh = jax.make_mesh((2, 2), ("x", "y"))


def pointers(x):
    return [s.data.unsafe_buffer_pointer() for s in x.addressable_shards]


def check_round_trip(x):
    sv = ShardedView.from_jax(x)
    assert sv.shape == x.shape and sv.dtype == x.dtype
    assert [s.view.ptr for s in sv.shards] == pointers(x), "import is zero-copy"
    assert [s.origin for s in sv.shards] == [s.device for s in x.addressable_shards]
    y = sv.to_jax()
    assert y.sharding == x.sharding, (y.sharding, x.sharding)
    assert pointers(y) == pointers(x), "export is zero-copy"
    assert np.array_equal(np.asarray(y), np.asarray(x))
    for (index, a), s in zip(sv.to_numpy(), x.addressable_shards):
        assert a.ctypes.data == s.data.unsafe_buffer_pointer()
        assert np.array_equal(a, np.asarray(x)[index])
    return sv


for dtype in (jnp.float32, jnp.bfloat16, jnp.int8):
    glob = np.arange(8 * 12).reshape(8, 12).astype(dtype)
    for spec in (P("x", "y"), P("x"), P(None, "y"), P(), P("y", "x"), P(("x", "y"))):
        x = jax.device_put(jnp.asarray(glob), NamedSharding(mesh, spec))
        sv = check_round_trip(x)
        # row -> column -> 2-D block -> replicated -> row, every element checked at each step.
        layouts = [
            ShardLayout.rows(glob.shape, devices),
            ShardLayout.columns(glob.shape, devices),
            ShardLayout.blocks(glob.shape, (2, 2), devices),
            ShardLayout.replicated(glob.shape, devices),
            ShardLayout.grid(glob.shape, (2,), devices),  # rows, each held twice
        ]
        current = sv
        for layout in layouts:
            current = stridex.reshard(current, layout)
            for s in current.shards:
                assert np.array_equal(np.asarray(s.view), glob[s.index]), (spec, layout, s)
            j = current.to_jax()
            assert pointers(j) == [s.view.ptr for s in current.shards], "the resharded export is zero-copy"
            assert np.array_equal(np.asarray(j), glob)
            assert j.dtype == glob.dtype
        # JAX arrays are immutable: a copy into one is refused before anything is written.
        target = ShardedView.from_jax(jax.device_put(jnp.zeros_like(glob), NamedSharding(mesh, P("y", None))))
        try:
            stridex.copy(target, sv)
            raise AssertionError("a copy into a JAX array was accepted")
        except BufferError as e:
            assert "cannot copy into a read-only view (destination shard 0" in str(e), e
        assert not np.asarray(target.to_jax()).any()

# Layouts JAX cannot express say why.
uneven = stridex.reshard(np.arange(9, dtype=np.float32), ShardLayout.rows((9,), devices[:2]))
try:
    uneven.to_jax()
    raise AssertionError("an uneven layout was exported")
except ValueError as e:
    assert "JAX cuts a dimension into equal blocks; dimension 0 of extent 9 is cut into ['0:5', '5:9']" in str(e), e
twice = stridex.reshard(
    np.arange(8, dtype=np.float32),
    ShardLayout((8,), [((slice(0, 4),), devices[0]), ((slice(0, 4),), devices[1]), ((slice(4, 8),), devices[2])]),
)
try:
    twice.to_jax()
    raise AssertionError("blocks held a different number of times were exported")
except ValueError as e:
    assert "this layout has 2 distinct blocks for a grid of 2, held [1, 2] times" in str(e), e

assert ml_dtypes.bfloat16 == jnp.bfloat16
print("checked")
