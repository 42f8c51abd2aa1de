// The copy kernels this build carries, and what the driver loaded of them on a GPU: what the
// doctor's "copy kernels" line prints (docs/copy.md, "Kernel image"). CUDA layer
// (src/cuda/copy_kernels.cpp, link stridex::cuda).
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <vector>

namespace stridex::cuda {

// One fatbin's contents. Architectures are compute capabilities times ten (75, 80, ... 120).
struct KernelImage {
    std::size_t bytes = 0;  // the fatbin; 0 in a build without kernels (STRIDEX_CUDA_KERNELS=OFF)
    std::string compiler;   // "nvcc 13.0.88"; empty without kernels
    std::vector<int> sass;  // machine code: runs on a GPU of the same major version and a minor one >= it
    std::vector<int> ptx;   // PTX: the driver compiles it for a GPU of that architecture or newer
};

// The image embedded in this build, read from its fatbin headers (no GPU or driver needed).
KernelImage kernel_image();

// The entries of fatbin bytes (the container nvcc -fatbin writes: a 16-byte header whose magic is
// 0xBA55ED50 and whose size covers the entries, each entry a header naming its kind, 1 PTX or 2
// machine code, its size and its architecture, then its payload, possibly compressed). Anything
// else, or an entry running past the end, is Error(value) naming the byte offset.
KernelImage parse_fatbin(std::span<const unsigned char> image);

// What the driver loaded of the embedded image on GPU `ordinal` (loading it there first when no copy
// has yet): the GPU's architecture, the architecture of the code it runs (the image's SASS for
// that GPU, or machine code the driver compiled from the image's PTX: `from_ptx`) and the PTX
// version it came from. Error(unsupported) in a build without kernels; the driver's error where the
// image does not load (a driver older than the nvcc that built it).
struct LoadedKernels {
    int device_arch = 0;
    int binary_arch = 0;  // CU_FUNC_ATTRIBUTE_BINARY_VERSION of the kernels
    int ptx_version = 0;  // CU_FUNC_ATTRIBUTE_PTX_VERSION, e.g. 90 for PTX ISA 9.0
    bool from_ptx = false;
};
LoadedKernels loaded_kernels(int ordinal);

}  // namespace stridex::cuda
