// Which copy kernel a plan takes, with its argument block, block shape and the blocks (tiles or
// chunks) it covers: everything about a launch but the driver call, so that the CPU emulation of
// the kernels (tests/cpp/emulated) checks the arithmetic the GPU runs. Private to the library.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <variant>

#include "kernels/copy_abi.h"
#include "stridex/detail/copy_plan.hpp"

namespace stridex::cuda::copy_engine {

// The kernel families of copy_kernels.cu; each has one entry point per unit it serves.
enum class Family { strided, tiled, vtiled, stiled, narrow };

struct KernelLaunch {
    Family family = Family::strided;
    std::int64_t unit = 1;  // the entry point's unit: stridex_<family>_<unit>
    unsigned threads_x = 1, threads_y = 1;
    unsigned shared_bytes = 0;  // dynamic shared memory
    std::int64_t blocks = 0;    // what the grid covers (the kernels loop over blocks beyond the grid)
    std::variant<kernels::StridedArgs, kernels::TiledArgs, kernels::NarrowArgs> args;
};

// The launch of a strided, tiled or narrow plan; dst and src are element 0 of each side (the plan's
// offsets are applied here).
KernelLaunch launch_for(const stridex::detail::CopyPlan& plan, std::byte* dst, const std::byte* src);

// "stridex_vtiled_4": the entry point's name in the image.
std::string entry_point(Family family, std::int64_t unit);

}  // namespace stridex::cuda::copy_engine
