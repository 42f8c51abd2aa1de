// What a hand-over tells stridex's pool (handover.hpp).
#include "sanitizer/handover.hpp"

#include "stridex/cuda/memory.hpp"
#include "stridex/cuda/stream.hpp"

namespace stridex::python {

void handed_to_stream(const View& view, std::intptr_t consumer) noexcept {
    if (consumer == kNoStream || view.device().type != DeviceType::kCUDA || view.size() == 0) return;
    const int device = view.device().id;
    const cuda::CUstream handle = cuda::StreamRef(consumer).handle();
    // stridex's own memory: by its owner, else by address (a torch tensor made from a pool View).
    if (!cuda::note_use(view.owner(), handle, device)) cuda::note_use_at(view.ptr(), handle, device);
}

}  // namespace stridex::python
