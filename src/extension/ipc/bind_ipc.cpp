// The native half of stridex.ipc: CUDA exports (handle, fds, event) and the Views they import
// into (include/stridex/cuda/ipc.hpp). The protocol around them -- tickets, the Unix socket that
// carries fds and release messages, host memory -- is Python (python/stridex/ipc/). The stub
// generator skips private names, so stubs.pattern types _IpcExport and the private helpers here.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/arguments.hpp"
#include "common/bindings.hpp"
#include "common/limited_api.hpp"
#include "export/export.hpp"
#include "export/py_owner.hpp"
#include "sanitizer/sanitizer.hpp"
#include "stridex/cuda/ipc.hpp"
#include "stridex/pending.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace stridex::python {

namespace {

using cuda::ipc::DeviceUuid;
using cuda::ipc::Export;

template <class Out>
Out fixed_bytes(const nb::bytes& b, const char* what) {
    Out out{};
    if (b.size() != sizeof out) fail(ErrorKind::value, what, " must be ", sizeof out, " bytes, found ", b.size());
    std::memcpy(&out, b.c_str(), sizeof out);
    return out;
}

template <class In>
nb::bytes as_bytes(const In& in) {
    return nb::bytes(reinterpret_cast<const char*>(&in), sizeof in);
}

std::optional<cuda::IpcHandle> event_arg(const std::optional<nb::bytes>& event) {
    if (!event) return std::nullopt;
    return fixed_bytes<cuda::IpcHandle>(*event, "event handle");
}

cuda::ipc::Shape shape_arg(nb::handle shape, nb::handle strides, nb::handle dtype, bool readonly, const char* fn) {
    const std::string name(fn);
    std::vector<std::int64_t> extents = int64_list_arg(shape.ptr(), (name + ": shape").c_str());
    std::vector<std::int64_t> steps = int64_list_arg(strides.ptr(), (name + ": strides").c_str());
    if (extents.size() != steps.size())
        fail(ErrorKind::value, "shape and strides differ in length: ", extents.size(), " and ", steps.size());
    return {std::move(extents), std::move(steps), dtype_arg(dtype.ptr(), (name + ": dtype").c_str()), readonly};
}

// File descriptors received over the socket, in chunk order: a sequence of ints in [0, 2**31).
std::vector<int> fds_arg(nb::handle o) {
    constexpr const char* what = "_ipc_import_fds(): fds";
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

// The end every import shares: the import itself without the GIL (opening handles and mapping
// memory take milliseconds), the sanitizer's record of a View from another process (the
// ipc_unwaited check asks for it), and the stridex.View.
// The sanitizer's record of a View from another process, ready after its producer's event where
// the exporter sent one (`with_event`).
Handover from_process(const View& v, const nb::object& keep, bool with_event) {
    const HandoverFlags flags = HandoverFlags{HandoverFlag::from_process}.with(HandoverFlag::with_event, with_event);
    return {v, keep.ptr(), kNoStream, v.stream(), "stridex.ipc import", flags};
}

// The test seam's stand-in for an opened IPC event (_sanitizer_mark_ipc): records who waited, and
// asks no driver.
class RecordedPending final : public Pending {
public:
    void order_before(std::intptr_t consumer, Device) const override {
        const std::lock_guard lock(mutex_);
        waiters_.push_back(consumer);
    }
    void synchronize() const override {
        const std::lock_guard lock(mutex_);
        host_ = true;
    }
    bool waited_by(std::intptr_t consumer, Device) const noexcept override {
        const std::lock_guard lock(mutex_);
        return host_ || std::find(waiters_.begin(), waiters_.end(), consumer) != waiters_.end();
    }
    bool waited() const noexcept override {
        const std::lock_guard lock(mutex_);
        return host_ || !waiters_.empty();
    }

private:
    mutable std::mutex mutex_;
    mutable std::vector<std::intptr_t> waiters_;
    mutable bool host_ = false;
};

template <class Import>
nb::object imported_view(Import&& import, const std::optional<cuda::IpcHandle>& event, const nb::object& keep) {
    Owner owner = owner_of(keep);
    View v;
    {
        nb::gil_scoped_release release;
        v = import(std::move(owner));
    }
    if (sanitizer::on()) sanitizer::observe(from_process(v, keep, event.has_value()));
    return wrap_view(std::move(v), keep);
}

// The exporter's record of one export (held by its ticket): what travels, plus the event and fds
// it owns until the importer released them.
struct PyExport {
    Export exp;
};

}  // namespace

void bind_ipc(nb::module_& m) {
    nb::class_<PyExport>(m, "_IpcExport", "One CUDA export of a View (stridex.ipc); owns its event and fds.")
        .def_prop_ro("kind",
                     [](const PyExport& e) {
                         switch (e.exp.kind()) {
                             case cuda::ipc::MemoryKind::ipc_handle: return "cuda_ipc";
                             case cuda::ipc::MemoryKind::vmm_fds: return "cuda_vmm";
                             case cuda::ipc::MemoryKind::pool_fd: break;
                         }
                         return "cuda_pool";
                     })
        .def_prop_ro("device_uuid", [](const PyExport& e) { return as_bytes(e.exp.device()); })
        .def_prop_ro("offset", [](const PyExport& e) { return e.exp.offset(); })
        .def_prop_ro("extent", [](const PyExport& e) { return e.exp.extent(); })
        .def_prop_ro("handle", [](const PyExport& e) { return as_bytes(e.exp.handle()); })
        .def_prop_ro("fds", [](const PyExport& e) { return e.exp.fds(); })
        .def_prop_ro("chunk_size", [](const PyExport& e) { return e.exp.chunk_size(); })
        .def_prop_ro("pool_pointer", [](const PyExport& e) { return as_bytes(e.exp.pool_pointer()); })
        .def_prop_ro("pool_id", [](const PyExport& e) { return e.exp.pool_id(); })
        .def_prop_ro("event", [](const PyExport& e) -> std::optional<nb::bytes> {
            if (!e.exp.event()) return std::nullopt;
            return as_bytes(*e.exp.event());
        });

    m.def(
        "_ipc_export", [](const PyView& v) { return PyExport{Export::of(v.view)}; }, "view"_a,
        "The CUDA export of a View's memory (stridex.ipc). BufferError naming why when it cannot be shared.");

    // Every integer goes through arguments.hpp: these are private, yet fed from a pickle.
    m.def(
        "_ipc_import_handle",
        [](nb::bytes handle, nb::bytes device, nb::handle offset, nb::handle extent, nb::handle shape,
           nb::handle strides, nb::handle dtype, bool readonly, std::optional<nb::bytes> event, nb::object keep) {
            const auto h = fixed_bytes<cuda::IpcHandle>(handle, "memory handle");
            const auto uuid = fixed_bytes<DeviceUuid>(device, "device UUID");
            const auto ev = event_arg(event);
            const std::uint64_t off = size_arg(offset.ptr(), "_ipc_import_handle(): offset");
            const std::uint64_t ext = size_arg(extent.ptr(), "_ipc_import_handle(): extent");
            const auto sh = shape_arg(shape, strides, dtype, readonly, "_ipc_import_handle()");
            return imported_view(
                [&](Owner owner) { return cuda::ipc::import_handle(h, uuid, off, ext, sh, ev, std::move(owner)); }, ev,
                keep);
        },
        "handle"_a, "device_uuid"_a, "offset"_a, "extent"_a, "shape"_a, "strides"_a, "dtype"_a, "readonly"_a,
        "event"_a.none(), "keep"_a.none());

    m.def(
        "_ipc_import_fds",
        [](nb::handle fds, nb::handle chunk_size, nb::bytes device, nb::handle offset, nb::handle shape,
           nb::handle strides, nb::handle dtype, bool readonly, std::optional<nb::bytes> event, nb::object keep) {
            const std::vector<int> files = fds_arg(fds);
            const std::uint64_t chunk = size_arg(chunk_size.ptr(), "_ipc_import_fds(): chunk_size");
            const auto uuid = fixed_bytes<DeviceUuid>(device, "device UUID");
            const auto ev = event_arg(event);
            const std::uint64_t off = size_arg(offset.ptr(), "_ipc_import_fds(): offset");
            const auto sh = shape_arg(shape, strides, dtype, readonly, "_ipc_import_fds()");
            return imported_view(
                [&](Owner owner) { return cuda::ipc::import_fds(files, chunk, uuid, off, sh, ev, std::move(owner)); },
                ev, keep);
        },
        "fds"_a, "chunk_size"_a, "device_uuid"_a, "offset"_a, "shape"_a, "strides"_a, "dtype"_a, "readonly"_a,
        "event"_a.none(), "keep"_a.none());

    m.def(
        "_ipc_import_pool",
        [](nb::handle fd, nb::bytes pool_key, nb::bytes pointer, nb::bytes device, nb::handle offset, nb::handle extent,
           nb::handle shape, nb::handle strides, nb::handle dtype, bool readonly, std::optional<nb::bytes> event,
           nb::object keep) {
            const std::int32_t file = int32_arg(fd.ptr(), "_ipc_import_pool(): fd");
            if (file < 0)
                fail(ErrorKind::value, "_ipc_import_pool(): fd must be an open file descriptor, found ", file);
            const std::string key(pool_key.c_str(), pool_key.size());
            const auto data = fixed_bytes<cuda::MemPoolPtrExportData>(pointer, "pool pointer export data");
            const auto uuid = fixed_bytes<DeviceUuid>(device, "device UUID");
            const auto ev = event_arg(event);
            const std::uint64_t off = size_arg(offset.ptr(), "_ipc_import_pool(): offset");
            const std::uint64_t ext = size_arg(extent.ptr(), "_ipc_import_pool(): extent");
            const auto sh = shape_arg(shape, strides, dtype, readonly, "_ipc_import_pool()");
            return imported_view(
                [&](Owner owner) {
                    return cuda::ipc::import_pool(file, key, data, uuid, off, ext, sh, ev, std::move(owner));
                },
                ev, keep);
        },
        "fd"_a, "pool_key"_a, "pointer"_a, "device_uuid"_a, "offset"_a, "extent"_a, "shape"_a, "strides"_a, "dtype"_a,
        "readonly"_a, "event"_a.none(), "keep"_a.none());

    // Pickling: plain pickle and anything built on it reduce a View through stridex.ipc, imported
    // only when a View is first pickled.
    nb::handle view_type = nb::type<PyView>();
    nb::setattr(view_type, "__reduce__",
                nb::cpp_function(
                    [](nb::handle self) { return nb::module_::import_("stridex.ipc").attr("_reduce")(self); },
                    nb::is_method(),
                    nb::sig("def __reduce__(self) -> tuple[collections.abc.Callable[[dict[str, typing.Any]], View], "
                            "tuple[dict[str, typing.Any]]]"),
                    "A handle to the View's memory (stridex.ipc): same memory in the unpickling process."));
    // The same for multiprocessing's ForkingPickler, whose pickles are on their way to another
    // process (the exporter waits for them at exit): what stridex._post_import registers, so that
    // the registration itself imports nothing of stridex.ipc.
    nb::setattr(view_type, "_reduce_in_flight",
                nb::cpp_function(
                    [](nb::handle self) {
                        return nb::module_::import_("stridex.ipc").attr("_reduce")(self, nb::arg("in_flight") = true);
                    },
                    nb::is_method(),
                    nb::sig("def _reduce_in_flight(self) -> tuple[collections.abc.Callable[[dict[str, typing.Any]], "
                            "View], tuple[dict[str, typing.Any]]]"),
                    "__reduce__ for a pickle on its way to another process (multiprocessing)."));

    m.def(
        "_sanitizer_mark_ipc",
        [](nb::handle view, nb::object keep) {
            if (!is_view(view.ptr())) fail(ErrorKind::type, "expected a stridex.View, found ", type_name(view.ptr()));
            View imported = py_view(view.ptr()).view;
            imported.set_pending(std::make_shared<const RecordedPending>());
            sanitizer::observe(from_process(imported, keep, true));
            return wrap_view(std::move(imported), keep);
        },
        nb::arg("view"), nb::arg("keep").none(),
        "Test seam: `view` as a View imported from another process would be, ready after its producer's "
        "event (one that only records which streams waited for it), logged as such.");
    m.def("_ipc_open_handles", &cuda::ipc::open_handles, "CUDA IPC handles this process has open (stridex.ipc).");
    m.def("_ipc_open_pools", &cuda::ipc::open_pools,
          "Exporters' stream-ordered pools this process has imported and still uses (stridex.ipc).");
    m.def(
        "device_uuid",
        [](nb::handle ordinal) {
            return cuda::ipc::uuid_string(cuda::ipc::device_uuid(int32_arg(ordinal.ptr(), "device_uuid(): ordinal")));
        },
        "ordinal"_a, nb::sig("def device_uuid(ordinal: typing.SupportsIndex) -> str"),
        "The UUID of a CUDA device, as nvidia-smi spells it ('GPU-...').");
    m.def(
        "_device_uuid_bytes",
        [](nb::handle ordinal) {
            return as_bytes(cuda::ipc::device_uuid(int32_arg(ordinal.ptr(), "_device_uuid_bytes(): ordinal")));
        },
        "ordinal"_a);
}

}  // namespace stridex::python
