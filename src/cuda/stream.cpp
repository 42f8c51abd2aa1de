// Stream and Event RAII, and order(): a consumer stream waits for a producer stream with an event.
#include "stridex/cuda/stream.hpp"

#include "stridex/cuda/capture.hpp"

namespace stridex::cuda {

CUstream StreamRef::handle() const {
    if (encoded_ == kNone) fail(ErrorKind::value, "stream -1 means \"no stream\" and has no handle");
    if (encoded_ == 0)
        fail(ErrorKind::value,
             "stream 0 is forbidden by the protocols (ambiguous); use 1 for the legacy default stream");
    return reinterpret_cast<CUstream>(encoded_);
}

Stream Stream::create(int device, bool non_blocking) {
    Driver& d = driver();
    const ContextGuard guard(d, device);
    CUstream s = nullptr;
    d.call("cuStreamCreate", d.api().stream_create, &s, non_blocking ? cu::kStreamNonBlocking : 0u);
    return Stream(StreamRef::from_handle(s), device, /*owning=*/true);
}

Stream::~Stream() {
    if (!owning_) return;
    try {
        Driver& d = driver();
        // Destroying a stream with pending work is legal: the driver finishes it, then frees.
        d.try_call(d.raw().stream_destroy, ref_.handle());
    } catch (...) {  // no usable driver left (exit): nothing to free
    }
}

void Stream::synchronize() const {
    Driver& d = driver();
    const ContextGuard guard(d, device_);
    d.call("cuStreamSynchronize", d.api().stream_synchronize, ref_.handle());
}

Event::Event(int device) : device_(device) {
    Driver& d = driver();
    const ContextGuard guard(d, device);
    d.call("cuEventCreate", d.api().event_create, &event_, cu::kEventDisableTiming);
}

Event::~Event() {
    if (!event_) return;
    try {
        Driver& d = driver();
        d.try_call(d.raw().event_destroy, event_);
    } catch (...) {
    }
}

void Event::record(StreamRef stream) {
    Driver& d = driver();
    const ContextGuard guard(d, device_);  // the legacy stream is per context
    d.call("cuEventRecord", d.api().event_record, event_, stream.handle());
}

void Event::wait(StreamRef stream) const {
    Driver& d = driver();
    const ContextGuard guard(d, device_);
    d.call("cuStreamWaitEvent", d.api().stream_wait_event, stream.handle(), event_, 0u);
}

void Event::synchronize() const {
    Driver& d = driver();
    d.call("cuEventSynchronize", d.api().event_synchronize, event_);
}

void order(StreamRef producer, StreamRef consumer, Device device) {
    // The cheap cases first: they need no driver at all (CPU-only processes call this too).
    if (producer.is_none() || consumer.is_none() || producer == consumer) return;
    if (producer.encoded() == 0 || consumer.encoded() == 0) (void)StreamRef(0).handle();  // throws
    if (!device.is_cuda_family()) fail(ErrorKind::value, "stream ordering needs a CUDA device, found ", device.name());

    Driver& d = driver();
    const ContextGuard guard(d, device.id);
    // Inside a CUDA graph capture only some orderings exist (capture.hpp has the rule).
    const Capture into = capture_of(consumer, device.id), from = capture_of(producer, device.id);
    if (into.status == CaptureStatus::implicit)
        refuse_in_capture("stream ordering", consumer, into,
                          "the legacy default stream cannot take part in a capture; use the capturing stream");
    if (from.status == CaptureStatus::implicit)
        refuse_in_capture("stream ordering", producer, from,
                          "the legacy default stream cannot take part in a capture; use the capturing stream");
    if (into.active() && !from.active()) {
        wait_across_capture(producer, consumer, into, device.id);
        return;
    }
    if (from.active() && !into.active())
        refuse_in_capture("stream ordering", producer, from,
                          "work captured into a graph runs only when the graph is launched, so " +
                              describe_capture(consumer, into) + " (not in that capture) cannot wait for it");
    if (from.active() && into.id != from.id)
        refuse_in_capture("stream ordering", consumer, into,
                          "it cannot wait for " + describe_capture(producer, from) + ": two captures cannot be joined");
    const CUevent event = d.acquire_event(device.id);
    struct Return {  // back to the pool on every path, including a failed record or wait
        Driver& d;
        int ordinal;
        CUevent event;
        ~Return() { d.release_event(ordinal, event); }
    } give_back{d, device.id, event};
    d.call("cuEventRecord", d.api().event_record, event, producer.handle());
    d.call("cuStreamWaitEvent", d.api().stream_wait_event, consumer.handle(), event, 0u);
}

// ---- a View's pending work, at the point of use --------------------------------------------------

void order(const View& view, StreamRef consumer) {
    if (consumer.is_none() || !view.device().is_cuda_family()) return;
    if (const auto& pending = view.pending()) pending->order_before(consumer.encoded(), view.device());
    order(StreamRef(view.stream()), consumer, view.device());
}

StreamRef ready_stream(const View& view) {
    const StreamRef stream(view.stream());
    if (!view.pending() || !view.device().is_cuda_family()) return stream;
    const StreamRef on = stream.is_none() ? StreamRef::legacy() : stream;
    view.pending()->order_before(on.encoded(), view.device());
    return on;
}

void wait_on_host(const View& view) {
    if (!view.device().is_cuda_family()) return;
    if (const auto& pending = view.pending()) pending->synchronize();
    if (view.stream() == kNoStream) return;
    // Pinned memory (cuda_host) names no GPU: its streams are device 0's.
    const int ordinal = view.device().type == DeviceType::kCUDA ? view.device().id : 0;
    Stream::borrow(StreamRef(view.stream()), ordinal).synchronize();
}

}  // namespace stridex::cuda
