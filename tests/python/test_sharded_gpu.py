"""Sharded arrays over 2 and 4 GPUs (docs/sharded.md): JAX <-> torch <-> CuPy round trips with
pointers equal per shard and every element checked; reshards among row, column, 2-D block and
replicated layouts (direct and host-free staged pieces); a producer still sleeping on one GPU while
the reshard is enqueued; a captured sharded copy. With fewer GPUs than shards, the torch and CuPy
tests put several shards on one GPU (the same plans, copies and stream order, without the
peer-to-peer path); the JAX tests need one GPU per shard and skip with a reason."""

from __future__ import annotations

import os
import time

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # JAX beside torch on the same GPUs

import numpy as np
import pytest
from conftest import cuda_device_count

import stridex
from stridex import ShardedView, ShardLayout
from stridex import _sharded

GPUS = cuda_device_count()
pytestmark = pytest.mark.skipif(GPUS < 1, reason="sharded arrays over GPUs need a CUDA GPU, found none")

SHAPE = (96, 160)  # cut evenly by 2 and 4 in both dimensions, so JAX can express every layout


def gpus_param():
    """n shards, on n GPUs where there are (the ids say how many GPUs they share)."""
    return pytest.mark.parametrize("n", [2, 4], ids=lambda n: f"{n}-shards-on-{min(n, GPUS)}-gpus")


def devices(n):
    """n shard places, wrapped onto the GPUs there are."""
    return [f"cuda:{i % GPUS}" for i in range(n)]


