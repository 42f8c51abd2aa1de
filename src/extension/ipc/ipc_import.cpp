// A pickled CUDA View made a View again (ipc_import.hpp): the payload read field by field, every
// integer through arguments.hpp (the payload comes from a pickle), then the import itself.
#include "ipc/ipc_import.hpp"

#include <nanobind/nanobind.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/arguments.hpp"
#include "common/limited_api.hpp"
#include "common/python_owner.hpp"
#include "export/py_owner.hpp"
#include "sanitizer/sanitizer.hpp"

namespace nb = nanobind;

namespace stridex::python {

namespace {

using cuda::ipc::MemoryKind;

struct KindName {
    MemoryKind kind;
    const char* name;
};
constexpr KindName kKinds[] = {
    {MemoryKind::ipc_handle, "cuda_ipc"},
    {MemoryKind::vmm_fds, "cuda_vmm"},
    {MemoryKind::pool_fd, "cuda_pool"},
};

MemoryKind kind_arg(nb::handle kind) {
    if (!PyUnicode_Check(kind.ptr()))
        fail(ErrorKind::type, "_ipc_import(): kind must be a str, found ", type_name(kind.ptr()));
    const char* text = PyUnicode_AsUTF8(kind.ptr());
    if (!text) throw nb::python_error();
    for (const KindName& k : kKinds)
        if (std::strcmp(text, k.name) == 0) return k.kind;
    fail(ErrorKind::value, "_ipc_import(): kind must be 'cuda_ipc', 'cuda_vmm' or 'cuda_pool', found ",
         short_repr(kind.ptr()));
}

// A payload's fields, each named in messages as "_ipc_import(): cuda_vmm payload['offset']".
class Payload {
public:
    Payload(nb::handle dict, MemoryKind kind) : dict_(dict), kind_(ipc_kind_name(kind)) {
        if (!PyDict_Check(dict.ptr()))
            fail(ErrorKind::type, "_ipc_import(): ", kind_, " payload must be a dict, found ", type_name(dict.ptr()));
    }

    std::string what(const char* field) const {
        return std::string("_ipc_import(): ") + kind_ + " payload['" + field + "']";
    }

    // The field's value (borrowed); ValueError naming it and what it should hold when missing.
    PyObject* get(const char* field, const char* expected) const {
        PyObject* value = PyDict_GetItemString(dict_.ptr(), field);
        if (!value) fail(ErrorKind::value, "_ipc_import(): ", kind_, " payload has no '", field, "' (", expected, ")");
        return value;
    }

    std::string bytes(const char* field) const {
        PyObject* value = get(field, "bytes");
        if (!PyBytes_Check(value)) fail(ErrorKind::type, what(field), " must be bytes, found ", type_name(value));
        return {PyBytes_AsString(value), static_cast<std::size_t>(PyBytes_Size(value))};
    }

    // An opaque record of the driver's (a handle, a UUID, export data): bytes of its exact size.
    template <class Out>
    Out record(const char* field) const {
        const std::string b = bytes(field);
        Out out{};
        if (b.size() != sizeof out)
            fail(ErrorKind::value, what(field), " must be ", sizeof out, " bytes, found ", b.size());
        std::memcpy(&out, b.data(), sizeof out);
        return out;
    }

    std::uint64_t size(const char* field) const { return size_arg(get(field, "an int >= 0"), what(field).c_str()); }
    std::uintptr_t address(const char* field) const {
        return address_arg(get(field, "an int in [0, 2**64)"), what(field).c_str());
    }

    bool flag(const char* field) const {
        PyObject* value = get(field, "a bool");
        if (!PyBool_Check(value)) fail(ErrorKind::type, what(field), " must be a bool, found ", type_name(value));
        return value == Py_True;
    }

    std::optional<cuda::IpcHandle> event() const {
        if (get("event", "bytes or None") == Py_None) return std::nullopt;
        return record<cuda::IpcHandle>("event");
    }

    cuda::ipc::Shape shape() const {
        std::vector<std::int64_t> extents = int64_list_arg(get("shape", "a list of ints"), what("shape").c_str());
        std::vector<std::int64_t> steps = int64_list_arg(get("strides", "a list of ints"), what("strides").c_str());
        if (extents.size() != steps.size())
            fail(ErrorKind::value, "_ipc_import(): ", kind_,
                 " payload's shape and strides differ in length: ", extents.size(), " and ", steps.size());
        const Dtype dtype = dtype_arg(get("dtype", "a dtype name"), what("dtype").c_str());
        return {std::move(extents), std::move(steps), dtype, flag("readonly")};
    }

