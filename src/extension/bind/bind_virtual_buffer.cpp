// stridex.VirtualBuffer: a growable, sleepable range of CUDA virtual memory (the rules live in
// stridex/cuda/vmm.hpp); its views are stridex.Views.
#include <Python.h>
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "common/arguments.hpp"
#include "common/bindings.hpp"
#include "export/py_owner.hpp"  // wrap_view
#include "stridex/cuda/vmm.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace stridex::python {
namespace {

using cuda::VirtualBuffer;

// ---- VirtualBuffer ---------------------------------------------------------------------------------

// A VirtualBuffer plus a mutex: the GIL is released during driver work, so two Python threads
// could otherwise run two methods of one (not thread-safe) buffer at once. The mutex is only
// taken with the GIL released, or for quick reads that never wait for the GIL while holding it.
struct PyVirtualBuffer {
    VirtualBuffer buffer;
    mutable std::mutex mutex;
};

template <class F>
auto locked(const PyVirtualBuffer& self, F&& f) {
    const std::lock_guard lock(self.mutex);
    return f(self.buffer);
}
// A property's getter: `Getter` of the buffer, read under its mutex (a quick read that never waits
// for the GIL while holding it).
template <auto Getter>
auto read(const PyVirtualBuffer& self) {
    return locked(self, [](const VirtualBuffer& b) { return (b.*Getter)(); });
}

template <class F>
auto unlocked_gil(PyVirtualBuffer& self, F&& f) {
    nb::gil_scoped_release release;  // before the mutex: a holder of the mutex never needs the GIL
    const std::lock_guard lock(self.mutex);
    return f(self.buffer);
}

// grow, shrink and resize: new_size parsed while the GIL is held, then the call without it.
auto sizing(void (VirtualBuffer::*method)(std::size_t), const char* what) {
    return [method, what](PyVirtualBuffer& self, nb::handle new_size) {
        const std::size_t bytes = size_arg(new_size.ptr(), what);
        unlocked_gil(self, [&](VirtualBuffer& b) { (b.*method)(bytes); });
    };
}

nb::dict stats_dict(const cuda::VirtualBufferStats& s) {
    nb::dict calls;
    auto add = [&](const char* name, const cuda::CallTiming& t) {
        nb::dict d;
        d["calls"] = t.calls;
        d["total_us"] = static_cast<double>(t.total_ns) / 1e3;
        d["mean_us"] = t.mean_us();
        d["max_us"] = static_cast<double>(t.max_ns) / 1e3;
        calls[name] = d;
    };
    add("cuMemAddressReserve", s.reserve);
    add("cuMemCreate", s.create);
    add("cuMemMap", s.map);
    add("cuMemSetAccess", s.set_access);
    add("cuCtxSynchronize", s.synchronize);
    add("cuMemUnmap", s.unmap);
    add("cuMemRelease", s.release);
    add("cuMemAddressFree", s.address_free);
    add("copy", s.copy);
    nb::dict out;
    out["bytes_mapped"] = s.bytes_mapped;
    out["peak_bytes_mapped"] = s.peak_bytes_mapped;
    out["bytes_copied"] = s.bytes_copied;
    out["grows"] = s.grows;
    out["shrinks"] = s.shrinks;
    out["sleeps"] = s.sleeps;
    out["wakes"] = s.wakes;
    out["calls"] = calls;
    return out;
}

}  // namespace

