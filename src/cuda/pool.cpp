// stridex's own Allocator over its pools, and what concerns them all: note_use, trimming, a Driver
// going (memory.hpp, docs/memory.md). Each allocator has its file: the device pools
// pool_device.cpp, the pinned size classes pool_pinned.cpp, the pageable cache pool_pageable.cpp;
// below them, what they share is pool_internal.hpp and the pools of each Driver pool_registry.cpp.
// This file only calls down into them.
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <vector>

#include "copy_internal.hpp"
#include "pool_internal.hpp"
#include "stridex/cuda/memory.hpp"
#include "stridex/cuda/stream.hpp"
#include "stridex/host_copy.hpp"

namespace stridex::cuda {

using namespace pools;  // the shared blocks and pools (pool_internal.hpp)

namespace {

class PoolAllocator final : public Allocator {
public:
    Allocation allocate(std::size_t bytes, Device device, std::intptr_t stream) const override {
        switch (device.type) {
            case DeviceType::kCPU: {
                if (bytes >= kPageableMin) return allocate_pageable(bytes);
                View v = allocate_host(std::vector<std::int64_t>{static_cast<std::int64_t>(bytes)}, dtypes::uint8);
                return {v.data(), std::move(v).take_owner()};
            }
            case DeviceType::kCUDA: {
                Driver& d = driver();
                const ContextGuard guard(d, device.id);
                const StreamRef run(stream == kNoStream ? kDefaultStream : stream);
                return allocate_device(bytes, device.id, run.handle());
            }
            case DeviceType::kCUDAHost: return allocate_pinned(bytes);
            case DeviceType::kCUDAManaged: {
                Driver& d = driver();
                const ContextGuard guard(d, 0);
                CUdeviceptr p = 0;
                d.call("cuMemAllocManaged", d.api().mem_alloc_managed, &p, bytes, cu::kMemAttachGlobal);
                Owner owner = Owner::from_action([p]() noexcept {
                    try {
                        Driver& drv = driver();
                        const ContextGuard g(drv, 0);
                        drv.try_call(drv.raw().mem_free, p);
                    } catch (...) {
                    }
                });
                return {reinterpret_cast<void*>(p), std::move(owner)};
            }
            default:
                // ValueError, as every device argument stridex cannot serve (a name it knows, such
                // as 'metal', is still not a place it can put memory).
                fail(ErrorKind::value, "stridex allocates on cpu, cuda:N, cuda_host and cuda_managed, not ",
                     device.name());
        }
    }
};

}  // namespace

bool note_use(const Owner& owner, CUstream stream, int ordinal, const Owner& keep) noexcept {
    return pools::note_device_use(owner, stream, ordinal, keep) || pools::note_pinned_use(owner, stream, ordinal, keep);
}

namespace detail {
void forget_pools(Driver& d) noexcept {
    copy_engine::forget_staging(d);
    // The pageable pool's blocks registered with it stay page-locked until the process ends: the
    // driver (a test's) is going, and must not be called again.
    pools::forget_pageable_registrations(d);
    pools::retire_pools(d);
}
}  // namespace detail

void trim_host_pools() {
    pools::trim_pageable();
    Driver& d = driver();
    if (!d.usable()) return;
    free_cached_pinned(d, pools_of(d).pinned, /*only_completed=*/true);
}

}  // namespace stridex::cuda

namespace stridex {

const Allocator& pool_allocator() noexcept {
    static const cuda::PoolAllocator allocator;
    return allocator;
}

}  // namespace stridex
