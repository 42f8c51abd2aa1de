// The registry of framework shortcuts (see shortcuts.hpp). Its switch's Python face (stridex.Shortcut,
// stridex.shortcuts(), stridex.set_shortcuts() and STRIDEX_DISABLE_SHORTCUTS) is
// import/bind_shortcuts.cpp, beside the type cache a change empties. Add a shortcut here (an entry,
// with what it reads, the versions it was checked against and its fallback), in the producer row
// of its framework (producers.cpp), in docs/import.md's table, and in the doctor's samples
// (python/stridex/doctor/shortcuts.py).
#include "stream/shortcuts.hpp"

#include <array>
#include <string>
#include <string_view>

namespace stridex::python {

std::uint32_t g_shortcuts_on = kAllShortcuts;

namespace {

constexpr std::array<ShortcutInfo, kShortcutCount> kShortcuts{{
    {Shortcut::numpy_struct, "numpy_struct", "numpy",
     "numpy.ndarray's C struct (data, nd, dimensions, strides, base, descr, flags) and its dtype's byteorder and "
     "type_num, at the offsets of NumPy's C ABI",
     "NumPy 2.4.6 and 2.5.2 (the fields sit at the same offsets from NumPy 1.7 to 2.x); taken from NumPy 2.1 on",
     "numpy.ndarray.__dlpack__(max_version=(1, 3))", "src/extension/import/import_numpy.cpp"},
    {Shortcut::cupy_c_api, "cupy_c_api", "cupy",
     "CuPy's C API capsule cupy._public_c_api (get_ndarray_metadata, get_current_stream_ptr), as "
     "cupy/public_c_api.pxd documents it",
     "a stand-in capsule of that layout over CuPy 14.2.0 arrays (no CuPy 14.3 run yet); taken from CuPy 14.3 on",
     "cupy.ndarray.__dlpack__(stream=..., max_version=(1, 3))", "src/extension/import/import_cupy.cpp"},
    {Shortcut::cupy_layout, "cupy_layout", "cupy",
     "the object layout of CuPy's _ndarray_base and MemoryPointer (shape, strides, dtype, data pointer, device) "
     "and get_stream_ptr from cupy_backends.cuda.stream's Cython C-API table",
     "CuPy 14.2.0 (H100, H200); taken for CuPy 13.4 to 14.2, whose public header reads the same layout",
     "cupy.ndarray.__dlpack__(stream=..., max_version=(1, 3))", "src/extension/import/import_cupy.cpp"},
    {Shortcut::jaxlib_export, "jaxlib_export", "jax",
     "jaxlib._jax.buffer_to_dlpack_managed_tensor, the C++ function under ArrayImpl.__dlpack__'s Python layers, "
     "given the buffer __dlpack__ gives it (ArrayImpl._fully_replicated_shard, C++), and the C++ getters of "
     "ArrayImpl._sharding, SingleDeviceSharding._internal_device_list and DeviceList.is_fully_addressable",
     "JAX 0.10.2 (CPU) and 0.11.2 (H100, H200); taken from JAX 0.4.27 on, where jaxlib has them",
     "ArrayImpl.__dlpack__(stream=..., max_version=(1, 3)), JAX's own Python layers",
     "src/extension/import/import_jax.cpp"},
    {Shortcut::torch_getter, "torch_getter", "torch",
     "the C getter of torch.Tensor.requires_grad (its getset descriptor's function pointer), called directly",
     "torch 2.11.0 (CPU, CUDA); taken from torch 2.9 on, whose exchange API skips the refusals it serves",
     "getattr(tensor, 'requires_grad')", "src/extension/import/import_dlpack.cpp"},
    {Shortcut::torch_borrowed, "torch_borrowed", "torch",
     "the borrowed DLTensor of torch's DLPack exchange API (dltensor_from_py_object_no_sync), trusting that torch "
     "tensors are never read-only: a bare DLTensor carries no flags",
     "torch 2.11.0 (CPU, CUDA); taken from torch 2.9 on",
     "the exchange API's managed tensor (managed_tensor_from_py_object_no_sync), which carries the read-only flag",
     "src/extension/import/import_dlpack.cpp"},
}};

constexpr bool in_order() {
    for (unsigned i = 0; i < kShortcutCount; ++i)
        if (static_cast<unsigned>(kShortcuts[i].id) != i) return false;
    return true;
}
static_assert(in_order(), "the registry lists the shortcuts in the order of the Shortcut enum");

}  // namespace

const ShortcutInfo* find_shortcut(std::string_view name) noexcept {
    for (const ShortcutInfo& s : kShortcuts)
        if (name == s.name) return &s;
    return nullptr;
}

std::string shortcut_names() {
    std::string out;
    for (const ShortcutInfo& s : kShortcuts) {
        if (!out.empty()) out += ", ";
        out += s.name;
    }
    return out;
}

std::span<const ShortcutInfo> shortcut_table() noexcept { return kShortcuts; }

}  // namespace stridex::python