def layouts(n):
    """Row, column, 2-D block and replicated layouts over n GPUs."""
    grid = (2, n // 2)
    return {
        "rows": ShardLayout.rows(SHAPE, devices(n)),
        "columns": ShardLayout.columns(SHAPE, devices(n)),
        "blocks": ShardLayout.blocks(SHAPE, grid, devices(n)),
        "replicated": ShardLayout.replicated(SHAPE, devices(n)),
    }


def torch_sharded(torch, glob, layout):
    """torch tensors holding glob's blocks on their GPUs, as a ShardedView (from_arrays)."""
    parts, offsets = [], []
    for index, device in layout.shards:
        parts.append(glob[index].to(str(device)).contiguous())
        offsets.append([s.start for s in index])
    torch.cuda.synchronize()
    return ShardedView.from_arrays(parts, offsets, shape=glob.shape), parts


def sync_all(torch, n):
    for i in range(min(n, GPUS)):
        torch.cuda.synchronize(i)


def expect_holds(torch, sv, glob):
    """Every element of every shard equals the global array's (read back through torch, the same
    memory)."""
    for s, (index, t) in zip(sv.shards, sv.to_torch()):
        assert t.data_ptr() == s.view.ptr and index == s.index
        assert torch.equal(t.cpu(), glob[index]), index


@gpus_param()
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("src_kind", ["rows", "columns", "blocks", "replicated"])
def test_reshards_among_every_layout_check_every_element(torch_with_cuda, n, dtype, src_kind):
    torch = torch_with_cuda
    glob = torch.arange(SHAPE[0] * SHAPE[1], dtype=torch.float32).reshape(SHAPE).to(getattr(torch, dtype))
    all_layouts = layouts(n)
    src, parts = torch_sharded(torch, glob, all_layouts[src_kind])
    assert [s.view.ptr for s in src.shards] == [p.data_ptr() for p in parts]
    for dst_kind, layout in all_layouts.items():
        out = stridex.reshard(src, layout)
        assert [str(s.device) for s in out.shards] == [str(d) for _, d in layout.shards]
        sync_all(torch, n)
        expect_holds(torch, out, glob)
        # Into existing memory through stridex.copy, and through host-free staged pieces (the path
        # of GPU pairs without peer access, forced here).
        target, _ = torch_sharded(torch, torch.zeros_like(glob), layout)
        assert stridex.copy(target, src) is target
        sync_all(torch, n)
        expect_holds(torch, target, glob)
        staged, _ = torch_sharded(torch, torch.zeros_like(glob), layout)
        _sharded.copy(staged, src, _staged=True)
        sync_all(torch, n)
        expect_holds(torch, staged, glob)


@gpus_param()
def test_gather_and_scatter_between_a_sharded_array_and_one_gpu(torch_with_cuda, n):
    torch = torch_with_cuda
    glob = torch.randn(SHAPE)
    src, _ = torch_sharded(torch, glob, layouts(n)["columns"])
    one = torch.zeros(SHAPE, device="cuda:0")
    stridex.copy(one, src)
    sync_all(torch, n)
    assert torch.equal(one.cpu(), glob)
    back = stridex.reshard(one, layouts(n)["blocks"])
    sync_all(torch, n)
    expect_holds(torch, back, glob)


@gpus_param()
def test_jax_torch_cupy_round_trips_keep_every_pointer(torch_with_cuda, jax_gpu, n):
    jax, _ = jax_gpu
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    jgpus = jax.devices("gpu")
    if len(jgpus) < n:
        pytest.skip(f"JAX sees {len(jgpus)} GPUs, the test needs {n}")
    mesh = jax.sharding.Mesh(np.array(jgpus[:n]).reshape(2, n // 2), ("x", "y"))
    glob = np.arange(SHAPE[0] * SHAPE[1], dtype=np.float32).reshape(SHAPE)
    for spec in (P("x", "y"), P("x"), P(None, "y"), P()):
        x = jax.device_put(glob, NamedSharding(mesh, spec))
        x.block_until_ready()
        sv = ShardedView.from_jax(x)
        by_device = {s.device: s.data.unsafe_buffer_pointer() for s in x.addressable_shards}
        jax_ptrs = [by_device[s.origin] for s in sv.shards]  # in the ShardedView's shard order
        assert [s.view.ptr for s in sv.shards] == jax_ptrs
        # JAX -> torch: per-device tensors over the same memory.
        tensors = sv.to_torch()
        assert [t.data_ptr() for _, t in tensors] == jax_ptrs
        for index, t in tensors:
            assert np.array_equal(t.cpu().numpy(), glob[index])
        # torch -> ShardedView -> JAX: one sharded jax.Array, the same memory again.
        back = ShardedView.from_arrays([t for _, t in tensors], [[s.start for s in i] for i, _ in tensors])
        shards = [stridex.Shard(s.index, s.view, s.device, o.origin) for s, o in zip(back.shards, sv.shards)]
        y = ShardedView(back.shape, back.dtype, shards, sharding=x.sharding).to_jax()
        assert {s.device: s.data.unsafe_buffer_pointer() for s in y.addressable_shards} == by_device
        assert np.array_equal(np.asarray(y), glob)
        # A layout made without JAX exports with a NamedSharding built from it.
        z = ShardedView.from_arrays([t for _, t in tensors], [[s.start for s in i] for i, _ in tensors]).to_jax()
        assert sorted(s.data.unsafe_buffer_pointer() for s in z.addressable_shards) == sorted(jax_ptrs)
        assert np.array_equal(np.asarray(z), glob)
        try:
            import cupy
        except ImportError:
            continue
        arrays = sv.to_cupy()
        assert [a.data.ptr for _, a in arrays] == jax_ptrs
        for index, a in arrays:
            assert np.array_equal(cupy.asnumpy(a), glob[index])
        w = ShardedView.from_arrays([a for _, a in arrays], [[s.start for s in i] for i, _ in arrays]).to_jax()
        assert np.array_equal(np.asarray(w), glob)


@gpus_param()
def test_jax_reshards_check_every_element_and_export_back(jax_gpu, n):
    jax, _ = jax_gpu
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    jgpus = jax.devices("gpu")[:n]
    if len(jgpus) < n:
        pytest.skip(f"JAX sees fewer than {n} GPUs")
    mesh = jax.sharding.Mesh(np.array(jgpus).reshape(2, n // 2), ("x", "y"))
    glob = np.arange(SHAPE[0] * SHAPE[1], dtype=np.float32).reshape(SHAPE)
    x = jax.device_put(glob, NamedSharding(mesh, P("x", "y")))
    current = ShardedView.from_jax(x)
    for layout in (
        ShardLayout.rows(SHAPE, jgpus),
        ShardLayout.columns(SHAPE, jgpus),
        ShardLayout.blocks(SHAPE, (2, n // 2), jgpus),
        ShardLayout.replicated(SHAPE, jgpus),
    ):
        current = stridex.reshard(current, layout)
        j = current.to_jax()
        exported = {s.device: s.data.unsafe_buffer_pointer() for s in j.addressable_shards}
        assert exported == {s.origin: s.view.ptr for s in current.shards}
        assert np.array_equal(np.asarray(j), glob)


@gpus_param()
def test_a_sleeping_producer_orders_the_reshard_without_a_host_wait(torch_with_cuda, n):
    torch = torch_with_cuda
    glob = torch.arange(SHAPE[0] * SHAPE[1], dtype=torch.float32).reshape(SHAPE)
    rows = layouts(n)["rows"]
    columns = layouts(n)["columns"]
    warm, _ = torch_sharded(torch, glob, rows)
    stridex.reshard(warm, columns)  # kernels loaded, peer access enabled: no first-use host waits below
    sync_all(torch, n)
    parts = [torch.zeros(tuple(s.stop - s.start for s in i), device=str(d)) for i, d in rows.shards]
    first = glob[rows.shards[0][0]].to("cuda:0")  # on the GPU before the sleep: a pageable copy waits
    for p, (index, _) in zip(parts[1:], rows.shards[1:]):
        p.copy_(glob[index])
    sync_all(torch, n)
    producer = torch.cuda.Stream(device=0)
    with torch.cuda.device(0), torch.cuda.stream(producer):
        torch.cuda._sleep(int(2e9))  # about a second on an H200
        parts[0].copy_(first, non_blocking=True)  # the producer's write, after the sleep
        # Imported while the producer's stream is current: the Views' stream waits for it (an event).
        src = ShardedView.from_arrays(parts, [[s.start for s in i] for i, _ in rows.shards], shape=SHAPE)
    started = time.perf_counter()
    out = stridex.reshard(src, columns)
    enqueued = time.perf_counter() - started
    still_sleeping = not producer.query()
    sync_all(torch, n)
    assert still_sleeping, f"the host waited for the producer (the reshard took {enqueued:.3f} s to return)"
    expect_holds(torch, out, glob)


def test_a_sharded_copy_onto_one_gpu_is_captured_and_replayed(torch_with_cuda):
    torch = torch_with_cuda
    glob = torch.randn(SHAPE)
    src, parts = torch_sharded(torch, glob, layouts(2)["columns"])
    dst, (whole,) = torch_sharded(torch, torch.zeros(SHAPE), ShardLayout.replicated(SHAPE, ["cuda:0"]))
    stridex.copy(dst, src)  # warm: peer access enabled, kernels loaded
    sync_all(torch, 2)
    # Views with nothing pending (NO_SYNC imports after the synchronize): the capture holds the
    # pieces alone, no wait on a stream outside it.
    src = ShardedView(
        SHAPE,
        "float32",
        [stridex.Shard(s.index, stridex.view(p, stream=stridex.NO_SYNC), s.device) for s, p in zip(src.shards, parts)],
    )
    dst = ShardedView(
        SHAPE, "float32", [stridex.Shard(dst.shards[0].index, stridex.view(whole, stream=stridex.NO_SYNC), None)]
    )
    stream = torch.cuda.Stream(device=0)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.device(0):
        # torch.cuda.graph ends the capture when its block is left, on an exception too.
        with torch.cuda.graph(graph, stream=stream):
            stridex.copy(dst, src, stream={0: stream})
        new = torch.randn(SHAPE)
        for p, (index, _) in zip(parts, layouts(2)["columns"].shards):
            p.copy_(new[index])
        whole.zero_()
        sync_all(torch, 2)
        graph.replay()
        torch.cuda.synchronize(0)
    assert torch.equal(whole.cpu(), new)
