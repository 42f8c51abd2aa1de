"""Views between Dask workers (stridex.ipc.dask), CPU part: a LocalCluster of worker processes
moves host Views as frames; layouts are packed, dtypes, shapes and flags kept."""

import numpy as np
import pytest

import stridex

distributed = pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def client():
    from distributed import Client, LocalCluster

    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None, protocol="tcp"
        ) as cluster,
        Client(cluster) as c,
    ):
        yield c


def _make(kind):
    import numpy as np

    import stridex

    a = np.arange(24, dtype=np.float32).reshape(4, 6)
    if kind == "strided":
        return stridex.view(a[::-2, 1::2])
    if kind == "readonly":
        a.flags.writeable = False
        return stridex.view(a)
    if kind == "bfloat16":
        import ml_dtypes

        return stridex.view(a.astype(ml_dtypes.bfloat16))
    return stridex.view(a)


def _describe(v):
    import numpy as np

    return (
        type(v).__name__,
        v.shape,
        v.dtype.name,
        v.readonly,
        v.is_c_contiguous,
        np.asarray(v).astype(np.float32).tolist(),
    )


@pytest.mark.parametrize("kind", ["contiguous", "strided", "readonly", "bfloat16"])
def test_view_moves_between_worker_processes(client, kind):
    a, b = list(client.scheduler_info()["workers"])
    made = client.submit(_make, kind, workers=[a], pure=False)
    seen = client.submit(_describe, made, workers=[b]).result(timeout=60)
    expected = _make(kind)
    assert seen == (
        "View",
        expected.shape,
        expected.dtype.name,
        expected.readonly,
        True,
        np.asarray(expected).astype(np.float32).tolist(),
    )


def test_views_travel_as_dask_frames_not_pickles():
    from distributed.protocol import deserialize, serialize

    v = stridex.view(np.arange(6, dtype=np.int64).reshape(2, 3)[:, ::2])
    header, frames = serialize(v, serializers=("cuda", "dask", "pickle"))
    assert header["serializer"] == "dask"  # host Views decline the cuda family
    assert len(frames) == 1 and memoryview(frames[0]).nbytes == 4 * 8
    back = deserialize(header, frames)
    assert np.asarray(back).tolist() == [[0, 2], [3, 5]] and not back.readonly


def test_writable_view_received_on_read_only_frames_is_writable():
    from stridex.ipc.dask import dask_deserialize_view, dask_serialize_view

    header, frames = dask_serialize_view(stridex.view(np.arange(3, dtype=np.int8)))
    back = dask_deserialize_view(header, [bytes(frames[0])])
    np.asarray(back)[0] = 5  # a copy of the read-only frame, so writable as sent
    assert np.asarray(back).tolist() == [5, 1, 2]


def test_empty_view_has_no_frames():
    from stridex.ipc.dask import dask_deserialize_view, dask_serialize_view

    header, frames = dask_serialize_view(stridex.view(np.zeros((0, 2), dtype=np.float64)))
    assert frames == []
    assert dask_deserialize_view(header, frames).shape == (0, 2)


def test_serializers_register_when_distributed_is_imported_after_stridex():
    import subprocess
    import sys

    code = (
        "import stridex, sys; assert 'distributed' not in sys.modules; "
        "from distributed.protocol.serialize import dask_serialize; "
        "from distributed.protocol.cuda import cuda_serialize; "
        "from stridex.ipc import dask as d; "
        "assert dask_serialize.dispatch(stridex.View) is d.dask_serialize_view; "
        "assert cuda_serialize.dispatch(stridex.View) is d.cuda_serialize_view"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_non_contiguous_device_views_are_packed_by_the_copy_engine():
    # What the packing does on a GPU is tested in test_ipc_gpu.py; here, that it asks for it.
    from stridex.ipc.dask import _packed_device

    class FakeDeviceView:  # only what the packing reads
        is_c_contiguous = False

        def contiguous(self):
            return "packed"

    assert _packed_device(FakeDeviceView()) == "packed"
    v = stridex.view(np.arange(4.0))
    assert _packed_device(v) is v


def test_scatter_and_gather_move_views_from_and_to_the_client(client):
    v = stridex.view(np.arange(10, dtype=np.int32)[::3])
    future = client.scatter(v)
    seen = client.submit(_describe, future).result(timeout=60)
    assert seen[1:] == ((4,), "int32", False, True, [0.0, 3.0, 6.0, 9.0])
    back = client.gather(client.submit(_make, "readonly", pure=False))
    assert isinstance(back, stridex.View) and back.readonly and back.shape == (4, 6)
