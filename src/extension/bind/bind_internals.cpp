// stridex._stridex._internals: read-only windows on the extension's own rules and state.
//
// The producer-quirk table, the stream translation, the per-type protocol cache and the framework
// shortcuts a type takes are the extension's internals; the test suite checks them row by row,
// and a bug report can quote them.
// Not a public API. (The test producers and the stream recorder live in the test-only module,
// tests/python/ext/testing.cpp.)
#include <nanobind/stl/string.h>

#include <string>
#include <vector>

#include "common/arguments.hpp"
#include "common/bindings.hpp"
#include "import/import_type_cache.hpp"
#include "import/importers.hpp"
#include "stridex/error.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace stridex::python {
namespace {

std::string kind_name(StreamRequest::Kind k) {
    switch (k) {
        case StreamRequest::Kind::by_default: return "default";
        case StreamRequest::Kind::no_sync: return "no_sync";
        case StreamRequest::Kind::on_stream: return "stream";
    }
    return "?";
}

const char* array_struct_name(ArrayStruct s) {
    switch (s) {
        case ArrayStruct::none: return "none";
        case ArrayStruct::numpy: return "numpy";
        case ArrayStruct::cupy: return "cupy";
    }
    return "?";
}

const char* keywords_name(DlpackKeywords k) {
    switch (k) {
        case DlpackKeywords::full: return "full";
        case DlpackKeywords::stream_only: return "stream_only";
        case DlpackKeywords::none: return "none";
    }
    return "?";
}

// The names of a set's shortcuts, in the registry's order.
nb::list shortcut_names(ShortcutSet set) {
    nb::list out;
    for (const ShortcutInfo& s : shortcut_table())
        if (set.has(s.id)) out.append(s.name);
    return out;
}

nb::dict row_dict(const ProducerRow& r) {
    nb::dict d;
    d["name"] = r.name;
    d["module"] = r.module;
    d["package"] = r.package;
    d["since"] = nb::make_tuple(r.since.major, r.since.minor, r.since.patch);
    d["until"] = nb::make_tuple(r.until.major, r.until.minor, r.until.patch);
    d["keywords"] = keywords_name(r.keywords);
    d["host_only"] = r.host_only;
    d["takes_no_sync"] = r.takes_no_sync;
    d["takes_per_thread"] = r.takes_per_thread;
    d["needs_current_device"] = r.needs_current_device;
    d["immutable"] = r.immutable;
    d["spell_none"] = r.spell_none;
    d["repair_negative_strides"] = r.repair_negative_strides;
    d["exchange_skips_refusals"] = r.exchange_skips_refusals;
    d["refusals_final"] = r.refusals_final;
    d["shortcuts"] = shortcut_names(r.shortcuts);
    d["spells_default_stream"] = r.spells_default_stream();
    d["why"] = r.why;
    return d;
}

PyTypeObject* type_arg(nb::handle type) {
    if (!PyType_Check(type.ptr())) fail(ErrorKind::type, "expected a type");
    return reinterpret_cast<PyTypeObject*>(type.ptr());
}

// The __dlpack__ a probe finds on a type (through its MRO, as import_type_cache.cpp's probe), or an
// invalid object.
nb::object dlpack_of(PyTypeObject* type) { return nb::steal(type_lookup(type, names.dlpack)); }

}  // namespace

void bind_internals(nb::module_& parent) {
    nb::module_ m = parent.def_submodule("_internals",
                                         "The extension's tables, stream rules and caches (not a public API).");

    m.def(
        "parse_stream",
        [](nb::handle stream) {
            const StreamRequest r = parse_stream(stream.ptr());
            return nb::make_tuple(kind_name(r.kind), r.handle);
        },
        "stream"_a.none(), "How stridex.view() reads a stream argument: (kind, handle).");
    m.def("producer_rows", [] {
        nb::list out;
        for (const ProducerRow& r : producer_rows()) out.append(row_dict(r));
        return out;
    });
    m.def(
        "producer_for", [](nb::handle type) { return std::string(producer_for(type_arg(type)).name); }, "type"_a,
        "The quirk-table row stridex uses for a type.");
    m.def(
        "array_struct",
        [](nb::handle type) -> nb::object {
            PyTypeObject* t = type_arg(type);
            const ArrayStruct s = readable_array_struct(t, producer_for(t), dlpack_of(t).ptr());
            return s == ArrayStruct::none ? nb::none() : nb::object(nb::str(array_struct_name(s)));
        },
        "type"_a,
        "Which struct stridex.view() reads instances of a type from: 'numpy' (import_numpy.cpp), 'cupy' "
        "(import_cupy.cpp) or None (the protocols).");
    m.def(
        "jaxlib_export",
        [](nb::handle type) {
            PyTypeObject* t = type_arg(type);
            return jaxlib_export_usable(t, producer_for(t), dlpack_of(t).ptr());
        },
        "type"_a,
        "Whether stridex.view() takes the capsule of instances of a type from jaxlib directly "
        "(import_jax.cpp) rather than from their __dlpack__.");
    m.def(
        "shortcuts_of", [](nb::handle type) { return shortcut_names(shortcuts_of(type_arg(type))); }, "type"_a,
        "The framework shortcuts (stridex.shortcuts()) that stridex.view() takes for instances of a type now, "
        "under the current switch: a probe of the type outside the cache.");
    m.def(
        "dlpack_stream",
        [](const std::string& row_name, nb::handle stream, nb::object device) {
            const ProducerRow* row = producer_named(row_name.c_str());
            if (!row) fail(ErrorKind::value, "no producer row named '", row_name, "'");
            const StreamRequest request = parse_stream(stream.ptr());
            Device d;
            const Device* known = nullptr;
            if (!device.is_none()) {
                d = device_arg(device.ptr(), "_internals.dlpack_stream(): device", /*ints_are_cuda_ordinals=*/false);
                known = &d;
            }
            DlpackStream out;
            dlpack_stream(request, known, *row, out);
            return nb::make_tuple(nb::borrow(out.value),
                                  out.ready == kNoStream ? nb::object(nb::none()) : nb::object(nb::int_(out.ready)));
        },
        "row"_a, "stream"_a.none(), "device"_a.none() = nb::none(),
        "(value sent as __dlpack__(stream=...), stream the data is then ready on) for a row, a stream argument "
        "and the __dlpack_device__ answer (None: not asked).");
    m.def(
        "cache_stats",
        [] {
            const CacheStats s = cache_stats();
            return nb::make_tuple(s.hits, s.fills, s.uncacheable);
        },
        "(hits, fills, uncacheable) of the per-type protocol cache.");
    m.def("clear_type_cache", &clear_type_cache);
    // Built against CPython's limited API (the abi3 wheel; limited_api.hpp): only immutable types
    // are cached, and the torch_getter shortcut is never taken.
#ifdef Py_LIMITED_API
    m.attr("stable_abi") = true;
#else
    m.attr("stable_abi") = false;
#endif
}

}  // namespace stridex::python
