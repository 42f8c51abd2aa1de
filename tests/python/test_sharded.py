"""Sharded arrays on the CPU (docs/sharded.md): the index arithmetic of every sharding kind, plans
checked element by element (hypothesis), the errors with their words, per-array and DTensor
imports, copies behind stridex.copy, and JAX over several virtual CPU devices in a subprocess (JAX
is imported by other tests of this process with one CPU device)."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import stridex
from stridex import Shard, ShardedView, ShardLayout

HERE = Path(__file__).resolve().parent


def chunk(n, k, i):
    """torch.chunk's sizes: chunks of ceil(n / k), the last ones shorter or empty."""
    size = -(-n // k)
    start = min(i * size, n)
    return start, min(start + size, n)


def aligned(shape, dtype=np.float32, fill=None):
    """A C-contiguous host array (stridex.empty: 64-byte aligned), filled with `fill` or its
    global indices."""
    v = stridex.empty(shape, dtype)
    a = np.from_dlpack(v)
    a[...] = np.arange(math.prod(shape), dtype=dtype).reshape(shape) if fill is None else fill
    return v, a


def sharded_from(glob, layout):
    """A ShardedView of host shards holding glob's blocks as `layout` says."""
    shards = []
    for index, device in layout.shards:
        v, a = aligned(tuple(s.stop - s.start for s in index), glob.dtype, glob[index])
        # A device spelling, or a jax.Device kept as the shard's origin for the export back.
        named = isinstance(device, (str, stridex.Device))
        shards.append(Shard(index, v, stridex.Device(device) if named else None, None if named else device))
    return ShardedView(glob.shape, glob.dtype, shards)


def expect_holds(sv, glob):
    """Every element of every held shard (replicas too) equals the global array's."""
    for s in sv.shards:
        assert np.array_equal(np.from_dlpack(s.view), glob[s.index]), s


# --- index arithmetic of every kind -------------------------------------------------------------

shapes = st.lists(st.integers(0, 9), min_size=1, max_size=3).map(tuple)


@settings(max_examples=150, deadline=None)
@given(shape=shapes, data=st.data())
def test_grid_layouts_cut_as_torch_chunk_and_cover_once(shape, data):
    grid = tuple(data.draw(st.lists(st.integers(1, 4), min_size=0, max_size=len(shape))))
    replicas = data.draw(st.integers(1, 2))
    blocks = math.prod(grid)
    layout = ShardLayout.grid(shape, grid, ["cpu"] * (blocks * replicas))
    assert len(layout) == blocks * replicas
    count = np.zeros(shape, dtype=np.int64)
    for b, (index, device) in enumerate(layout.shards):
        at = np.unravel_index(b // replicas, grid) if grid else ()
        for d, s in enumerate(index):
            expected = chunk(shape[d], grid[d], int(at[d])) if d < len(grid) else (0, shape[d])
            assert (s.start, s.stop, s.step) == (*expected, None)
        count[index] += 1
        assert device == "cpu"
    assert (count == replicas).all()


@pytest.mark.parametrize(
    ("make", "boxes"),
    [
        (lambda d: ShardLayout.rows((5, 4), d), [((0, 2), (0, 4)), ((2, 4), (0, 4)), ((4, 5), (0, 4))]),
        (lambda d: ShardLayout.columns((5, 4), d), [((0, 5), (0, 2)), ((0, 5), (2, 4)), ((0, 5), (4, 4))]),
        (lambda d: ShardLayout.blocks((4, 4), (1, 3), d), [((0, 4), (0, 2)), ((0, 4), (2, 4)), ((0, 4), (4, 4))]),
        (lambda d: ShardLayout.replicated((2, 3), d), [((0, 2), (0, 3))] * 3),
    ],
    ids=["rows", "columns", "blocks", "replicated"],
)
def test_each_named_kind(make, boxes):
    layout = make(["cpu", "cpu", "cpu"])
    assert [tuple((s.start, s.stop) for s in i) for i, _ in layout.shards] == boxes


def test_arbitrary_block_lists_and_their_spellings():
    layout = ShardLayout((4, 6), [((slice(0, 4), slice(0, 2)), "cpu"), (((0, 4), (2, 6)), stridex.Device("cpu"))])
    assert layout.shards[1][0] == (slice(0, 4), slice(2, 6))
    assert "ShardLayout((4, 6), {[0:4, 0:2]: cpu" in repr(layout)
    open_ended = ShardLayout((4,), [((slice(None, 2),), "cpu"), ((slice(2, None),), "cpu")])
    assert open_ended.shards[1][0] == (slice(2, 4),)


# --- plans -------------------------------------------------------------------------------------


def layouts(shape):
    grids = st.lists(st.integers(1, 3), min_size=0, max_size=len(shape)).map(tuple)
    return st.tuples(grids, st.integers(1, 2)).map(
        lambda g: ShardLayout.grid(shape, g[0], ["cpu"] * (math.prod(g[0]) * g[1]))
    )


@settings(max_examples=120, deadline=None)
@given(shape=shapes, data=st.data())
def test_plans_fill_every_destination_element_from_one_source(shape, data):
    src, dst = data.draw(layouts(shape)), data.draw(layouts(shape))
    glob = np.arange(math.prod(shape), dtype=np.int64).reshape(shape)
    written = [np.zeros(tuple(s.stop - s.start for s in i), dtype=np.int64) for i, _ in dst.shards]
    for p in src.plan(dst):
        src_index = src.shards[p.src][0]
        # The piece's boxes are the global box in each shard's coordinates.
        assert all(g.start - o.start == s.start for g, o, s in zip(p.index, src_index, p.src_index))
        block = glob[src_index][p.src_index]
        assert np.array_equal(block, glob[p.index])
        written[p.dst][p.dst_index] += block + 1
    for (index, _), w in zip(dst.shards, written):
        assert np.array_equal(w, glob[index] + 1)  # each element once, from the right place


@settings(max_examples=60, deadline=None)
@given(shape=shapes, data=st.data())
def test_sharded_copies_through_stridex_copy_check_every_element(shape, data):
    src, dst = data.draw(layouts(shape)), data.draw(layouts(shape))
    glob = np.arange(math.prod(shape), dtype=np.float32).reshape(shape)
    a = sharded_from(glob, src)
    b = sharded_from(np.zeros(shape, np.float32), dst)
    assert stridex.copy(b, a) is b
    expect_holds(b, glob)
    r = stridex.reshard(a, dst)
    expect_holds(r, glob)
    assert r.layout.shards == dst.shards


def test_plans_prefer_the_destinations_own_replica():
    devices = ["cuda:0", "cuda:1", "cuda:2", "cuda:3"]
    pieces = ShardLayout.replicated((8, 8), devices).plan(ShardLayout.blocks((8, 8), (2, 2), devices))
    assert [(p.src, p.dst) for p in pieces] == [(0, 0), (1, 1), (2, 2), (3, 3)]
    # Row to column over four GPUs: each destination starts with its own GPU, then the next.
    pieces = ShardLayout.rows((8, 8), devices).plan(ShardLayout.columns((8, 8), devices))
    assert [p.src for p in pieces if p.dst == 2] == [2, 3, 0, 1]
    assert pieces[0].index == (slice(0, 2), slice(0, 2)) and pieces[0].dst_index == (slice(0, 2), slice(0, 2))


def test_plans_spread_reads_over_replicas():
    src = ShardLayout.replicated((8,), ["cuda:0", "cuda:1"])
    dst = ShardLayout.rows((8,), ["cuda:2", "cuda:3", "cuda:4", "cuda:5"])
    reads = [p.src for p in src.plan(dst)]
    assert sorted(reads) == [0, 0, 1, 1]


# --- views of arrays, gathers and scatters --------------------------------------------------------


def test_from_arrays_is_zero_copy_and_gathers_and_scatters():
    glob = np.arange(24, dtype=np.float32).reshape(4, 6)
    parts = [aligned((4, 3), fill=glob[:, :3])[1], aligned((4, 3), fill=glob[:, 3:])[1]]
    sv = ShardedView.from_arrays(parts, [(0, 0), (0, 3)])
    assert sv.shape == (4, 6) and sv.dtype == "float32" and sv.ndim == 2 and not sv.partial
    assert [s.view.ptr for s in sv.shards] == [p.ctypes.data for p in parts]
    assert [i for i, _ in sv.to_numpy()] == [(slice(0, 4), slice(0, 3)), (slice(0, 4), slice(3, 6))]
    assert [a.ctypes.data for _, a in sv.to_numpy()] == [p.ctypes.data for p in parts]
    out = np.zeros((4, 6), np.float32)
    assert stridex.copy(out, sv) is out  # a gather into one array
    assert np.array_equal(out, glob)
    back = ShardedView.from_arrays([np.zeros((2, 6), np.float32), np.zeros((2, 6), np.float32)], [(0, 0), (2, 0)])
    stridex.copy(back, glob)  # a scatter from one array
    expect_holds(back, glob)
    parts[0][0, 0] = 99  # the shard is the array's memory
    assert np.from_dlpack(sv.shards[0].view)[0, 0] == 99
    assert "ShardedView(shape=(4, 6), dtype=float32" in repr(sv) and "Shard([0:4, 0:3] on cpu)" in repr(sv)


def test_reshard_of_one_array_and_a_replicated_result():
    glob = np.arange(30, dtype=np.float64).reshape(5, 6)
    r = stridex.reshard(glob, ShardLayout.replicated((5, 6), ["cpu", "cpu"]))
    expect_holds(r, glob)
    assert r.shards[0].view.ptr != r.shards[1].view.ptr


def test_zero_dimensional_and_empty_arrays():
    r = stridex.reshard(np.float32(3.5), ShardLayout.replicated((), ["cpu", "cpu"]))
    assert [float(np.from_dlpack(s.view)) for s in r.shards] == [3.5, 3.5]
    e = stridex.reshard(np.zeros((0, 4), np.float32), ShardLayout.columns((0, 4), ["cpu", "cpu"]))
    assert [s.shape for s in e.shards] == [(0, 2), (0, 2)]


# --- errors ------------------------------------------------------------------------------------


def test_overlapping_and_missing_shards_are_named():
    with pytest.raises(ValueError, match=r"shards 0 \[0:3, 0:4\] and 1 \[2:4, 0:4\] overlap without being identical"):
        ShardLayout((4, 4), [(((0, 3), (0, 4)), "cpu"), (((2, 4), (0, 4)), "cpu")])
    with pytest.raises(
        ValueError, match=r"cover 8 of the 16 elements of the global shape \(4, 4\); no shard holds element \(2, 0\)"
    ):
        ShardLayout((4, 4), [(((0, 2), (0, 4)), "cpu")])
    with pytest.raises(ValueError, match=r"shard 0: expected 2 index ranges for the global shape \(4, 4\), found 1"):
        ShardLayout((4, 4), [(((0, 4),), "cpu")])
    with pytest.raises(ValueError, match=r"shard 0: the index ranges \[0:5, 0:4\] leave the global shape \(4, 4\)"):
        ShardLayout((4, 4), [((slice(0, 5), slice(0, 4)), "cpu")])
    with pytest.raises(ValueError, match=r"shard 0: the index ranges \[0:4, 0:9\] leave the global shape \(4, 4\)"):
        ShardLayout((4, 4), [(((0, 4), (0, 9)), "cpu")])
    with pytest.raises(ValueError, match=r"block shards take index ranges of step 1, found slice\(0, 4, 2\)"):
        ShardLayout((4,), [((slice(0, 4, 2),), "cpu")])
    with pytest.raises(TypeError, match="an index range is a slice or a \\(start, stop\\) pair, found int"):
        ShardLayout((4,), [((3,), "cpu")])
    with pytest.raises(ValueError, match="a grid of 2 blocks needs a multiple of 2 devices, found 3"):
        ShardLayout.rows((4,), ["cpu"] * 3).grid((4,), (2,), ["cpu"] * 3)
    with pytest.raises(ValueError, match=r"a grid of 2 dimensions cannot cut the global shape \(4,\)"):
        ShardLayout.blocks((4,), (1, 1), ["cpu"])


def test_shards_of_the_wrong_shape_dtype_or_device_are_named():
    v, _ = aligned((2, 3))
    with pytest.raises(
        ValueError, match=r"shard 0: its index ranges \[0:2, 0:4\] hold shape \(2, 4\), its view has shape \(2, 3\)"
    ):
        ShardedView((2, 4), "float32", [Shard((slice(0, 2), slice(0, 4)), v, None)])
    with pytest.raises(TypeError, match="shard 0: expected dtype float64, found float32"):
        ShardedView((2, 3), "float64", [Shard((slice(0, 2), slice(0, 3)), v, None)])
    with pytest.raises(ValueError, match="shard 0: said to be on cuda:0, its view is on cpu"):
        ShardedView((2, 3), "float32", [Shard((slice(0, 2), slice(0, 3)), v, stridex.Device("cuda:0"))])
    with pytest.raises(TypeError, match="shard 0: expected a stridex.Shard, found tuple"):
        ShardedView((2, 3), "float32", [((slice(0, 2), slice(0, 3)), v)])
    with pytest.raises(ValueError, match=r"cover 6 of the 12 elements of the global shape \(4, 3\)"):
        ShardedView((4, 3), "float32", [Shard((slice(0, 2), slice(0, 3)), v, None)])
    with pytest.raises(ValueError, match="expected one offset per array \\(2\\), found 1"):
        ShardedView.from_arrays([v, v], [(0, 0)])
    with pytest.raises(ValueError, match="array 0: expected 2 offsets \\(its ndim\\), found 1"):
        ShardedView.from_arrays([v], [(0,)])
    with pytest.raises(ValueError, match="needs at least one array"):
        ShardedView.from_arrays([], [])
    with pytest.raises(ValueError, match=r"the shards cover 6 of the 12 elements of the global shape \(2, 6\)"):
        ShardedView.from_arrays([v], [(0, 0)], shape=(2, 6))


def test_copies_between_mismatched_arrays_are_refused_before_anything_is_written():
    glob = np.arange(16, dtype=np.float32).reshape(4, 4)
    a = sharded_from(glob, ShardLayout.rows((4, 4), ["cpu", "cpu"]))
    with pytest.raises(ValueError, match=r"the destination's global shape is \(4, 5\), the source's \(4, 4\)"):
        stridex.copy(sharded_from(np.zeros((4, 5), np.float32), ShardLayout.rows((4, 5), ["cpu"])), a)
    with pytest.raises(ValueError, match="the destination's dtype is float64, the source's float32 \\(no casting\\)"):
        stridex.copy(sharded_from(np.zeros((4, 4)), ShardLayout.rows((4, 4), ["cpu"])), a)
    dst = sharded_from(np.zeros((4, 4), np.float32), ShardLayout.columns((4, 4), ["cpu", "cpu"]))
    ro = ShardedView(
        (4, 4),
        "float32",
        [dst.shards[0], Shard(dst.shards[1].index, stridex.view(dst.shards[1].view, writable=False), None)],
    )
    with pytest.raises(BufferError, match=r"cannot copy into a read-only view \(destination shard 1 \[0:4, 2:4\]\)"):
        stridex.copy(ro, a)
    assert not np.from_dlpack(dst.shards[0].view).any()  # nothing half copied
    with pytest.raises(TypeError, match="layout must be a stridex.ShardLayout, found tuple"):
        stridex.reshard(a, (4, 4))
    with pytest.raises(ValueError, match=r"the layout's global shape is \(4, 2\), the source's \(4, 4\)"):
        stridex.reshard(a, ShardLayout.rows((4, 2), ["cpu"]))
    with pytest.raises(ValueError, match="a sharded copy's streams are keyed by CUDA devices, found cpu"):
        stridex.copy(dst, a, stream={"cpu": 1})


def test_stream_arguments_of_a_sharded_copy():
    from stridex import _sharded

    assert _sharded._streams(None, {0, 1}) is None
    assert _sharded._streams(stridex.NO_SYNC, {0, 1}) is stridex.NO_SYNC
    assert _sharded._streams(-1, {0}) is stridex.NO_SYNC
    marker = object()
    assert _sharded._streams({1: marker, "cuda:2": 7}, {1, 2}) == {1: marker, 2: 7}
    assert _sharded._streams(marker, {3}) == {3: marker}  # one GPU: one stream is enough
    assert _sharded._streams(marker, set()) is None  # host memory only: no stream
    with pytest.raises(TypeError, match=r"this sharded copy runs on 2 GPUs \(cuda:0, cuda:1\); pass a dict"):
        _sharded._streams(marker, {1, 0})


def test_the_private_executor_refuses_what_is_no_piece():
    v = stridex.empty((2,), "float32")
    with pytest.raises(TypeError, match="dst holds Views only"):
        stridex._stridex._copy_pieces([1], [v], [], None)
    with pytest.raises(TypeError, match="src holds Views only"):
        stridex._stridex._copy_pieces([v], [1], [], None)
    with pytest.raises(IndexError, match="a piece names no shard"):
        stridex._stridex._copy_pieces([v], [v], [(1, 0, (0,), (0,), (2,))], None)
    with pytest.raises(TypeError, match="streams must be None, NO_SYNC or a dict"):
        stridex._stridex._copy_pieces([v], [v], [], 5)


def test_unrepresentable_jax_exports_say_why():
    jax = pytest.importorskip("jax")
    glob = np.arange(9, dtype=np.float32)
    one = jax.devices("cpu")[0]
    uneven = sharded_from(glob, ShardLayout.rows((9,), [one]))
    assert np.array_equal(np.asarray(uneven.to_jax()), glob)  # one device: no cut at all
    two = ShardedView.from_arrays([aligned((5,))[1], aligned((4,))[1]], [(0,), (5,)])
    with pytest.raises(ValueError, match="a jax.Array holds one shard per device; these shards share devices"):
        two.to_jax()


# --- DTensor, through its public attributes ---------------------------------------------------


class Placement:
    def __init__(self, kind, dim=None):
        self.kind, self.dim = kind, dim

    def is_shard(self):
        return self.kind == "shard"

    def is_replicate(self):
        return self.kind == "replicate"

    def __repr__(self):
        return f"{self.kind.capitalize()}({'' if self.dim is None else self.dim})"


class _StridedShard(Placement):
    pass


def fake_dtensor(shape, mesh_shape, placements, rank, local):
    ranks = np.arange(math.prod(mesh_shape)).reshape(mesh_shape)
    mesh = SimpleNamespace(mesh=ranks, get_rank=lambda: rank, device_type="cpu")
    return SimpleNamespace(
        shape=shape, device_mesh=mesh, placements=placements, to_local=lambda: local, dtype=local.dtype
    )


@pytest.mark.parametrize(
    ("placements", "rank", "expected"),
    [
        ((Placement("shard", 0), Placement("shard", 1)), 3, (slice(4, 8), slice(3, 6))),
        ((Placement("shard", 0), Placement("replicate")), 1, (slice(0, 4), slice(0, 6))),
        ((Placement("shard", 0), Placement("shard", 0)), 1, (slice(2, 4), slice(0, 6))),  # cut twice
        ((Placement("replicate"), Placement("shard", -1)), 2, (slice(0, 8), slice(0, 3))),
    ],
)
def test_dtensor_local_shard_held_others_described(placements, rank, expected):
    glob = np.arange(48, dtype=np.float32).reshape(8, 6)
    local = aligned(tuple(s.stop - s.start for s in expected), fill=glob[expected])[1]
    sv = ShardedView.from_dtensor(fake_dtensor((8, 6), (2, 2), placements, rank, local))
    assert sv.partial and len(sv.shards) == 4
    mine = [s for s in sv.shards if s.held]
    assert len(mine) == 1 and mine[0].index == expected and mine[0].view.ptr == local.ctypes.data
    assert sorted(s.rank for s in sv.shards if not s.held) == sorted({0, 1, 2, 3} - {rank})
    assert "not held" in repr(sv.shards[0 if rank else 1])


def test_partial_dtensors_refuse_what_needs_missing_data():
    glob = np.arange(48, dtype=np.float32).reshape(8, 6)
    local = aligned((4, 6), fill=glob[:4])[1]
    sv = ShardedView.from_dtensor(fake_dtensor((8, 6), (2,), (Placement("shard", 0),), 0, local))
    with pytest.raises(
        ValueError,
        match=r"reshard\(\) needs every element, and this partial ShardedView holds only some \(the other shards are held by ranks \[1\]\)",
    ):
        stridex.reshard(sv, ShardLayout.rows((8, 6), ["cpu"]))
    with pytest.raises(ValueError, match="stridex.copy from a sharded source needs every element"):
        stridex.copy(np.zeros((8, 6), np.float32), sv)
    with pytest.raises(ValueError, match=r"to_jax\(\) needs every element"):
        sv.to_jax()
    # A replicated DTensor holds everything: it is a source like any other.
    full = ShardedView.from_dtensor(
        fake_dtensor((8, 6), (2,), (Placement("replicate"),), 1, aligned((8, 6), fill=glob)[1])
    )
    out = np.zeros((8, 6), np.float32)
    stridex.copy(out, full)
    assert np.array_equal(out, glob)
    with pytest.raises(ValueError, match=r"the layout's shard \[4:8, 0:6\] is on another process \(1\)"):
        stridex.reshard(full, sv.layout)
    # A partial destination: only the held shard is written.
    stridex.copy(sv, np.zeros((8, 6), np.float32))
    assert not np.from_dlpack(sv.shards[0].view).any()


def test_dtensor_placements_that_are_no_blocks_are_refused():
    local = np.zeros((4, 6), np.float32)
    with pytest.raises(
        ValueError, match="mesh dimension 0 has placement Partial\\(\\): a Partial placement holds pending reductions"
    ):
        ShardedView.from_dtensor(fake_dtensor((8, 6), (2,), (Placement("partial"),), 0, local))
    with pytest.raises(ValueError, match="mesh dimension 0 has a strided shard placement"):
        ShardedView.from_dtensor(fake_dtensor((8, 6), (2,), (_StridedShard("shard", 0),), 0, local))
    with pytest.raises(ValueError, match="1 placements for a mesh of 2 dimensions"):
        ShardedView.from_dtensor(fake_dtensor((8, 6), (2, 1), (Placement("replicate"),), 0, local))
    with pytest.raises(
        ValueError, match=r"shard 0: its index ranges \[0:4, 0:6\] hold shape \(4, 6\), its view has shape \(3, 6\)"
    ):
        ShardedView.from_dtensor(fake_dtensor((8, 6), (2,), (Placement("shard", 0),), 0, np.zeros((3, 6), np.float32)))


def test_a_real_dtensor_of_one_rank():
    """torch's own DTensor (a one-rank gloo group): the attributes from_dtensor reads are torch's."""
    torch = pytest.importorskip("torch")
    dist = pytest.importorskip("torch.distributed")
    if not dist.is_available():
        pytest.skip("torch.distributed is not available in this torch build")
    tensor_api = pytest.importorskip("torch.distributed.tensor")
    from torch.distributed.device_mesh import init_device_mesh

    owned = not dist.is_initialized()
    if owned:
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        mesh = init_device_mesh("cpu", (1,))
        t = torch.arange(24, dtype=torch.float32).reshape(4, 6)
        for placement in (tensor_api.Shard(1), tensor_api.Replicate()):
            dt = tensor_api.distribute_tensor(t, mesh, [placement])
            sv = ShardedView.from_dtensor(dt)
            assert not sv.partial and sv.shape == (4, 6) and sv.dtype == "float32"
            assert sv.shards[0].index == (slice(0, 4), slice(0, 6))
            assert sv.shards[0].view.ptr == dt.to_local().data_ptr()
    finally:
        if owned:
            dist.destroy_process_group()


# --- JAX over four virtual CPU devices, in a process of its own ------------------------------------


def test_jax_sharded_round_trips_and_reshards_on_four_cpu_devices():
    pytest.importorskip("jax")
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=4", JAX_PLATFORMS="cpu")
    env["PYTHONPATH"] = os.pathsep.join([str(Path(stridex.__file__).parents[1]), env.get("PYTHONPATH", "")])
    done = subprocess.run(
        [sys.executable, str(HERE / "sharded_jax_worker.py")], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "checked" in done.stdout
