// A test producer of DLPack tensors: builds managed tensors over a caller's buffer and counts
// how often their deleters run.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "stridex/dlpack.hpp"

namespace stridex::testing {

struct DeleterCount {
    std::atomic<int> calls{0};
};

template <class Managed>
struct ProducedTensor {
    Managed managed{};
    std::vector<std::int64_t> shape, strides;
    DeleterCount* count = nullptr;
};

template <class Managed>
void count_and_free(Managed* managed) {
    auto* produced = static_cast<ProducedTensor<Managed>*>(managed->manager_ctx);
    produced->count->calls.fetch_add(1);
    delete produced;
}

inline constexpr int kNdimFromShape = -1000;

// strides empty -> NULL strides pointer; shape empty with ndim > 0 -> NULL shape pointer.
template <class Managed>
Managed* produce(void* data, std::vector<std::int64_t> shape, std::vector<std::int64_t> strides, DeleterCount& count,
                 dlpack::DLDataType dtype = {2, 32, 1}, dlpack::DLDevice device = {1, 0}, int ndim = kNdimFromShape) {
    auto* p = new ProducedTensor<Managed>();
    p->shape = std::move(shape);
    p->strides = std::move(strides);
    p->count = &count;
    dlpack::DLTensor& t = p->managed.dl_tensor;
    t.data = data;
    t.device = device;
    t.ndim = ndim != kNdimFromShape ? ndim : static_cast<std::int32_t>(p->shape.size());
    t.dtype = dtype;
    t.shape = p->shape.empty() ? nullptr : p->shape.data();
    t.strides = p->strides.empty() ? nullptr : p->strides.data();
    t.byte_offset = 0;
    p->managed.manager_ctx = p;
    p->managed.deleter = &count_and_free<Managed>;
    if constexpr (std::is_same_v<Managed, dlpack::DLManagedTensorVersioned>) p->managed.version = {1, 3};
    return &p->managed;
}

}  // namespace stridex::testing
