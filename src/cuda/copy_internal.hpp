// The pieces of the copy engine (src/cuda/copy_*.cpp) and what they share. Private to the library.
#pragma once

#include <cstdint>

#include "stridex/cuda/copy.hpp"
#include "stridex/cuda/driver.hpp"
#include "stridex/cuda/memory.hpp"
#include "stridex/cuda/stream.hpp"
#include "stridex/detail/copy_plan.hpp"

namespace stridex::detail {
// copy_alloc.cpp: a fresh dense View of src's shape and dtype on `device`; order K keeps src's
// order of axes (by decreasing stride magnitude).
View allocate_like(const View& src, Device device, Order order, std::intptr_t stream, const Allocator* allocator);
}  // namespace stridex::detail

namespace stridex::cuda::copy_engine {

// A device address of a host pointer type (every supported driver uses unified addressing).
inline CUdeviceptr address(const void* p) noexcept { return reinterpret_cast<CUdeviceptr>(p); }

// copy_kernels.cpp: true when this build embeds the kernels (nvcc was found).
bool kernels_built() noexcept;
// Queues a strided or tiled plan on `stream` of device `ordinal` (its context current). The
// pointers are element 0 of dst and src (the plan's offsets are applied here).
void launch(const stridex::detail::CopyPlan& plan, std::byte* dst, const std::byte* src, int ordinal, CUstream stream);

// copy_alloc.cpp: stream-ordered scratch of device memory, freed (stream-ordered) by the destructor.
class Scratch {
public:
    Scratch(std::int64_t bytes, int ordinal, CUstream stream);
    Scratch(const Scratch&) = delete;
    Scratch& operator=(const Scratch&) = delete;
    std::byte* get() const noexcept { return static_cast<std::byte*>(memory_.data); }

private:
    Allocation memory_;
};
// A C-contiguous View of `like`'s shape and dtype over scratch memory (no owner: the Scratch
// outlives every use, which is queued on its stream).
View scratch_view(const Scratch& scratch, const View& like, int ordinal);

// host_tuning.cpp: the settings of the host copy paths (docs/memory.md, "Host memory"): defaults
// measured on the GPU machines, overridden by STRIDEX_HOST_COPY ("stage_mib=16,stages=4,
// threads=16,streaming=1,pack_streaming=0,register=reuse"; ValueError naming the item otherwise).
struct HostTuning {
    std::int64_t stage_bytes = std::int64_t{16} << 20;  // one staging buffer
    std::size_t stages = 4;                             // buffers in flight
    int threads = 16;                                   // host threads packing or unpacking a piece
    bool streaming = true;                              // non-temporal stores for long runs unpacked into host memory
    bool pack_streaming = false;                        // the same for packing into a staging buffer (to the device)
    detail::HostRegister register_policy = detail::HostRegister::on_reuse;  // the pageable pool's blocks
};
HostTuning host_tuning();
detail::HostRegister host_register();

// copy_staging.cpp: copies between host memory the DMA engine cannot read or write as laid out
// and a GPU, through pinned staging buffers. `device` must be C-contiguous device memory on
// `ordinal`. H2D returns with the host side read and the transfers queued on `stream`; D2H returns
// with the host side written.
void staged_to_device(const View& device, const View& host, int ordinal, CUstream stream);
void staged_to_host(const View& host, const View& device, int ordinal, CUstream stream);
// Drops the staging buffers' bookkeeping of a driver that is going (detail::forget_pools calls it),
// without calling it: a later Driver at the same address must not find them.
void forget_staging(Driver& d) noexcept;

}  // namespace stridex::cuda::copy_engine