    const char* kind() const noexcept { return kind_; }

private:
    nb::handle dict_;
    const char* kind_;
};

// What every kind of CUDA memory shares: the device, where the View lies in the shared range, its
// layout and the producer's event.
struct Placement {
    cuda::ipc::DeviceUuid device;
    std::uint64_t offset = 0, extent = 0;
    cuda::ipc::Shape shape;
    std::optional<cuda::IpcHandle> event;
};

Placement placement_of(const Payload& p) {
    return {p.record<cuda::ipc::DeviceUuid>("device_uuid"), p.size("offset"), p.size("extent"), p.shape(), p.event()};
}

// File descriptors received over the socket, in chunk order: a sequence of ints in [0, 2**31).
std::vector<int> fds_arg(nb::handle o) {
    constexpr const char* what = "_ipc_import(): fds";
    if (!PySequence_Check(o.ptr()) || PyUnicode_Check(o.ptr()) || PyBytes_Check(o.ptr()))
        fail(ErrorKind::type, what, " must be a sequence of ints, found ", type_name(o.ptr()));
    const nb::object items = nb::steal(PySequence_Fast(o.ptr(), "fds"));
    if (!items.is_valid()) throw nb::python_error();
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(items.ptr());
    std::vector<int> out(static_cast<std::size_t>(n));
    for (Py_ssize_t k = 0; k < n; ++k) {
        const std::int32_t fd = int32_arg(PySequence_Fast_GET_ITEM(items.ptr(), k), what);
        if (fd < 0) fail(ErrorKind::value, what, " must be open file descriptors (>= 0), found ", fd);
        out[static_cast<std::size_t>(k)] = fd;
    }
    return out;
}

// The import of one kind, its arguments read: run without the GIL (opening handles and mapping
// memory take milliseconds).
using Import = std::function<View(Owner)>;

// A legacy IPC handle of the allocation: no fds.
Import handle_import(const Payload& p, Placement at, const std::vector<int>& fds) {
    if (!fds.empty()) fail(ErrorKind::buffer, "expected no file descriptor for a cuda_ipc View, received ", fds.size());
    const auto handle = p.record<cuda::IpcHandle>("handle");
    return [handle, at = std::move(at)](Owner keep) {
        return cuda::ipc::import_handle(handle, at.device, at.offset, at.extent, at.shape, at.event, std::move(keep));
    };
}

// VMM chunks: one fd per chunk, each `chunk_size` bytes.
Import vmm_import(const Payload& p, Placement at, std::vector<int> fds) {
    if (fds.empty()) fail(ErrorKind::buffer, "expected a file descriptor per chunk for a cuda_vmm View, received none");
    const std::uint64_t chunk = p.size("chunk_size");
    return [chunk, at = std::move(at), fds = std::move(fds)](Owner keep) {
        return cuda::ipc::import_fds(fds, chunk, at.device, at.offset, at.shape, at.event, std::move(keep));
    };
}

// An allocation of an exporting pool: the pool's fd, the allocation's export data. The pool is
// named across every exporter by its process's broker address and its id there.
Import pool_import(const Payload& p, Placement at, const std::vector<int>& fds) {
    if (fds.size() != 1) fail(ErrorKind::buffer, "expected 1 file descriptor for a pool View, received ", fds.size());
    const auto data = p.record<cuda::MemPoolPtrExportData>("pool");
    std::string key = p.bytes("broker");
    const std::uint64_t id = p.address("pool_id");
    for (int byte = 0; byte < 8; ++byte) key += static_cast<char>((id >> (8 * byte)) & 0xff);  // little-endian
    return [fd = fds[0], key = std::move(key), data, at = std::move(at)](Owner keep) {
        return cuda::ipc::import_pool(fd, key, data, at.device, at.offset, at.extent, at.shape, at.event,
                                      std::move(keep));
    };
}

}  // namespace

const char* ipc_kind_name(MemoryKind kind) noexcept {
    for (const KindName& k : kKinds)
        if (k.kind == kind) return k.name;
    return "unknown";
}

Handover from_process(const View& v, const nb::object& keep, bool with_event) {
    const HandoverFlags flags = HandoverFlags{HandoverFlag::from_process}.with(HandoverFlag::with_event, with_event);
    return {v, keep.ptr(), kNoStream, v.stream(), "stridex.ipc import", flags};
}

nb::object ipc_import(nb::handle kind, nb::handle payload, nb::handle fds, nb::object keep) {
    const MemoryKind k = kind_arg(kind);
    const Payload p(payload, k);
    Placement at = placement_of(p);
    const bool with_event = at.event.has_value();
    std::vector<int> files = fds_arg(fds);
    Import import;
    switch (k) {
        case MemoryKind::ipc_handle: import = handle_import(p, std::move(at), files); break;
        case MemoryKind::vmm_fds: import = vmm_import(p, std::move(at), std::move(files)); break;
        case MemoryKind::pool_fd: import = pool_import(p, std::move(at), files); break;
    }
    Owner owner = owner_of(keep);
    View v;
    {
        nb::gil_scoped_release release;
        v = import(std::move(owner));
    }
    // The sanitizer's record of a View from another process (the ipc_unwaited check asks for it).
    if (sanitizer::on()) sanitizer::observe(from_process(v, keep, with_event));
    return wrap_view(std::move(v), keep);
}

}  // namespace stridex::python
