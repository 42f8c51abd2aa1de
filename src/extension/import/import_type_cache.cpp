// The per-type cache of stridex.view() (import_type_cache.hpp): probing a type, filling, retiring
// and parking entries.
#include "import/import_type_cache.hpp"

#include <nanobind/nanobind.h>

#include "common/attributes.hpp"
#include "common/limited_api.hpp"
#include "common/names.hpp"
#include "import/importers.hpp"

namespace nb = nanobind;

namespace stridex::python {

namespace type_cache {

TypeEntry g_slots[kSlots];
CacheStats g_stats;
int g_depth = 0;
std::vector<TypeEntry>* g_parked = nullptr;

void release(TypeEntry& e) noexcept {
    Py_XDECREF(e.dlpack);
    Py_XDECREF(e.dlpack_device);
    Py_XDECREF(e.exchange_holder);
    Py_XDECREF(reinterpret_cast<PyObject*>(e.type));
    e = TypeEntry{};
}

void release_parked() noexcept {
    std::vector<TypeEntry> parked;
    parked.swap(*g_parked);
    for (TypeEntry& e : parked) release(e);
}

namespace {

unsigned int version_tag(PyTypeObject* type) noexcept {
#ifdef Py_LIMITED_API
    // 1 for a type whose MRO is immutable throughout (import_type_cache.hpp), else 0: never cached.
    PyObject* mro = PyObject_GetAttrString(reinterpret_cast<PyObject*>(type), "__mro__");
    bool immutable = mro && PyTuple_Check(mro);
    for (Py_ssize_t i = 0; immutable && i < PyTuple_Size(mro); ++i) {
        PyObject* base = PyTuple_GetItem(mro, i);
        immutable = PyType_Check(base) &&
                    (PyType_GetFlags(reinterpret_cast<PyTypeObject*>(base)) & Py_TPFLAGS_IMMUTABLETYPE) != 0;
    }
    Py_XDECREF(mro);
    if (PyErr_Occurred()) PyErr_Clear();
    return immutable ? 1 : 0;
#else
#if PY_VERSION_HEX >= 0x030C0000
    if (type->tp_version_tag == 0) PyUnstable_Type_AssignVersionTag(type);
#endif
    return type->tp_version_tag;
#endif
}

void retire(TypeEntry& old) noexcept {
    if (!old.type) return;
    if (g_depth > 0) {
        try {
            if (!g_parked) g_parked = new std::vector<TypeEntry>();
            g_parked->push_back(old);
            old = TypeEntry{};
            return;
        } catch (...) {
            // Out of memory: leak the references rather than free what an import may use.
            old = TypeEntry{};
            return;
        }
    }
    release(old);
}

TypeEntry probe(PyTypeObject* type) {
    TypeEntry e;
    e.exchange = exchange_api_of(type, &e.exchange_holder);  // first: it may throw
    Py_INCREF(reinterpret_cast<PyObject*>(type));
    e.type = type;
    e.dlpack = type_lookup(type, names.dlpack);
    e.dlpack_unbound = e.dlpack && method_like(e.dlpack);
    e.dlpack_device = type_lookup(type, names.dlpack_device);
    e.dlpack_device_unbound = e.dlpack_device && method_like(e.dlpack_device);
    PyObject* cai = type_lookup(type, names.cuda_array_interface);
    PyObject* ai = type_lookup(type, names.array_interface);
    e.cai_on_type = cai != nullptr;
    e.ai_on_type = ai != nullptr;
    Py_XDECREF(cai);
    Py_XDECREF(ai);
    // Instances with a __dict__ or a custom __getattr__ may carry the protocols themselves.
#ifdef Py_LIMITED_API
    e.instance_attrs = limited::type_int(type, "__dictoffset__") != 0 ||
                       PyType_GetSlot(type, Py_tp_getattro) != reinterpret_cast<void*>(&PyObject_GenericGetAttr);
    e.buffer = PyType_GetSlot(type, Py_bf_getbuffer) != nullptr;
#else
    e.instance_attrs = type->tp_dictoffset != 0 || type->tp_getattro != PyObject_GenericGetAttr;
    e.buffer = type->tp_as_buffer && type->tp_as_buffer->bf_getbuffer;
#endif
    e.row = &producer_for(type);
    e.keywords = e.row->keywords;
    e.array_struct = readable_array_struct(type, *e.row, e.dlpack);
    e.jaxlib_export = jaxlib_export_usable(type, *e.row, e.dlpack);
#ifndef Py_LIMITED_API  // no PyGetSetDescrObject there: requires_grad by getattr
    if (e.row->exchange_skips_refusals && e.row->takes(Shortcut::torch_getter)) {
        // A C getset (torch's) is called without the generic attribute lookup on every import; the
        // type holds it, and a change to the type means a new probe. Anything else: getattr.
        if (PyObject* d = type_lookup(type, names.requires_grad)) {
            if (Py_TYPE(d) == &PyGetSetDescr_Type) {
                const PyGetSetDef* def = reinterpret_cast<PyGetSetDescrObject*>(d)->d_getset;
                e.requires_grad_get = def->get;
                e.requires_grad_closure = def->closure;
            }
            Py_DECREF(d);
        }
    }
#endif
    // The probes above swallow only Exceptions (attributes.hpp): a KeyboardInterrupt raised by a
    // framework's code on the way is still set, and ends the import.
    if (PyErr_Occurred()) {
        release(e);
        throw nb::python_error();
    }
    e.version_tag = version_tag(type);
    return e;
}

}  // namespace

TypeEntry fill(PyTypeObject* type, bool* uncached) {
    TypeEntry e = probe(type);
    if (e.version_tag == 0) {
        ++g_stats.uncacheable;
        *uncached = true;
        return e;
    }
    ++g_stats.fills;
    TypeEntry& slot = g_slots[slot_of(type)];
    TypeEntry old = slot;
    slot = e;
    retire(old);
    return e;
}

}  // namespace type_cache

ArrayStruct readable_array_struct(PyTypeObject* type, const ProducerRow& row, PyObject* dlpack) noexcept {
    if (!dlpack) return ArrayStruct::none;  // only what __dlpack__ would describe is read
    if (numpy_struct_readable(type, row)) return ArrayStruct::numpy;
    if (cupy_struct_readable(type, row, dlpack)) return ArrayStruct::cupy;
    return ArrayStruct::none;
}

void learn(const TypeEntry& e, DlpackKeywords keywords) noexcept {
    TypeEntry& slot = type_cache::g_slots[type_cache::slot_of(e.type)];
    if (slot.type == e.type && slot.version_tag == e.version_tag) slot.keywords = keywords;
}

ShortcutSet shortcuts_of(PyTypeObject* type) {
    const Depth depth;  // the probe's release may drop what an import in progress uses
    TypeEntry e = type_cache::probe(type);
    ShortcutSet s;
    if (e.array_struct == ArrayStruct::numpy) s.add(Shortcut::numpy_struct);
    if (e.array_struct == ArrayStruct::cupy) s.add(cupy_struct_shortcut());
    if (e.jaxlib_export) s.add(Shortcut::jaxlib_export);
    if (e.requires_grad_get) s.add(Shortcut::torch_getter);
    if (borrows_exchange_tensors(e)) s.add(Shortcut::torch_borrowed);
    type_cache::retire(e);
    return s;
}

CacheStats cache_stats() noexcept { return type_cache::g_stats; }

void clear_type_cache() noexcept {
    for (TypeEntry& s : type_cache::g_slots) {
        TypeEntry old = s;
        s = TypeEntry{};
        type_cache::retire(old);
    }
}

}  // namespace stridex::python
