// The registry of framework shortcuts and their switch (see shortcuts.hpp), and its Python face:
// stridex.Shortcut, stridex.shortcuts(), stridex.set_shortcuts() and STRIDEX_DISABLE_SHORTCUTS.
// Add a shortcut here (an entry, with what it reads, the versions it was checked against and its
// fallback), in the producer row of its framework (producers.cpp), in docs/import.md's table, and
// in the doctor's samples (python/stridex/doctor/shortcuts.py).
#include "shortcuts.hpp"

#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <array>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "arguments.hpp"
#include "bindings.hpp"
#include "import.hpp"
#include "limited_api.hpp"
#include "stridex/error.hpp"

namespace nb = nanobind;

namespace stridex::python {

constexpr std::uint32_t kAllShortcuts = (1u << kShortcutCount) - 1;
std::uint32_t g_shortcuts_on = kAllShortcuts;

namespace {

constexpr std::array<ShortcutInfo, kShortcutCount> kShortcuts{{
    {Shortcut::numpy_struct, "numpy_struct", "numpy",
     "numpy.ndarray's C struct (data, nd, dimensions, strides, base, descr, flags) and its dtype's byteorder and "
     "type_num, at the offsets of NumPy's C ABI",
     "NumPy 2.4.6 and 2.5.2 (the fields sit at the same offsets from NumPy 1.7 to 2.x); taken from NumPy 2.1 on",
     "numpy.ndarray.__dlpack__(max_version=(1, 3))", "src/extension/import_numpy.cpp"},
    {Shortcut::cupy_c_api, "cupy_c_api", "cupy",
     "CuPy's C API capsule cupy._public_c_api (get_ndarray_metadata, get_current_stream_ptr), as "
     "cupy/public_c_api.pxd documents it",
     "a stand-in capsule of that layout over CuPy 14.2.0 arrays (no CuPy 14.3 run yet); taken from CuPy 14.3 on",
     "cupy.ndarray.__dlpack__(stream=..., max_version=(1, 3))", "src/extension/import_cupy.cpp"},
    {Shortcut::cupy_layout, "cupy_layout", "cupy",
     "the object layout of CuPy's _ndarray_base and MemoryPointer (shape, strides, dtype, data pointer, device) "
     "and get_stream_ptr from cupy_backends.cuda.stream's Cython C-API table",
     "CuPy 14.2.0 (H100, H200); taken for CuPy 13.4 to 14.2, whose public header reads the same layout",
     "cupy.ndarray.__dlpack__(stream=..., max_version=(1, 3))", "src/extension/import_cupy.cpp"},
    {Shortcut::jaxlib_export, "jaxlib_export", "jax",
     "jaxlib._jax.buffer_to_dlpack_managed_tensor, the C++ function under ArrayImpl.__dlpack__'s Python layers, "
     "given the buffer __dlpack__ gives it (ArrayImpl._fully_replicated_shard, C++), and the C++ getters of "
     "ArrayImpl._sharding, SingleDeviceSharding._internal_device_list and DeviceList.is_fully_addressable",
     "JAX 0.10.2 (CPU) and 0.11.2 (H100, H200); taken from JAX 0.4.27 on, where jaxlib has them",
     "ArrayImpl.__dlpack__(stream=..., max_version=(1, 3)), JAX's own Python layers", "src/extension/import_jax.cpp"},
    {Shortcut::torch_getter, "torch_getter", "torch",
     "the C getter of torch.Tensor.requires_grad (its getset descriptor's function pointer), called directly",
     "torch 2.11.0 (CPU, CUDA); taken from torch 2.9 on, whose exchange API skips the refusals it serves",
     "getattr(tensor, 'requires_grad')", "src/extension/import_dlpack.cpp"},
    {Shortcut::torch_borrowed, "torch_borrowed", "torch",
     "the borrowed DLTensor of torch's DLPack exchange API (dltensor_from_py_object_no_sync), trusting that torch "
     "tensors are never read-only: a bare DLTensor carries no flags",
     "torch 2.11.0 (CPU, CUDA); taken from torch 2.9 on",
     "the exchange API's managed tensor (managed_tensor_from_py_object_no_sync), which carries the read-only flag",
     "src/extension/import_dlpack.cpp"},
}};

constexpr bool in_order() {
    for (unsigned i = 0; i < kShortcutCount; ++i)
        if (static_cast<unsigned>(kShortcuts[i].id) != i) return false;
    return true;
}
static_assert(in_order(), "the registry lists the shortcuts in the order of the Shortcut enum");

const ShortcutInfo* find(std::string_view name) noexcept {
    for (const ShortcutInfo& s : kShortcuts)
        if (name == s.name) return &s;
    return nullptr;
}

std::string known_names() {
    std::string out;
    for (const ShortcutInfo& s : kShortcuts) {
        if (!out.empty()) out += ", ";
        out += s.name;
    }
    return out;
}

// Sets the switch; a change empties the type cache, whose entries say which shortcuts their type
// takes, so that the next import of every type is probed under the new setting.
void set_switch(std::uint32_t on) noexcept {
    if (on == g_shortcuts_on) return;
    g_shortcuts_on = on;
    clear_type_cache();
}

constexpr char kEnvironment[] = "STRIDEX_DISABLE_SHORTCUTS";

// STRIDEX_DISABLE_SHORTCUTS: "all", or shortcut names separated by commas. A name that is no
// shortcut is a RuntimeWarning (a setting meant to turn one off must not pass unnoticed), and is
// otherwise ignored, so that a setting written for another stridex version does not stop imports.
void read_environment() {
    const char* text = std::getenv(kEnvironment);
    if (!text) return;
    std::uint32_t on = kAllShortcuts;
    std::string_view rest(text);
    while (!rest.empty()) {
        const std::size_t comma = rest.find(',');
        std::string_view item = rest.substr(0, comma);
        rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
        while (!item.empty() && (item.front() == ' ' || item.front() == '\t')) item.remove_prefix(1);
        while (!item.empty() && (item.back() == ' ' || item.back() == '\t')) item.remove_suffix(1);
        if (item.empty()) continue;
        if (item == "all") {
            on = 0;
        } else if (const ShortcutInfo* s = find(item)) {
            on &= ~ShortcutSet::bit(s->id);
        } else {
            const std::string name(to_string(excerpt(item)));
            if (PyErr_WarnFormat(PyExc_RuntimeWarning, 1, "%s names no shortcut '%s' (known: all, %s); it is ignored",
                                 kEnvironment, name.c_str(), known_names().c_str()) != 0)
                throw nb::python_error();  // warnings turned into errors: the import fails with it
        }
    }
    g_shortcuts_on = on;  // before any import: no type has been probed yet
}

// What stridex.shortcuts() lists: an entry of the registry and its state at the time of the call.
struct ShortcutState {
    const ShortcutInfo* info;
    bool enabled;
};

std::vector<ShortcutState> states() {
    std::vector<ShortcutState> out;
    for (const ShortcutInfo& s : kShortcuts) out.push_back({&s, shortcut_on(s.id)});
    return out;
}

nb::dict state_dict() {
    nb::dict out;
    for (const ShortcutInfo& s : kShortcuts) out[s.name] = shortcut_on(s.id);
    return out;
}

// stridex.set_shortcuts(enabled): all of them (a bool) or those a dict names. The whole argument
// is checked before anything changes.
nb::dict set_shortcuts(nb::handle enabled) {
    constexpr const char* what = "stridex.set_shortcuts()";
    nb::dict previous = state_dict();
    std::uint32_t on = g_shortcuts_on;
    if (PyBool_Check(enabled.ptr())) {
        on = enabled.ptr() == Py_True ? kAllShortcuts : 0;
    } else if (PyDict_Check(enabled.ptr())) {
        PyObject *key = nullptr, *value = nullptr;
        Py_ssize_t position = 0;
        while (PyDict_Next(enabled.ptr(), &position, &key, &value)) {
            if (!PyUnicode_Check(key)) fail(ErrorKind::type, what, ": shortcut names are str, found ", type_name(key));
            const char* name = PyUnicode_AsUTF8(key);
            if (!name) throw nb::python_error();
            const ShortcutInfo* s = find(name);
            if (!s)
                fail(ErrorKind::value, what, ": there is no shortcut named '", excerpt(name),
                     "' (known: ", known_names(), ")");
            if (!PyBool_Check(value))
                fail(ErrorKind::type, what, ": the value for '", s->name, "' must be True or False, found ",
                     type_name(value));
            on = value == Py_True ? (on | ShortcutSet::bit(s->id)) : (on & ~ShortcutSet::bit(s->id));
        }
    } else {
        fail(ErrorKind::type, what, " takes True, False or a dict of shortcut names to bools, found ",
             type_name(enabled.ptr()));
    }
    set_switch(on);
    return previous;
}

const char kShortcutDoc[] = R"(A framework shortcut, as stridex.shortcuts() lists it.

stridex reads some frameworks' own internals instead of asking through a public protocol,
where that gives the same View for less: NumPy's and CuPy's array structs, jaxlib's export
function, torch's requires_grad getter and borrowed tensors. Each can be turned off
(stridex.set_shortcuts, STRIDEX_DISABLE_SHORTCUTS), and `python -m stridex doctor` checks
each against the public protocol on its machine. See docs/import.md, "Framework shortcuts".)";

const char kShortcutsDoc[] = R"(The framework shortcuts stridex.view() may take, each with its state now.

A shortcut reads a framework's own internals (an array struct, a C function under a Python
method) where that gives exactly the View the public protocol would, for less. They are all
on unless turned off: STRIDEX_DISABLE_SHORTCUTS, read when stridex is imported, names those
to turn off (comma-separated names, or ``all``), and set_shortcuts() changes them at run time.)";

