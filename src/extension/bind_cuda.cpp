// The Python face of the CUDA layer: cuda_available, device_count, pointer_info, DevicePtr and
// VirtualBuffer. All rules live in C++ (include/stridex/cuda/); this file converts arguments.
#include <Python.h>
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <cstdio>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "arguments.hpp"
#include "bindings.hpp"
#include "py_owner.hpp"  // wrap_view
#include "stridex/cuda/driver.hpp"
#include "stridex/cuda/pointer.hpp"
#include "stridex/cuda/vmm.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace stridex::python {

namespace {

using cuda::DevicePtr;
using cuda::VirtualBuffer;

std::string hex(std::uint64_t v) {
    char buf[24];
    std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
    return buf;
}

// ---- Integers -------------------------------------------------------------------------------------

// The Python int behind an operand of DevicePtr arithmetic and comparisons, or an empty object
// when `h` is no integer (floats included: Python then answers NotImplemented's TypeError).
nb::object as_python_int(nb::handle h) {
    PyObject* o = h.ptr();
    if (PyLong_Check(o)) return nb::borrow(h);
    if (PyFloat_Check(o) || !PyIndex_Check(o)) return {};
    nb::object i = nb::steal(PyNumber_Index(o));
    if (!i.is_valid()) throw nb::python_error();
    return i;
}

// p + n or p - n for a Python int n of any size: results outside [0, 2^64) are ValueError (the
// C++ operators check; ints beyond 64 bits cannot give an address at all).
DevicePtr offset(const DevicePtr& p, nb::handle n, bool subtract) {
    int overflow = 0;
    const long long v = PyLong_AsLongLongAndOverflow(n.ptr(), &overflow);
    if (v == -1 && PyErr_Occurred()) throw nb::python_error();
    if (overflow == 0) return subtract ? p - v : p + v;
    if (overflow > 0) {
        const unsigned long long u = PyLong_AsUnsignedLongLong(n.ptr());
        if (!(u == static_cast<unsigned long long>(-1) && PyErr_Occurred())) return subtract ? p - u : p + u;
        PyErr_Clear();
    }
    fail(ErrorKind::value, "pointer arithmetic leaves the 64-bit address space: ", hex(p.address()),
         subtract ? " - " : " + ", short_repr(n.ptr()));
}

std::size_t to_size(std::int64_t v, const char* what) {
    if (v < 0) fail(ErrorKind::value, what, " must be >= 0, found ", v);
    return static_cast<std::size_t>(v);
}

// ---- Devices and dtypes ----------------------------------------------------------------------------

// A CUDA ordinal from an int, a stridex.Device ("cuda:N") or a string naming one.
int cuda_ordinal(nb::handle h) {
    Device d;
    if (nb::isinstance<Device>(h))
        d = nb::cast<Device>(h);
    else if (nb::isinstance<nb::str>(h))
        d = Device::parse(nb::cast<std::string>(h));
    else if (nb::object i = as_python_int(h); i.is_valid() && !PyBool_Check(h.ptr()))
        d = Device::cuda(int32_arg(i.ptr(), "a CUDA device ordinal"));
    else
        fail(ErrorKind::type, "expected a CUDA device (an ordinal, 'cuda:N' or a stridex.Device), found ", type_name(h.ptr()));
    if (d.type != DeviceType::kCUDA) fail(ErrorKind::value, "expected a CUDA device, found ", d.name());
    if (d.id < 0) fail(ErrorKind::value, "a CUDA device ordinal must be >= 0, found ", d.id);
    return d.id;
}

// A stridex Device for DevicePtr(..., device=...): any device; an int is a CUDA ordinal.
Device device_arg(nb::handle h) {
    if (nb::isinstance<Device>(h)) return nb::cast<Device>(h);
    if (nb::isinstance<nb::str>(h)) return Device::parse(nb::cast<std::string>(h));
    return Device::cuda(cuda_ordinal(h));
}

// ---- DevicePtr -------------------------------------------------------------------------------------

nb::object not_implemented() { return nb::borrow(Py_NotImplemented); }

nb::object py_int(std::uint64_t v) { return nb::steal(PyLong_FromUnsignedLongLong(v)); }

// What the other operand of a comparison is: a DevicePtr, an int (or __index__ object), or neither.
enum class Operand { pointer, integer, other };
Operand classify(nb::handle other) {
    if (nb::isinstance<DevicePtr>(other)) return Operand::pointer;
    return as_python_int(other).is_valid() ? Operand::integer : Operand::other;
}

// Python ints of any size against the address, exactly (a negative int is simply smaller).
std::strong_ordering compare_int(const DevicePtr& p, nb::handle other) {
    nb::object mine = py_int(p.address());
    nb::object theirs = as_python_int(other);
    if (PyObject_RichCompareBool(mine.ptr(), theirs.ptr(), Py_LT)) return std::strong_ordering::less;
    if (PyObject_RichCompareBool(mine.ptr(), theirs.ptr(), Py_GT)) return std::strong_ordering::greater;
    return std::strong_ordering::equal;
}

// ==, != : pointers are equal when address and device are; an int when the address is.
auto equality(bool want_equal) {
    return [want_equal](const DevicePtr& p, nb::handle other) -> nb::object {
        switch (classify(other)) {
            case Operand::pointer: return nb::bool_((p == nb::cast<const DevicePtr&>(other)) == want_equal);
            case Operand::integer: return nb::bool_((compare_int(p, other) == 0) == want_equal);
            case Operand::other: break;
        }
        return not_implemented();
    };
}

// <, <=, >, >= : with ints by address; with pointers of the same device only (ValueError otherwise).
template <class Test>
auto ordering(Test test) {
    return [test](const DevicePtr& p, nb::handle other) -> nb::object {
        switch (classify(other)) {
            case Operand::pointer: return nb::bool_(test(p <=> nb::cast<const DevicePtr&>(other)));
            case Operand::integer: return nb::bool_(test(compare_int(p, other)));
            case Operand::other: break;
        }
        return not_implemented();
    };
}

void bind_device_ptr(nb::module_& m) {
    nb::class_<DevicePtr>(m, "DevicePtr",
                          "A device address and the device it belongs to. Behaves as an int (int(), "
                          "__index__, == and hash like the int), with byte arithmetic that refuses "
                          "results outside [0, 2**64) (ValueError).")
        .def(
            "__init__",
            [](DevicePtr* self, nb::handle addr, nb::handle device) {
                const std::uint64_t a = address_arg(addr.ptr(), "DevicePtr(): addr");
                Device d;
                if (!device.is_none())
                    d = device_arg(device);
                else if (nb::isinstance<DevicePtr>(addr))
                    d = nb::cast<const DevicePtr&>(addr).device();
                else
                    d = cuda::device_of_pointer(static_cast<std::uintptr_t>(a));  // ask the memory
                new (self) DevicePtr(a, d);
            },
            "addr"_a, "device"_a = nb::none(),
            "addr: an int, or an object with __index__ or __int__ (cuda.bindings CUdeviceptr). device: a "
            "stridex.Device, 'cuda:N', or an ordinal; None asks the driver what memory addr points to (cpu "
            "for memory CUDA does not know, and for every address when there is no driver).")
        .def_prop_ro("address", [](const DevicePtr& p) { return py_int(p.address()); })
        .def_prop_ro("device", &DevicePtr::device)
        .def("__int__", [](const DevicePtr& p) { return py_int(p.address()); })
        .def("__index__", [](const DevicePtr& p) { return py_int(p.address()); })
        .def("__bool__", [](const DevicePtr& p) { return p.address() != 0; })
        .def("__hash__", [](const DevicePtr& p) { return nb::hash(py_int(p.address())); })
        // Operands may be anything, None included: unknown types give NotImplemented, so Python
        // falls back to identity for == and raises TypeError for < and arithmetic.
        .def("__eq__", equality(true), "other"_a.none())
        .def("__ne__", equality(false), "other"_a.none())
        .def("__lt__", ordering([](std::strong_ordering c) { return c < 0; }), "other"_a.none())
        .def("__le__", ordering([](std::strong_ordering c) { return c <= 0; }), "other"_a.none())
        .def("__gt__", ordering([](std::strong_ordering c) { return c > 0; }), "other"_a.none())
        .def("__ge__", ordering([](std::strong_ordering c) { return c >= 0; }), "other"_a.none())
        .def("__add__",
             [](const DevicePtr& p, nb::handle n) -> nb::object {
                 nb::object i = as_python_int(n);
                 if (!i.is_valid() || nb::isinstance<DevicePtr>(n)) return not_implemented();
                 return nb::cast(offset(p, i, false));
             },
             "other"_a.none())
        .def("__radd__",
             [](const DevicePtr& p, nb::handle n) -> nb::object {
                 nb::object i = as_python_int(n);
                 if (!i.is_valid()) return not_implemented();
                 return nb::cast(offset(p, i, false));
             },
             "other"_a.none())
        .def("__sub__",
             [](const DevicePtr& p, nb::handle other) -> nb::object {
                 if (nb::isinstance<DevicePtr>(other)) return nb::int_(p - nb::cast<const DevicePtr&>(other));
                 nb::object i = as_python_int(other);
                 if (!i.is_valid()) return not_implemented();
                 return nb::cast(offset(p, i, true));
             },
             "other"_a.none())
        // No __iadd__/__isub__: `p += 16` rebinds p to a new DevicePtr, as for ints. Mutating in
        // place would corrupt every dict and set holding p (its hash is its address).
        .def("align_up", &DevicePtr::align_up, "alignment"_a, "The next address at or above that is a multiple of alignment.")
        .def("align_down", &DevicePtr::align_down, "alignment"_a)
        .def("is_aligned", &DevicePtr::is_aligned, "alignment"_a)
        .def("__format__",
             [](const DevicePtr& p, nb::str spec) -> nb::object {
                 if (nb::len(spec) == 0) return nb::str(nb::repr(nb::cast(p)));
                 return nb::steal(PyObject_Format(py_int(p.address()).ptr(), spec.ptr()));
             })
        .def("__repr__", [](const DevicePtr& p) {
            return "DevicePtr(" + hex(p.address()) + ", device=" + p.device().name() + ")";
        });
}

// ---- pointer_info ----------------------------------------------------------------------------------

void bind_pointer_info(nb::module_& m) {
    using cuda::PointerInfo;
    nb::class_<PointerInfo>(m, "PointerInfo", "What the CUDA driver knows about an address.")
        .def_prop_ro("memory_type", [](const PointerInfo& i) { return std::string(cuda::to_string(i.memory_type)); },
                     "'host' (unknown to CUDA), 'pinned_host', 'device' or 'managed'")
        .def_prop_ro("device", &PointerInfo::device, "cuda:N, cuda_host, cuda_managed or cpu")
        .def_prop_ro("device_ordinal", [](const PointerInfo& i) { return i.device_ordinal; },
                     "the driver's device ordinal; -1 for host memory")
        .def_prop_ro(
            "base",
            [](const PointerInfo& i) -> nb::object {
                if (i.memory_type == cuda::MemoryType::host) return nb::none();
                return nb::cast(DevicePtr(i.base, i.device()));
            },
            "start of the allocation (for VMM memory: of the reserved range); None for host memory")
        .def_prop_ro("size", [](const PointerInfo& i) { return i.size; }, "bytes of that range; 0 for host memory")
        .def_prop_ro("host_accessible", [](const PointerInfo& i) { return i.host_accessible; })
        .def("__repr__", [](const PointerInfo& i) {
            return "PointerInfo(memory_type='" + std::string(cuda::to_string(i.memory_type)) + "', device=" +
                   i.device().name() + ", base=" + hex(i.base) + ", size=" + std::to_string(i.size) + ")";
        });

    m.def("pointer_info", [](nb::handle ptr) { return cuda::pointer_info(address_arg(ptr.ptr(), "pointer_info(): ptr")); },
          "ptr"_a,
          "Memory type, device, allocation range and host accessibility of an address (one "
          "cuPointerGetAttributes call). Without a CUDA driver every address is 'host'.");
}

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
template <class F>
auto unlocked_gil(PyVirtualBuffer& self, F&& f) {
    nb::gil_scoped_release release;  // before the mutex: a holder of the mutex never needs the GIL
    const std::lock_guard lock(self.mutex);
    return f(self.buffer);
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

void bind_virtual_buffer(nb::module_& m) {
    nb::class_<PyVirtualBuffer>(
        m, "VirtualBuffer",
        "Device memory that grows and shrinks in place: a reserved address range (capacity) backed by "
        "physical chunks mapped at base + chunk_size * i. The base never moves and growing copies nothing. "
        "Views (buf.view) keep their bytes mapped: shrinking below a live view, or sleeping with any, "
        "raises BufferError. See docs/cuda.md.")
        .def(
            "__init__",
            [](PyVirtualBuffer* self, std::int64_t size, std::optional<std::int64_t> capacity, nb::handle device,
               nb::handle devices, std::optional<std::int64_t> chunk_size) {
                cuda::VirtualBufferOptions options;
                if (!device.is_none() && !devices.is_none())
                    fail(ErrorKind::value, "give device or devices, not both");
                if (!devices.is_none()) {
                    options.devices.clear();
                    for (nb::handle d : devices) options.devices.push_back(cuda_ordinal(d));
                } else if (!device.is_none()) {
                    options.devices = {cuda_ordinal(device)};
                }
                if (chunk_size) options.chunk_size = to_size(*chunk_size, "chunk_size");
                const std::size_t bytes = to_size(size, "size");
                const std::size_t cap = capacity ? to_size(*capacity, "capacity") : bytes;
                nb::gil_scoped_release release;
                new (self) PyVirtualBuffer{VirtualBuffer(cap, bytes, std::move(options)), {}};
            },
            "size"_a = 0, "capacity"_a = nb::none(), nb::kw_only(), "device"_a = nb::none(), "devices"_a = nb::none(),
            "chunk_size"_a = nb::none(),
            "size: bytes mapped now; capacity: bytes reserved (default: size); device: one CUDA device "
            "(default 0), or devices: several, chunk i on devices[i % n] (striping, needs peer access); "
            "chunk_size: bytes per chunk (default capacity/64), rounded up to the allocation granularity.")
        .def_prop_ro("base", [](const PyVirtualBuffer& s) { return locked(s, [](const VirtualBuffer& b) { return b.base(); }); })
        .def_prop_ro("size", [](const PyVirtualBuffer& s) { return locked(s, [](const VirtualBuffer& b) { return b.size(); }); })
        .def_prop_ro("capacity",
                     [](const PyVirtualBuffer& s) { return locked(s, [](const VirtualBuffer& b) { return b.capacity(); }); })
        .def_prop_ro("chunk_size",
                     [](const PyVirtualBuffer& s) { return locked(s, [](const VirtualBuffer& b) { return b.chunk_size(); }); })
        .def_prop_ro("granularity",
                     [](const PyVirtualBuffer& s) { return locked(s, [](const VirtualBuffer& b) { return b.granularity(); }); })
        .def_prop_ro("num_chunks",
                     [](const PyVirtualBuffer& s) { return locked(s, [](const VirtualBuffer& b) { return b.num_chunks(); }); })
        .def_prop_ro("mapped_bytes",
                     [](const PyVirtualBuffer& s) { return locked(s, [](const VirtualBuffer& b) { return b.mapped_bytes(); }); })
        .def_prop_ro("devices",
                     [](const PyVirtualBuffer& s) { return locked(s, [](const VirtualBuffer& b) { return b.devices(); }); },
                     "CUDA ordinals; chunk i lives on devices[i % len(devices)]")
        .def_prop_ro("device", [](const PyVirtualBuffer& s) {
            return locked(s, [](const VirtualBuffer& b) { return Device::cuda(b.devices().front()); });
        })
        .def_prop_ro("sleeping",
                     [](const PyVirtualBuffer& s) { return locked(s, [](const VirtualBuffer& b) { return b.sleeping(); }); })
        .def_prop_ro(
            "contents_lost",
            [](const PyVirtualBuffer& s) { return locked(s, [](const VirtualBuffer& b) { return b.contents_lost(); }); },
            "True after wake() following sleep(keep_contents=False): the bytes are undefined")
        .def_prop_ro("live_views",
                     [](const PyVirtualBuffer& s) { return locked(s, [](const VirtualBuffer& b) { return b.live_views(); }); })
        .def_prop_ro("closed",
                     [](const PyVirtualBuffer& s) { return locked(s, [](const VirtualBuffer& b) { return b.closed(); }); })
        .def_prop_ro(
            "stats",
            [](const PyVirtualBuffer& s) { return stats_dict(locked(s, [](const VirtualBuffer& b) { return b.stats(); })); },
            "bytes mapped (now, peak), bytes copied, operation counts, and per-driver-call timings")
        .def(
            "grow", [](PyVirtualBuffer& s, std::int64_t n) { unlocked_gil(s, [&](VirtualBuffer& b) { b.grow(to_size(n, "size")); }); },
            "new_size"_a, "Map chunks up to new_size bytes (same base, nothing copied).")
        .def(
            "shrink",
            [](PyVirtualBuffer& s, std::int64_t n) { unlocked_gil(s, [&](VirtualBuffer& b) { b.shrink(to_size(n, "size")); }); },
            "new_size"_a, "Synchronize the devices, then unmap the chunks beyond new_size.")
        .def(
            "resize",
            [](PyVirtualBuffer& s, std::int64_t n) { unlocked_gil(s, [&](VirtualBuffer& b) { b.resize(to_size(n, "size")); }); },
            "new_size"_a)
        .def(
            "sleep", [](PyVirtualBuffer& s, bool keep) { unlocked_gil(s, [&](VirtualBuffer& b) { b.sleep(keep); }); },
            "keep_contents"_a = false,
            "Release all physical memory, keeping the address range. keep_contents=True copies the bytes to "
            "host memory first (and back on wake); otherwise they are lost (see contents_lost).")
        .def("wake", [](PyVirtualBuffer& s) { unlocked_gil(s, [](VirtualBuffer& b) { b.wake(); }); },
             "Map new memory at the same addresses (and restore the contents if sleep kept them).")
        .def("close", [](PyVirtualBuffer& s) { unlocked_gil(s, [](VirtualBuffer& b) { b.close(); }); },
             "Release everything now (BufferError while views are alive).")
        .def("__enter__", [](nb::handle self) { return nb::borrow(self); })
        .def(
            "__exit__",
            [](PyVirtualBuffer& s, nb::handle, nb::handle, nb::handle) {
                unlocked_gil(s, [](VirtualBuffer& b) { b.close(); });
            },
            nb::arg("type").none(), nb::arg("value").none(), nb::arg("traceback").none())
        .def(
            "view",
            [](PyVirtualBuffer& s, nb::handle dtype, nb::handle shape, std::int64_t byte_offset) {
                const Dtype dt = dtype_arg(dtype.ptr(), "VirtualBuffer.view(): dtype");
                const std::vector<std::int64_t> extents = int64_list_arg(shape.ptr(), "VirtualBuffer.view(): shape");
                View v = locked(s, [&](const VirtualBuffer& b) { return b.view(dt, extents, byte_offset); });
                return wrap_view(std::move(v), nb::find(&s));
            },
            "dtype"_a, "shape"_a, "byte_offset"_a = 0,
            "A C-contiguous stridex.View of the bytes from byte_offset, within size. It keeps those bytes "
            "mapped while it (or any array made from it) is alive.")
        .def("__repr__", [](const PyVirtualBuffer& s) {
            return locked(s, [](const VirtualBuffer& b) -> std::string {
                if (b.closed()) return "VirtualBuffer(closed)";
                std::string devs;
                for (int d : b.devices()) devs += (devs.empty() ? "" : ", ") + std::to_string(d);
                return "VirtualBuffer(size=" + std::to_string(b.size()) + ", capacity=" + std::to_string(b.capacity()) +
                       ", chunk_size=" + std::to_string(b.chunk_size()) + ", devices=[" + devs + "], base=" +
                       hex(b.base().address()) + (b.sleeping() ? ", sleeping" : "") + ")";
            });
        });
}

}  // namespace

void bind_cuda(nb::module_& m) {
    m.def("cuda_available", &cuda::cuda_available,
          "True when the CUDA driver (libcuda.so.1) loads, initialises and sees a device. Never raises.");
    m.def("device_count", &cuda::device_count, "CUDA devices the driver sees; 0 without a driver. Never raises.");
    bind_device_ptr(m);
    bind_pointer_info(m);
    bind_virtual_buffer(m);
}

}  // namespace stridex::python
