// The switch of the framework shortcuts (shortcuts.hpp) and its Python face: stridex.Shortcut,
// stridex.shortcuts(), stridex.set_shortcuts() and STRIDEX_DISABLE_SHORTCUTS. Here, beside the type
// cache, because a change of the switch empties it. The registry is stream/shortcuts.cpp.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "common/arguments.hpp"
#include "common/bindings.hpp"
#include "common/limited_api.hpp"
#include "import/import_type_cache.hpp"
#include "stream/shortcuts.hpp"
#include "stridex/error.hpp"

namespace nb = nanobind;

namespace stridex::python {

namespace {

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
        } else if (const ShortcutInfo* s = find_shortcut(item)) {
            on &= ~ShortcutSet::bit(s->id);
        } else {
            const std::string name(to_string(excerpt(item)));
            if (PyErr_WarnFormat(PyExc_RuntimeWarning, 1, "%s names no shortcut '%s' (known: all, %s); it is ignored",
                                 kEnvironment, name.c_str(), shortcut_names().c_str()) != 0)
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
    for (const ShortcutInfo& s : shortcut_table()) out.push_back({&s, shortcut_on(s.id)});
    return out;
}

nb::dict state_dict() {
    nb::dict out;
    for (const ShortcutInfo& s : shortcut_table()) out[s.name] = shortcut_on(s.id);
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
            const ShortcutInfo* s = find_shortcut(name);
            if (!s)
                fail(ErrorKind::value, what, ": there is no shortcut named '", excerpt(name),
                     "' (known: ", shortcut_names(), ")");
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