const char kSetShortcutsDoc[] = R"(Turns framework shortcuts on or off; returns the previous state of each.

``set_shortcuts(False)`` turns every shortcut off (stridex.view() then asks each framework
through its public protocol only), ``set_shortcuts(True)`` turns them all on, and a dict
sets those it names: ``set_shortcuts({"jaxlib_export": False})``. The result, a dict of
every shortcut's name to its previous state, restores them when passed back. An unknown
name is a ValueError and a value that is not a bool a TypeError; nothing changes then.
Imports in progress finish as they began; every later one follows the new setting.)";

}  // namespace

std::span<const ShortcutInfo> shortcut_table() noexcept { return kShortcuts; }

void bind_shortcuts(nb::module_& m) {
    read_environment();
    nb::class_<ShortcutState>(m, "Shortcut", kShortcutDoc)
        .def_prop_ro(
            "name", [](const ShortcutState& s) { return s.info->name; },
            "Its name, as STRIDEX_DISABLE_SHORTCUTS and set_shortcuts() take it ('numpy_struct').")
        .def_prop_ro(
            "framework", [](const ShortcutState& s) { return s.info->framework; },
            "The framework whose arrays take it: its top-level module ('numpy', 'cupy', 'jax', 'torch').")
        .def_prop_ro(
            "enabled", [](const ShortcutState& s) { return s.enabled; },
            "Whether it was on when stridex.shortcuts() was called.")
        .def_prop_ro(
            "reads", [](const ShortcutState& s) { return s.info->reads; },
            "What of the framework's own it reads instead of a public protocol.")
        .def_prop_ro(
            "checked", [](const ShortcutState& s) { return s.info->checked; },
            "The framework versions it was checked against, and those it is taken for.")
        .def_prop_ro(
            "fallback", [](const ShortcutState& s) { return s.info->fallback; },
            "The public protocol stridex uses instead while it is off.")
        .def_prop_ro(
            "source", [](const ShortcutState& s) { return s.info->source; },
            "The source file of stridex that takes it.")
        .def("__repr__", [](const ShortcutState& s) {
            return std::string("stridex.Shortcut('") + s.info->name + "', framework='" + s.info->framework +
                   "', enabled=" + (s.enabled ? "True" : "False") + ")";
        });
    m.def("shortcuts", &states, kShortcutsDoc);
    m.def("set_shortcuts", &set_shortcuts,
          nb::sig("def set_shortcuts(enabled: bool | dict[str, bool], /) -> dict[str, bool]"), kSetShortcutsDoc);
}

}  // namespace stridex::python
