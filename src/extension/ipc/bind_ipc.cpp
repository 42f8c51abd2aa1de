// The native half of stridex.ipc: CUDA exports (handle, fds, event) and the one entry that imports
// them (ipc_import.hpp; include/stridex/cuda/ipc.hpp). The protocol around them -- tickets, the
// Unix socket that carries fds and release messages, host memory -- is Python
// (python/stridex/ipc/). The stub generator skips private names, so stubs.pattern types _IpcExport
// and the private helpers here.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "common/arguments.hpp"
#include "common/bindings.hpp"
#include "common/limited_api.hpp"
#include "export/export.hpp"
#include "export/py_owner.hpp"
#include "ipc/ipc_import.hpp"
#include "sanitizer/sanitizer.hpp"
#include "stridex/cuda/ipc.hpp"
#include "stridex/pending.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace stridex::python {

namespace {

using cuda::ipc::Export;

template <class In>
nb::bytes as_bytes(const In& in) {
    return nb::bytes(reinterpret_cast<const char*>(&in), sizeof in);
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

// The exporter's record of one export (held by its ticket): what travels, plus the event and fds
// it owns until the importer released them.
struct PyExport {
    Export exp;
};

}  // namespace

void bind_ipc(nb::module_& m) {
    nb::class_<PyExport>(m, "_IpcExport", "One CUDA export of a View (stridex.ipc); owns its event and fds.")
        .def_prop_ro("kind", [](const PyExport& e) { return ipc_kind_name(e.exp.kind()); })
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

    m.def("_ipc_import", &ipc_import, "kind"_a, "payload"_a, "fds"_a, "keep"_a.none(),
          "The View of a pickled CUDA View's payload (stridex.ipc.codecs), owned by `keep`; `fds` are the "
          "file descriptors received for it. TypeError or ValueError naming the field that is malformed.");

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
    // process (the exporter waits for them at exit): what stridex.ipc.pickling registers, so that
    // the registration itself imports none of stridex.ipc's machinery.
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
