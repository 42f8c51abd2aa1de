"""The CUDA layer on a real GPU: pointer_info against torch/CuPy memory, VirtualBuffer end to end.

Every test skips with a reason when there is no CUDA device, and those needing torch, CuPy or a
second GPU skip when those are missing. Writes go through torch and reads through CuPy, so a wrong
address or a wrong mapping shows up as wrong data, not as a passing test.
"""

import gc
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import stridex
from stridex import Device, DevicePtr

pytestmark = pytest.mark.skipif(
    not stridex.cuda_available(), reason="no CUDA device: stridex.cuda_available() is False"
)

MiB = 1 << 20


@pytest.fixture
def torch(torch_with_cuda):
    return torch_with_cuda


@pytest.fixture
def cupy():
    return pytest.importorskip("cupy")


def two_gpus():
    if stridex.device_count() < 2:
        pytest.skip(f"needs 2 CUDA devices, found {stridex.device_count()}")


# ---- pointer_info ----------------------------------------------------------------------------------


def test_pointer_info_torch_device_tensor(torch):
    t = torch.arange(1000, device="cuda:0", dtype=torch.float32)
    inner = t[10:]
    info = stridex.pointer_info(inner.data_ptr())
    assert info.memory_type == "device"
    assert info.device == Device("cuda:0")
    assert info.device_ordinal == 0
    assert not info.host_accessible
    assert isinstance(info.base, DevicePtr)
    assert info.base <= inner.data_ptr() < info.base + info.size
    assert DevicePtr(inner.data_ptr()).device == Device("cuda:0")  # device found from the memory


def test_pointer_info_torch_second_device(torch):
    two_gpus()
    t = torch.ones(16, device="cuda:1")
    info = stridex.pointer_info(t.data_ptr())
    assert info.device == Device("cuda:1") and info.device_ordinal == 1


def test_pointer_info_cupy_array(cupy):
    a = cupy.arange(100, dtype=cupy.float64)
    info = stridex.pointer_info(a.data.ptr)
    assert info.memory_type == "device"
    assert info.device == Device("cuda:0")
    assert info.base <= a.data.ptr < info.base + info.size


def test_pointer_info_pinned_host(torch):
    t = torch.arange(64, dtype=torch.float32).pin_memory()
    info = stridex.pointer_info(t.data_ptr())
    assert info.memory_type == "pinned_host"
    assert info.device == Device("cuda_host")
    assert info.host_accessible


def test_pointer_info_managed(cupy):
    mem = cupy.cuda.malloc_managed(1 << 16)
    info = stridex.pointer_info(mem.ptr)
    assert info.memory_type == "managed"
    assert info.device == Device("cuda_managed")
    assert info.host_accessible


def test_pointer_info_numpy_is_host():
    a = np.zeros(32)
    info = stridex.pointer_info(a.ctypes.data)
    assert info.memory_type == "host" and info.device == Device("cpu") and info.base is None


# ---- VirtualBuffer: the seed's loop ----------------------------------------------------------------


def test_seed_chunks_mapped_at_offsets_write_torch_read_cupy(torch, cupy):
    n = 6
    buf = stridex.VirtualBuffer(size=n * 2 * MiB, capacity=16 * 2 * MiB, chunk_size=2 * MiB)
    assert buf.num_chunks == n and buf.chunk_size == 2 * MiB
    for i in range(n):  # the CUdeviceptr bug report: what cuMemMap(ptr + size * i, ...) mapped, chunk by chunk
        addr = buf.base + buf.chunk_size * i
        info = stridex.pointer_info(addr)
        assert info.memory_type == "device" and info.device == Device("cuda:0")
        assert info.base <= addr < info.base + info.size

    for i in range(n):  # one byte pattern per chunk, written through torch
        t = torch.from_dlpack(buf.view("uint8", (buf.chunk_size,), byte_offset=buf.chunk_size * i))
        assert t.data_ptr() == buf.base + buf.chunk_size * i
        t.fill_(i + 1)
        del t
    torch.cuda.synchronize()

    whole = cupy.from_dlpack(buf.view("uint8", (buf.size,)))
    assert whole.data.ptr == buf.base
    sums = cupy.asnumpy(whole.reshape(n, -1).astype(cupy.int64).sum(axis=1))
    assert list(sums) == [(i + 1) * buf.chunk_size for i in range(n)]
    del whole
    gc.collect()
    assert buf.live_views == 0
    buf.close()


def test_typed_view_round_trip(torch, cupy):
    with stridex.VirtualBuffer(size=4 * MiB, capacity=64 * MiB) as buf:
        t = torch.from_dlpack(buf.view("float32", (1024, 1024)))
        t.copy_(torch.arange(1024 * 1024, dtype=torch.float32, device="cuda").reshape(1024, 1024))
        torch.cuda.synchronize()
        c = cupy.from_dlpack(buf.view(np.float32, (1024 * 1024,)))
        assert float(c[123457]) == 123457.0
        del t, c