void bind_virtual_buffer(nb::module_& m) {
    nb::class_<PyVirtualBuffer>(
        m, "VirtualBuffer",
        "Device memory that grows and shrinks in place: a reserved address range (capacity) backed by "
        "physical chunks mapped at base + chunk_size * i. The base never moves and growing copies nothing. "
        "Views (buf.view) keep their bytes mapped: shrinking below a live view, or sleeping with any, "
        "raises BufferError. See docs/cuda.md.")
        .def(
            "__init__",
            [](PyVirtualBuffer* self, nb::handle size, nb::handle capacity, nb::handle device, nb::handle devices,
               nb::handle chunk_size, bool shareable) {
                cuda::VirtualBufferOptions options;
                if (!device.is_none() && !devices.is_none())
                    fail(ErrorKind::value, "VirtualBuffer(): give device or devices, not both");
                if (!devices.is_none()) {
                    options.devices.clear();
                    for (nb::handle d : devices)
                        options.devices.push_back(cuda_ordinal_arg(d.ptr(), "VirtualBuffer(): devices"));
                } else if (!device.is_none()) {
                    options.devices = {cuda_ordinal_arg(device.ptr(), "VirtualBuffer(): device")};
                }
                if (!chunk_size.is_none())
                    options.chunk_size = size_arg(chunk_size.ptr(), "VirtualBuffer(): chunk_size");
                options.shareable = shareable;
                const std::size_t bytes = size_arg(size.ptr(), "VirtualBuffer(): size");
                const std::size_t cap = capacity.is_none() ? bytes
                                                           : size_arg(capacity.ptr(), "VirtualBuffer(): capacity");
                nb::gil_scoped_release release;
                new (self) PyVirtualBuffer{VirtualBuffer(cap, bytes, std::move(options)), {}};
            },
            "size"_a.none() = 0, "capacity"_a = nb::none(), nb::kw_only(), "device"_a = nb::none(),
            "devices"_a = nb::none(), "chunk_size"_a = nb::none(), "shareable"_a = false,
            nb::sig("def __init__(self, size: typing.SupportsIndex = 0, capacity: typing.SupportsIndex | None = None, "
                    "*, device: Device | str | "
                    "typing.SupportsIndex | None = None, devices: collections.abc.Iterable[Device | str | "
                    "typing.SupportsIndex] | None = None, chunk_size: typing.SupportsIndex | None = None, shareable: "
                    "bool = "
                    "False) -> None"),
            "size: bytes mapped now; capacity: bytes reserved (default: size); device: one CUDA device "
            "(default 0), or devices: several, chunk i on devices[i % n] (striping, needs peer access); "
            "chunk_size: bytes per chunk (default capacity/64), rounded up to the allocation granularity; "
            "shareable: chunks exportable as file descriptors, so views pickle to other processes (stridex.ipc).")
        .def_prop_ro("base", &read<&VirtualBuffer::base>,
                     "The DevicePtr of byte 0: fixed for the buffer's life (growing maps more, never moves it).")
        .def_prop_ro("size", &read<&VirtualBuffer::size>, "Bytes mapped and usable now.")
        .def_prop_ro("capacity", &read<&VirtualBuffer::capacity>,
                     "Bytes of address range reserved: the most size can grow to.")
        .def_prop_ro("chunk_size", &read<&VirtualBuffer::chunk_size>, "Bytes per chunk, a multiple of granularity.")
        .def_prop_ro("granularity", &read<&VirtualBuffer::granularity>,
                     "The driver's allocation granularity in bytes: chunk sizes are its multiples.")
        .def_prop_ro("num_chunks", &read<&VirtualBuffer::num_chunks>, "Chunks mapped now.")
        .def_prop_ro("mapped_bytes", &read<&VirtualBuffer::mapped_bytes>,
                     "Bytes of physical memory held now (0 while sleeping).")
        .def_prop_ro("devices", &read<&VirtualBuffer::devices>,
                     "CUDA ordinals; chunk i lives on devices[i % len(devices)]")
        .def_prop_ro(
            "device",
            [](const PyVirtualBuffer& s) {
                return locked(s, [](const VirtualBuffer& b) { return Device::cuda(b.devices().front()); });
            },
            "The stridex.Device of chunk 0 (cuda:N).")
        .def_prop_ro("sleeping", &read<&VirtualBuffer::sleeping>,
                     "True between sleep() and wake(): the address range is kept, its physical memory released.")
        .def_prop_ro("contents_lost", &read<&VirtualBuffer::contents_lost>,
                     "True after wake() following sleep(keep_contents=False): the bytes are undefined")
        .def_prop_ro("live_views", &read<&VirtualBuffer::live_views>,
                     "Views of this buffer still alive (close() waits for none; shrink() refuses to unmap under one).")
        .def_prop_ro("closed", &read<&VirtualBuffer::closed>,
                     "True after close(): every method but the properties raises.")
        .def_prop_ro(
            "stats",
            [](const PyVirtualBuffer& s) {
                return stats_dict(locked(s, [](const VirtualBuffer& b) { return b.stats(); }));
            },
            nb::sig("def stats(self) -> dict[str, typing.Any]"),
            "bytes mapped (now, peak), bytes copied, operation counts, and per-driver-call timings")
        .def("grow", sizing(&VirtualBuffer::grow, "VirtualBuffer.grow(): new_size"), "new_size"_a.none(),
             "Map chunks up to new_size bytes (same base, nothing copied).")
        .def("shrink", sizing(&VirtualBuffer::shrink, "VirtualBuffer.shrink(): new_size"), "new_size"_a.none(),
             "Synchronize the devices, then unmap the chunks beyond new_size.")
        .def("resize", sizing(&VirtualBuffer::resize, "VirtualBuffer.resize(): new_size"), "new_size"_a.none(),
             "grow() or shrink() to new_size bytes, whichever it is.")
        .def(
            "sleep", [](PyVirtualBuffer& s, bool keep) { unlocked_gil(s, [&](VirtualBuffer& b) { b.sleep(keep); }); },
            "keep_contents"_a = false,
            "Release all physical memory, keeping the address range. keep_contents=True copies the bytes to "
            "host memory first (and back on wake); otherwise they are lost (see contents_lost).")
        .def(
            "wake", [](PyVirtualBuffer& s) { unlocked_gil(s, [](VirtualBuffer& b) { b.wake(); }); },
            "Map new memory at the same addresses (and restore the contents if sleep kept them).")
        .def(
            "close", [](PyVirtualBuffer& s) { unlocked_gil(s, [](VirtualBuffer& b) { b.close(); }); },
            "Release everything now (BufferError while views are alive).")
        .def(
            "__enter__", [](nb::handle self) { return nb::borrow(self); },
            nb::sig("def __enter__(self) -> VirtualBuffer"))
        .def(
            "__exit__",
            [](PyVirtualBuffer& s, nb::handle, nb::handle, nb::handle) {
                unlocked_gil(s, [](VirtualBuffer& b) { b.close(); });
            },
            nb::arg("type").none(), nb::arg("value").none(), nb::arg("traceback").none())
        .def(
            "view",
            [](PyVirtualBuffer& s, nb::handle dtype, nb::handle shape, nb::handle offset) {
                const std::int64_t byte_offset = int64_arg(offset.ptr(), "VirtualBuffer.view(): byte_offset");
                const Dtype dt = dtype_arg(dtype.ptr(), "VirtualBuffer.view(): dtype");
                const std::vector<std::int64_t> extents = int64_list_arg(shape.ptr(), "VirtualBuffer.view(): shape");
                View v = locked(s, [&](const VirtualBuffer& b) { return b.view(dt, extents, byte_offset); });
                return wrap_view(std::move(v), nb::find(&s));
            },
            "dtype"_a, "shape"_a, "byte_offset"_a.none() = 0,
            nb::sig("def view(self, dtype: stridex.typing.DtypeLike, shape: typing.SupportsIndex | "
                    "collections.abc.Sequence[typing.SupportsIndex], byte_offset: typing.SupportsIndex = 0) -> View"),
            "A C-contiguous stridex.View of the bytes from byte_offset, within size. It keeps those bytes "
            "mapped while it (or any array made from it) is alive.")
        .def("__repr__", [](const PyVirtualBuffer& s) {
            return locked(s, [](const VirtualBuffer& b) -> std::string {
                if (b.closed()) return "VirtualBuffer(closed)";
                std::string devs;
                for (int d : b.devices()) devs += (devs.empty() ? "" : ", ") + std::to_string(d);
                return "VirtualBuffer(size=" + std::to_string(b.size()) + ", capacity=" + std::to_string(b.capacity()) +
                       ", chunk_size=" + std::to_string(b.chunk_size()) + ", devices=[" + devs +
                       "], base=" + hex(b.base().address()) + (b.sleeping() ? ", sleeping" : "") + ")";
            });
        });
}

}  // namespace stridex::python
