// The framework shortcuts: where stridex.view() reads a framework's own internals instead of asking
// through a public protocol, to save what the protocol costs (tens to hundreds of nanoseconds).
//
// Each is in the registry (shortcuts.cpp): what it reads, which framework versions it was checked
// against, and what stridex does instead when it is off (the public protocol). Each can be turned
// off: STRIDEX_DISABLE_SHORTCUTS when _stridex is imported, stridex.set_shortcuts() at run time
// (docs/import.md, "Framework shortcuts"), so that a framework release that changes what one relies
// on costs a setting, not a crash. `python -m stridex doctor` compares each with the public protocol
// on the machine it runs on (python/stridex/doctor/shortcuts.py).
//
// The switch is read where a type is probed (import.cpp's per-type cache) or, for torch_borrowed,
// where it is taken: one load. Turning a shortcut on or off empties the type cache, so every type
// is probed again under the new setting.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "common/enum_set.hpp"

namespace stridex::python {

enum class Shortcut : std::uint8_t {
    numpy_struct,    // import_numpy.cpp: numpy.ndarray's C struct
    cupy_c_api,      // import_cupy.cpp: CuPy >= 14.3's C API capsule
    cupy_layout,     // import_cupy.cpp: CuPy 13.4-14.2's object layout
    jaxlib_export,   // import_jax.cpp: jaxlib's export function under ArrayImpl.__dlpack__
    torch_getter,    // import.cpp (probe), import_dlpack.cpp: Tensor.requires_grad's C getter
    torch_borrowed,  // import_dlpack.cpp: the exchange API's borrowed DLTensor
};
inline constexpr unsigned kShortcutCount = 6;

// A set of shortcuts: the column of a producer row naming those its arrays may take.
using ShortcutSet = EnumSet<Shortcut>;

// Arrays read from their own struct instead of through __dlpack__ (what a type's probe found).
enum class ArrayStruct : std::uint8_t {
    none,
    numpy,  // numpy.ndarray: Shortcut::numpy_struct (import_numpy.cpp)
    cupy,   // cupy.ndarray: Shortcut::cupy_c_api or cupy_layout (import_cupy.cpp)
};

// One entry of the registry.
struct ShortcutInfo {
    Shortcut id;
    const char* name;       // what the switch and the doctor call it ("numpy_struct")
    const char* framework;  // the module of the arrays that take it ("numpy"), for the doctor
    const char* reads;      // what of the framework's own it reads, instead of which protocol
    const char* checked;    // the framework versions it was checked against, and those it is taken for
    const char* fallback;   // the public protocol stridex uses instead when it is off
    const char* source;     // where it is taken
};

// The registry, in the order of `Shortcut` (shortcuts.cpp); one entry by its name (nullptr: none),
// and every name, comma-separated, for the errors that list them.
std::span<const ShortcutInfo> shortcut_table() noexcept;
const ShortcutInfo* find_shortcut(std::string_view name) noexcept;
std::string shortcut_names();

// The switch: bit i on while shortcut i is (all on unless STRIDEX_DISABLE_SHORTCUTS or
// stridex.set_shortcuts() said otherwise). Read with the GIL held; written only by the switch's
// Python face (import/bind_shortcuts.cpp), which empties the type cache with each change.
inline constexpr std::uint32_t kAllShortcuts = (1u << kShortcutCount) - 1;
extern std::uint32_t g_shortcuts_on;
inline bool shortcut_on(Shortcut s) noexcept { return (g_shortcuts_on & ShortcutSet::bit(s)) != 0; }

}  // namespace stridex::python