# ---- grow and shrink with live views ---------------------------------------------------------------


def test_grow_keeps_base_and_views_valid(torch):
    buf = stridex.VirtualBuffer(size=2 * MiB, capacity=256 * MiB, chunk_size=2 * MiB)
    base = buf.base
    t = torch.from_dlpack(buf.view("float32", (MiB // 2,)))
    t.fill_(7.0)
    buf.grow(200 * MiB)
    assert buf.base == base  # nothing moved, nothing copied
    assert buf.stats["bytes_copied"] == 0
    assert buf.num_chunks == 100
    assert float(t.sum()) == 7.0 * (MiB // 2)  # the old view still reads the same memory
    tail = torch.from_dlpack(buf.view("uint8", (MiB,), byte_offset=199 * MiB))
    tail.fill_(1)
    assert int(tail.sum()) == MiB
    del tail


def test_shrink_below_a_live_view_is_refused(torch):
    buf = stridex.VirtualBuffer(size=64 * MiB, capacity=64 * MiB, chunk_size=2 * MiB)
    t = torch.from_dlpack(buf.view("uint8", (10 * MiB,), byte_offset=20 * MiB))
    with pytest.raises(BufferError, match="live view reaches byte 31457280"):
        buf.shrink(16 * MiB)
    assert buf.size == 64 * MiB
    buf.shrink(30 * MiB)  # above the view's end: fine
    assert buf.num_chunks == 15
    with pytest.raises(BufferError):
        buf.sleep()
    del t
    gc.collect()
    buf.shrink(0)
    assert buf.num_chunks == 0 and buf.mapped_bytes == 0


def test_failed_grow_rolls_back_on_real_out_of_memory(torch):
    free, total = torch.cuda.mem_get_info()
    chunk = 1 << 30
    buf = stridex.VirtualBuffer(size=chunk, capacity=2 * total, chunk_size=chunk)
    with pytest.raises(RuntimeError, match="CUDA_ERROR_OUT_OF_MEMORY.*the buffer is unchanged"):
        buf.grow(2 * total)
    assert buf.size == chunk and buf.num_chunks == 1
    free_after, _ = torch.cuda.mem_get_info()
    assert abs(free_after - (free - chunk)) < 512 * MiB  # every chunk of the failed grow was released
    buf.grow(2 * chunk)  # and the buffer still grows
    buf.close()


@pytest.mark.parametrize(
    "bad,error,says",
    [
        (-1, ValueError, "must be >= 0, found -1"),
        (2**64, ValueError, "does not fit in int64"),
        (True, TypeError, "must be an int, found bool"),
        (1.5, TypeError, "must be an int, found float"),
        (None, TypeError, "must be an int, found NoneType"),
    ],
)
def test_sizes_of_a_live_buffer_are_checked_by_name(bad, error, says):
    # The same rules as every size from Python (arguments.hpp), and the buffer is left as it was.
    with stridex.VirtualBuffer(size=2 * MiB, capacity=8 * MiB, chunk_size=2 * MiB) as buf:
        for method in ("grow", "shrink", "resize"):
            with pytest.raises(error) as e:
                getattr(buf, method)(bad)
            assert f"VirtualBuffer.{method}(): new_size" in str(e.value) and says in str(e.value)
        with pytest.raises(error) as e:
            buf.view("uint8", (16,), byte_offset=bad)
        # A negative offset is an int64: the buffer's own bounds check names it.
        expected = ["exceeds the buffer's size"] if bad == -1 else ["VirtualBuffer.view(): byte_offset", says]
        assert all(part in str(e.value) for part in expected)
        assert buf.size == 2 * MiB and buf.mapped_bytes == 2 * MiB


def test_live_buffer_takes_int_like_sizes(torch):
    with stridex.VirtualBuffer(size=np.int64(2 * MiB), capacity=np.uint64(8 * MiB), chunk_size=2 * MiB) as buf:
        buf.grow(np.int64(4 * MiB))
        buf.resize(np.uint32(6 * MiB))
        buf.shrink(np.int32(2 * MiB))
        assert buf.size == 2 * MiB
        t = torch.from_dlpack(buf.view("uint8", (MiB,), byte_offset=np.int64(MiB)))
        t.fill_(7)
        assert t.data_ptr() == int(buf.base) + MiB
        del t


# ---- sleep and wake --------------------------------------------------------------------------------


def test_sleep_keep_contents_restores_bytes_at_the_same_address(torch):
    buf = stridex.VirtualBuffer(size=10 * MiB, capacity=32 * MiB, chunk_size=2 * MiB)
    base = buf.base
    t = torch.from_dlpack(buf.view("int32", (10 * MiB // 4,)))
    t.copy_(torch.arange(t.numel(), dtype=torch.int32, device="cuda"))
    del t
    gc.collect()
    free_awake, _ = torch.cuda.mem_get_info()
    buf.sleep(keep_contents=True)
    assert buf.sleeping and buf.mapped_bytes == 0
    free_asleep, _ = torch.cuda.mem_get_info()
    assert free_asleep >= free_awake + 8 * MiB  # the physical memory really went back
    buf.wake()
    assert buf.base == base and not buf.contents_lost
    t = torch.from_dlpack(buf.view("int32", (10 * MiB // 4,)))
    assert torch.equal(t, torch.arange(t.numel(), dtype=torch.int32, device="cuda"))
    assert buf.stats["bytes_copied"] == 2 * 10 * MiB


def test_sleep_without_contents_flags_them_lost(torch):
    buf = stridex.VirtualBuffer(size=4 * MiB, capacity=8 * MiB, chunk_size=2 * MiB)
    base = buf.base
    buf.sleep()
    with pytest.raises(ValueError, match="asleep"):
        buf.view("uint8", (16,))
    buf.wake()
    assert buf.base == base and buf.contents_lost
    t = torch.from_dlpack(buf.view("uint8", (4 * MiB,)))
    t.fill_(3)  # the new memory is usable
    assert int(t.sum()) == 3 * 4 * MiB


# ---- striping ---------------------------------------------------------------------------------------


def test_striping_over_two_gpus(torch):
    two_gpus()
    try:
        buf = stridex.VirtualBuffer(size=16 * MiB, capacity=64 * MiB, devices=[0, 1], chunk_size=2 * MiB)
    except RuntimeError as e:
        if "cuDeviceCanAccessPeer" in str(e):
            pytest.skip(f"the GPUs cannot access each other: {e}")
        raise
    assert buf.devices == [0, 1]
    for i in range(buf.num_chunks):
        assert stridex.pointer_info(buf.base + buf.chunk_size * i).device_ordinal == i % 2
    t = torch.from_dlpack(buf.view("float32", (4 * MiB,)))  # one tensor over chunks of both GPUs
    t.copy_(torch.arange(4 * MiB, dtype=torch.float32, device="cuda:0"))
    torch.cuda.synchronize()
    assert float(t[-1]) == 4 * MiB - 1
    del t


# ---- interop and shutdown ---------------------------------------------------------------------------


def test_cuda_bindings_takes_device_ptr():
    driver = pytest.importorskip("cuda.bindings.driver")
    buf = stridex.VirtualBuffer(size=4 * MiB, capacity=4 * MiB)
    p = buf.base + 2 * MiB
    wrapped = driver.CUdeviceptr(p)  # through __index__
    assert int(wrapped) == p
    assert DevicePtr(wrapped) == p  # and back, through __int__
    err, base, size = driver.cuMemGetAddressRange(p)  # a plain int argument where CUdeviceptr goes
    assert err == driver.CUresult.CUDA_SUCCESS and int(base) <= p < int(base) + size


def test_buffers_alive_at_interpreter_exit_do_not_crash():
    code = textwrap.dedent(
        """
        import stridex
        keep = stridex.VirtualBuffer(size=8 << 20, capacity=64 << 20)
        view = keep.view("float32", (1024,))
        asleep = stridex.VirtualBuffer(size=4 << 20, capacity=8 << 20)
        asleep.sleep(keep_contents=True)
        try:
            import torch
            tensor = torch.from_dlpack(keep.view("uint8", (1 << 20,)))
        except ImportError:
            pass
        print("ok")
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_a_child_forked_after_cuda_init_views_host_memory():
    # torch's DataLoader forks its workers after the parent has used CUDA: the driver refuses
    # every call in the child, and host arrays must still import there (as cpu).
    code = textwrap.dedent(
        """
        import multiprocessing as mp
        import numpy as np
        import stridex

        def child(conn):
            a = np.arange(6.0).reshape(2, 3)
            v = stridex.view(a)
            np.from_dlpack(v)[1, 2] = 42.0
            try:
                stridex.empty((4,), "float32", device="cuda:0")
                refused = "no error"
            except Exception as e:
                refused = f"{type(e).__name__}: {e}"
            conn.send((str(v.device), v.shape, float(a[1, 2]), refused))

        if __name__ == "__main__":
            on_gpu = stridex.empty((4,), "float32", device="cuda:0")  # CUDA initialised here
            parent, end = mp.Pipe()
            p = mp.get_context("fork").Process(target=child, args=(end,))
            p.start()
            print(parent.recv())
            p.join(30)
            print(p.exitcode)
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    result, exitcode = done.stdout.strip().splitlines()
    device, shape, written, refused = eval(result)  # noqa: S307 - our own repr of plain values
    assert (device, shape, written, exitcode) == ("cpu", (2, 3), 42.0, "0")
    assert "forked after CUDA was initialised" in refused and refused.startswith("RuntimeError"), refused
