// stridex::Pending: work a View's data is ready only after that is no stream of this process.
//
// A View says where its data is ready in two ways: the stream it is ready on (View::stream) and,
// for memory another process wrote, the interprocess event that process recorded (an imported IPC
// View). The core has no CUDA, so it only carries the event, type-erased and shared; the CUDA
// layer implements it (cuda::ipc's opened event) and every consumer door calls it through
// cuda::order(view, consumer) or cuda::synchronize(view) (include/stridex/cuda/stream.hpp), at the
// point of use: nothing waits for it while the View is merely passed around.
#pragma once

#include <cstdint>

#include "stridex/device.hpp"

namespace stridex {

class Pending {
public:
    Pending() = default;
    Pending(const Pending&) = delete;
    Pending& operator=(const Pending&) = delete;
    virtual ~Pending() = default;

    // Makes `consumer` (a stream value other than kNoStream; 1 and 2 mean `device`'s default
    // streams) wait for the work, with no host block. An implementation may skip a stream it knows
    // waited (the work is then ordered before all that stream runs later), but only for streams
    // that cannot be destroyed and their handle reused, such as a device's default streams.
    virtual void order_before(std::intptr_t consumer, Device device) const = 0;
    // Blocks the host until the work is done: host readers only (the CPU touches the memory).
    virtual void synchronize() const = 0;
    // Whether `consumer` of `device` waited for the work, or the host did (which covers every
    // stream): the sanitizer's "used before its producer's event is waited for".
    virtual bool waited_by(std::intptr_t consumer, Device device) const noexcept = 0;
    // Whether any stream of this process, or the host, waited for the work.
    virtual bool waited() const noexcept = 0;
};

}  // namespace stridex
