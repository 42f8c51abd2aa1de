// The interprocess event of an imported IPC View, waited for at the point of use (ipc_event.hpp).
//
// Why not at import: a wait enqueued when the View is unpickled has to go on some stream before
// anyone knows the consumer's, and the legacy default stream it used to go on then holds every
// later legacy-stream user of the process (and, under CUDA's lazy module loading, the host) behind
// the exporter's pending work. Carried as the View's Pending instead, it is waited for by the
// stream that reads the data, when it reads it.
#include "ipc_event.hpp"

#include "side_stream.hpp"

#include <algorithm>
#include <mutex>
#include <utility>
#include <vector>

#include "stridex/cuda/capture.hpp"
#include "stridex/cuda/stream.hpp"

namespace stridex::cuda::ipc {

namespace {

class IpcEvent final : public Pending {
public:
    IpcEvent(Driver& d, CUevent event, int ordinal) noexcept : d_(d), event_(event), ordinal_(ordinal) {}
    ~IpcEvent() override {
        try {
            const ContextGuard guard(d_, ordinal_);
            d_.try_call(d_.raw().event_destroy, event_);
        } catch (...) {  // the driver is gone (exit): it destroyed every event itself
        }
    }

    void order_before(std::intptr_t consumer, Device device) const override {
        const Waiter waiter{consumer, on(device)};
        // Only the default streams are remembered: they live as long as their context, while a
        // stream handle may be destroyed and its value reused by a new stream that never waited. A
        // second wait of another stream costs one cuStreamWaitEvent and nothing on the GPU.
        const bool remembered = consumer == StreamRef::kLegacy || consumer == StreamRef::kPerThread;
        {
            const std::lock_guard lock(mutex_);
            if (done_ || (remembered && std::find(waiters_.begin(), waiters_.end(), waiter) != waiters_.end())) return;
        }
        const CUstream stream = StreamRef(consumer).handle();  // Error(value) for -1 and 0
        if (const Capture capture = capture_of(StreamRef(consumer), waiter.ordinal); capture.capturing()) {
            if (!capture.active())
                refuse_in_capture("waiting for an IPC View's producer", StreamRef(consumer), capture,
                                  "the stream is not capturing into a graph stridex can join");
            // Not the exporter's event as a graph node: a replay after the exporter destroyed it
            // would be undefined. A private stream waits for it now, and the graph waits for that
            // stream's work like any producer's outside the capture (capture.hpp). Not remembered:
            // every capture needs its own external event.
            const ContextGuard guard(d_, waiter.ordinal);
            const StreamRef side = side_stream(waiter.ordinal);
            d_.call("cuStreamWaitEvent", d_.api().stream_wait_event, side.handle(), event_, 0u);
            wait_across_capture(side, StreamRef(consumer), capture, waiter.ordinal);
            return;
        }
        {
            // The legacy and per-thread streams are the consumer device's context's; an event may be
            // waited for in another device's context (cuStreamWaitEvent takes events across devices).
            const ContextGuard guard(d_, waiter.ordinal);
            d_.call("cuStreamWaitEvent", d_.api().stream_wait_event, stream, event_, 0u);
        }
        const std::lock_guard lock(mutex_);
        if (std::find(waiters_.begin(), waiters_.end(), waiter) == waiters_.end()) waiters_.push_back(waiter);
    }

    void synchronize() const override {
        {
            const std::lock_guard lock(mutex_);
            if (done_) return;
        }
        {
            const ContextGuard guard(d_, ordinal_);
            d_.call("cuEventSynchronize", d_.api().event_synchronize, event_);
        }
        const std::lock_guard lock(mutex_);
        done_ = true;
    }

    bool waited_by(std::intptr_t consumer, Device device) const noexcept override {
        const std::lock_guard lock(mutex_);
        return done_ || std::find(waiters_.begin(), waiters_.end(), Waiter{consumer, on(device)}) != waiters_.end();
    }

    bool waited() const noexcept override {
        const std::lock_guard lock(mutex_);
        return done_ || !waiters_.empty();
    }

private:
    struct Waiter {
        std::intptr_t stream;
        int ordinal;
        friend bool operator==(const Waiter&, const Waiter&) = default;
    };
    // The GPU whose context a consumer's default streams belong to (pinned and managed memory name
    // none: the event's own).
    int on(Device device) const noexcept { return device.type == DeviceType::kCUDA ? device.id : ordinal_; }

    Driver& d_;
    CUevent event_;
    int ordinal_;
    mutable std::mutex mutex_;
    mutable std::vector<Waiter> waiters_;  // a few streams at most: a vector beats a set
    mutable bool done_ = false;            // the host waited: nothing is pending any more
};

}  // namespace

std::shared_ptr<const Pending> open_event(Driver& d, const IpcHandle& handle, int ordinal) {
    const ContextGuard guard(d, ordinal);
    CUevent event = nullptr;
    d.call("cuIpcOpenEventHandle", d.api().ipc_open_event_handle, &event, handle);
    try {
        return std::make_shared<const IpcEvent>(d, event, ordinal);
    } catch (...) {
        d.try_call(d.raw().event_destroy, event);
        throw;
    }
}

std::shared_ptr<const Pending> relay_event(Driver& d, const IpcHandle& handle, int ordinal) {
    const ContextGuard guard(d, ordinal);
    const StreamRef side = side_stream(ordinal);
    CUevent opened = nullptr;
    d.call("cuIpcOpenEventHandle", d.api().ipc_open_event_handle, &opened, handle);
    // The wait captures the exporter's event as it is now: the opened event may go at once.
    const CUresult waited = d.raw().stream_wait_event(side.handle(), opened, 0u);
    d.try_call(d.raw().event_destroy, opened);
    if (waited != result::success) d.fail_call("cuStreamWaitEvent", waited);
    CUevent own = nullptr;
    d.call("cuEventCreate", d.api().event_create, &own, cu::kEventDisableTiming);
    try {
        d.call("cuEventRecord", d.api().event_record, own, side.handle());
        return std::make_shared<const IpcEvent>(d, own, ordinal);
    } catch (...) {
        d.try_call(d.raw().event_destroy, own);
        throw;
    }
}

}  // namespace stridex::cuda::ipc
