// The Python face of the CUDA layer: cuda_available, device_count, pointer_info, and the classes
// of bind_device_ptr.cpp and bind_virtual_buffer.cpp. All rules live in C++ (include/stridex/cuda/);
// these files convert arguments, through arguments.hpp.
#include <Python.h>
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/arguments.hpp"
#include "common/bindings.hpp"
#include "stridex/cuda/driver.hpp"
#include "stridex/cuda/kernels.hpp"
#include "stridex/cuda/pointer.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace stridex::python {

using cuda::DevicePtr;

namespace {

// ---- pointer_info ----------------------------------------------------------------------------------

void bind_pointer_info(nb::module_& m) {
    using cuda::PointerInfo;
    nb::class_<PointerInfo>(m, "PointerInfo", "What the CUDA driver knows about an address.")
        .def_prop_ro(
            "memory_type", [](const PointerInfo& i) { return std::string(cuda::to_string(i.memory_type)); },
            "'host' (unknown to CUDA), 'pinned_host', 'device' or 'managed'")
        .def_prop_ro("device", &PointerInfo::device, "cuda:N, cuda_host, cuda_managed or cpu")
        .def_prop_ro(
            "device_ordinal", [](const PointerInfo& i) { return i.device_ordinal; },
            "the driver's device ordinal; -1 for host memory")
        .def_prop_ro(
            "base",
            [](const PointerInfo& i) -> nb::object {
                if (i.memory_type == cuda::MemoryType::host) return nb::none();
                return nb::cast(DevicePtr(i.base, i.device()));
            },
            nb::sig("def base(self) -> DevicePtr | None"),
            "start of the allocation (for VMM memory: of the reserved range); None for host memory")
        .def_prop_ro(
            "size", [](const PointerInfo& i) { return i.size; }, "bytes of that range; 0 for host memory")
        .def_prop_ro(
            "host_accessible", [](const PointerInfo& i) { return i.host_accessible; },
            "True when the CPU may dereference the address (host, pinned or managed memory)")
        .def("__repr__", [](const PointerInfo& i) {
            return "PointerInfo(memory_type='" + std::string(cuda::to_string(i.memory_type)) +
                   "', device=" + i.device().name() + ", base=" + hex(i.base) + ", size=" + std::to_string(i.size) +
                   ")";
        });

    m.def(
        "pointer_info",
        [](nb::handle ptr) { return cuda::pointer_info(address_arg(ptr.ptr(), "pointer_info(): ptr")); }, "ptr"_a,
        nb::sig("def pointer_info(ptr: typing.SupportsIndex | typing.SupportsInt) -> PointerInfo"),
        "Memory type, device, allocation range and host accessibility of an address (one "
        "cuPointerGetAttributes call). Without a CUDA driver every address is 'host'.");
}

// ---- the copy kernels' image (kernels.hpp): the doctor's "copy kernels" line and the tests -----------

nb::list arch_list(const std::vector<int>& archs) {
    nb::list out;
    for (int arch : archs) out.append(arch);
    return out;
}

void bind_kernel_image(nb::module_& m) {
    m.def(
        "_kernel_image",
        [] {
            const cuda::KernelImage image = cuda::kernel_image();
            nb::dict out;
            out["source"] = image.bytes ? "embedded" : "none";
            out["bytes"] = image.bytes;
            out["compiler"] = image.compiler;
            out["sass"] = arch_list(image.sass);
            out["ptx"] = arch_list(image.ptx);
            return out;
        },
        nb::sig("def _kernel_image() -> dict[str, typing.Any]"),
        "The copy kernels this build embeds, read from the fatbin (no GPU needed): source ('embedded' or "
        "'none'), bytes, compiler, sass and ptx (architectures as compute capability * 10).");
    m.def(
        "_loaded_kernels",
        [](int ordinal) {
            const cuda::LoadedKernels loaded = cuda::loaded_kernels(ordinal);
            nb::dict out;
            out["device_arch"] = loaded.device_arch;
            out["binary_arch"] = loaded.binary_arch;
            out["ptx_version"] = loaded.ptx_version;
            out["from_ptx"] = loaded.from_ptx;
            return out;
        },
        "ordinal"_a, nb::sig("def _loaded_kernels(ordinal: int) -> dict[str, typing.Any]"),
        "What the driver loaded of the kernel image on GPU `ordinal` (loading it there first): device_arch, "
        "binary_arch (the code it runs), ptx_version and from_ptx (compiled by the driver from the image's PTX).");
}

}  // namespace

void bind_cuda(nb::module_& m) {
    m.def("cuda_available", &cuda::cuda_available,
          "True when the CUDA driver (libcuda.so.1) loads, initialises and sees a device. Never raises.");
    m.def("device_count", &cuda::device_count, "CUDA devices the driver sees; 0 without a driver. Never raises.");
    bind_device_ptr(m);
    bind_pointer_info(m);
    bind_virtual_buffer(m);
    bind_kernel_image(m);
}

}  // namespace stridex::python
