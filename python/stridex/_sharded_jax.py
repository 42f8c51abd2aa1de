"""JAX's side of sharded arrays (docs/sharded.md): a jax.Array's shards as a ShardedView, and a
ShardedView as one sharded jax.Array, zero-copy both ways. Imported only when a call needs JAX."""

from __future__ import annotations

import math
from typing import Any

import jax
import numpy

from . import _stridex
from ._sharded_index import Index, _box, _fmt
from ._stridex import Device


def device_of(device: Any) -> Device:
    """The stridex Device of a JAX device's memory: CPU devices are all host memory (DLPack's
    cpu:0), a GPU is cuda:<its ordinal in this process>."""
    if device.platform == "cpu":
        return Device("cpu")
    if device.platform in ("gpu", "cuda"):
        return Device(f"cuda:{device.local_hardware_id}")
    raise ValueError(f"stridex shards cpu and CUDA devices, found a JAX {device.platform} device ({device})")


def from_jax(x: Any) -> tuple[tuple[int, ...], Any, list[tuple[Any, ...]], Any]:
    """(global shape, dtype, Shard arguments per shard, sharding) of a jax.Array: _sharded.py makes
    the ShardedView (this module does not import it: it sits below the types)."""
    sharding = x.sharding
    # Every device's index ranges, this process's and the others' (a multi-process array).
    index_map = sharding.devices_indices_map(tuple(x.shape))
    local = {s.device: s for s in x.addressable_shards}
    shards = []
    for device, index in index_map.items():
        if device in local:
            shards.append((index, _stridex.view(local[device].data), device_of(device), device))
        else:
            shards.append((index, None, device_of(device), device, device.process_index))
    return tuple(x.shape), _stridex.dtype(x.dtype), shards, sharding


def jax_device(shard: Any) -> Any:
    """The JAX device a shard is exported to: the one it came from, else the JAX device of its
    memory (a GPU by ordinal; host memory only where JAX has one CPU device)."""
    if shard.origin is not None and hasattr(shard.origin, "platform"):
        return shard.origin
    assert shard.device is not None
    if shard.device.type == "cuda":
        for d in jax.local_devices():
            if d.platform in ("gpu", "cuda") and d.local_hardware_id == shard.device.id:
                return d
        raise ValueError(f"to_jax(): JAX sees no GPU for {shard.device} (its local devices: {jax.local_devices()})")
    cpus = jax.local_devices(backend="cpu")
    if shard.device.type == "cpu" and len(cpus) == 1:
        return cpus[0]
    raise ValueError(
        f"to_jax(): the shard {_fmt(shard.index)} on {shard.device} names no JAX device; build the layout with "
        "JAX devices (ShardLayout over jax.devices()) to export host shards to several JAX CPU devices"
    )


def _same_map(sharding: Any, shape: tuple[int, ...], wanted: dict[Any, Index]) -> bool:
    try:
        got = sharding.devices_indices_map(shape)
    except Exception:  # noqa: BLE001 - a sharding that cannot describe this shape is no match
        return False
    if set(got) != set(wanted):
        return False
    return all(_box(got[d], shape, "sharding") == wanted[d] for d in got)


def _named_sharding(sv: Any, devices: list[Any]) -> Any:
    """A NamedSharding with the layout's blocks: a mesh of one axis per dimension (its number of
    blocks) and a last axis of replicas. JAX cuts dimensions evenly: a layout it cannot express
    raises ValueError saying why."""
    shape = sv.shape
    boxes = [s.index for s in sv.shards]
    cuts = []
    for d, extent in enumerate(shape):
        ranges = sorted({(b[d].start, b[d].stop) for b in boxes})
        k = len(ranges)
        even = [(i * extent // k, (i + 1) * extent // k) for i in range(k)]
        if extent % k or ranges != even:
            raise ValueError(
                f"to_jax(): JAX cuts a dimension into equal blocks; dimension {d} of extent {extent} is cut into "
                f"{[f'{a}:{b}' for a, b in ranges]}"
            )
        cuts.append(ranges)
    blocks = math.prod(len(c) for c in cuts)
    # Keyed by (start, stop) pairs: slices hash only from Python 3.12 on.
    holders: dict[tuple[tuple[int, int], ...], list[Any]] = {}
    for b, dev in zip(boxes, devices):
        holders.setdefault(tuple((s.start, s.stop) for s in b), []).append(dev)
    replicas = {len(h) for h in holders.values()}
    if len(holders) != blocks or len(replicas) != 1:
        raise ValueError(
            "to_jax(): a JAX sharding is a grid of blocks, each held by as many devices; this layout has "
            f"{len(holders)} distinct blocks for a grid of {blocks}, held {sorted(replicas)} times"
        )
    r = replicas.pop()
    mesh = numpy.empty([len(c) for c in cuts] + [r], dtype=object)
    for bounds, hs in holders.items():
        at = tuple(cuts[d].index(bounds[d]) for d in range(len(shape)))
        for j, dev in enumerate(hs):
            mesh[at + (j,)] = dev
    names = tuple(f"dim{d}" for d in range(len(shape))) + ("replica",)
    spec = jax.sharding.PartitionSpec(  # type: ignore[no-untyped-call]  # JAX's own annotation is missing
        *[names[d] if len(cuts[d]) > 1 else None for d in range(len(shape))]
    )
    return jax.sharding.NamedSharding(jax.sharding.Mesh(mesh, names), spec)


def _export(shard: Any, device: Any) -> Any:
    """One shard as a single-device jax.Array over the same memory."""
    v = shard.view
    assert v is not None
    if v.device.type == "cpu":
        # JAX's CPU client aliases aligned host memory handed to device_put (may_alias), on any of
        # its CPU devices; DLPack would put every host shard on CPU device 0.
        # numpy.asarray, not from_dlpack: NumPy's DLPack import has no bfloat16 (the array interface does).
        return jax.device_put(numpy.asarray(v), device, may_alias=True)
    try:
        return jax.dlpack.from_dlpack(v, device=device, copy=False)
    except TypeError:  # a JAX whose from_dlpack takes no device: the DLPack device decides
        out = jax.dlpack.from_dlpack(v)
        if out.devices() != {device}:
            raise ValueError(f"to_jax(): the shard on {v.device} arrived on {out.devices()}, not on {device}") from None
        return out


def to_jax(sv: Any) -> Any:
    devices = [jax_device(s) for s in sv.shards]
    if len(set(devices)) != len(devices):
        raise ValueError(f"to_jax(): a jax.Array holds one shard per device; these shards share devices: {devices}")
    wanted = {d: s.index for d, s in zip(devices, sv.shards)}
    sharding = sv._sharding
    if sharding is None or not _same_map(sharding, sv.shape, wanted):
        sharding = _named_sharding(sv, devices)
        if not _same_map(sharding, sv.shape, wanted):  # the mesh's map is the layout's, or no export
            raise ValueError(f"to_jax(): no JAX sharding found for {sv.layout}")
    arrays = [_export(s, d) for s, d in zip(sv.shards, devices)]
    return jax.make_array_from_single_device_arrays(sv.shape, sharding, arrays)
