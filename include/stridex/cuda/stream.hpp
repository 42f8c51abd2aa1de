// Streams, events and the one ordering primitive the protocols need.
//
// Stream values use the protocol encoding (DLPack `stream=`, CAI `stream` key; docs/protocols.md):
// -1 no pending work, 1 the legacy default stream, 2 the per-thread default stream, anything else a
// CUstream handle. 1 and 2 are also the driver's own CU_STREAM_LEGACY and CU_STREAM_PER_THREAD
// handle values, so every encoded value but -1 *is* its handle. 0 is ambiguous (legacy? none?)
// and the protocols forbid it: callers reject it before it gets here, and order() refuses it too.
#pragma once

#include <cstdint>
#include <utility>

#include "stridex/cuda/driver.hpp"
#include "stridex/device.hpp"
#include "stridex/view.hpp"

namespace stridex::cuda {

// The one home of stream values: every encoded constant below, and the conversions to and from a
// driver handle. Code outside speaks of StreamRef::kLegacy, never of a bare 1.
class StreamRef {
public:
    static constexpr std::intptr_t kNone = kNoStream;         // the core's "nothing pending" (view.hpp)
    static constexpr std::intptr_t kLegacy = kDefaultStream;  // 1, the core's default (view.hpp)
    static constexpr std::intptr_t kPerThread = 2;

    constexpr explicit StreamRef(std::intptr_t encoded) noexcept : encoded_(encoded) {}
    static constexpr StreamRef none() noexcept { return StreamRef(kNone); }
    static constexpr StreamRef legacy() noexcept { return StreamRef(kLegacy); }
    static constexpr StreamRef per_thread() noexcept { return StreamRef(kPerThread); }
    // A driver handle: the NULL handle is the legacy default stream, so it becomes 1 (never the
    // forbidden 0), by the core's StreamValue::from_handle (view.hpp), the one home of that rule.
    static StreamRef from_handle(CUstream handle) { return StreamRef(StreamValue::from_handle(handle).encoded()); }

    constexpr std::intptr_t encoded() const noexcept { return encoded_; }
    constexpr bool is_none() const noexcept { return encoded_ == kNone; }
    // The handle to give the driver. Error(value) for -1 (no stream) and 0 (forbidden).
    CUstream handle() const;

    friend constexpr bool operator==(StreamRef, StreamRef) noexcept = default;

private:
    std::intptr_t encoded_;
};

// A stream, owned (created here, destroyed with this object) or borrowed (someone else's handle).
class Stream {
public:
    // A new stream on a device, non-blocking by default: it does not serialise with the legacy
    // default stream, as torch's and CuPy's side streams do not.
    static Stream create(int device, bool non_blocking = true);
    static Stream borrow(StreamRef ref, int device) noexcept { return Stream(ref, device, /*owning=*/false); }

    Stream(Stream&& other) noexcept
        : ref_(std::exchange(other.ref_, StreamRef::none())),
          device_(other.device_),
          owning_(std::exchange(other.owning_, false)) {}
    Stream& operator=(Stream other) noexcept {
        std::swap(ref_, other.ref_);
        std::swap(device_, other.device_);
        std::swap(owning_, other.owning_);
        return *this;
    }
    ~Stream();

    StreamRef ref() const noexcept { return ref_; }
    int device() const noexcept { return device_; }
    bool owning() const noexcept { return owning_; }
    void synchronize() const;  // blocks the host: for users and tests, never used by order()

private:
    Stream(StreamRef ref, int device, bool owning) noexcept : ref_(ref), device_(device), owning_(owning) {}

    StreamRef ref_;
    int device_;
    bool owning_;
};

// An event created with CU_EVENT_DISABLE_TIMING (cheaper to record; stridex never reads times).
class Event {
public:
    explicit Event(int device);
    Event(Event&& other) noexcept : event_(std::exchange(other.event_, nullptr)), device_(other.device_) {}
    Event& operator=(Event other) noexcept {
        std::swap(event_, other.event_);
        std::swap(device_, other.device_);
        return *this;
    }
    ~Event();

    void record(StreamRef stream);
    void wait(StreamRef stream) const;  // `stream` waits for the last record (no host block)
    void synchronize() const;           // blocks the host
    CUevent handle() const noexcept { return event_; }
    int device() const noexcept { return device_; }

private:
    CUevent event_ = nullptr;
    int device_ = 0;
};

// Makes `consumer` wait for everything queued so far on `producer`, on `device` (whose primary
// context the legacy stream means). Nothing happens when `producer` has no pending work (-1), when
// `consumer` opted out (-1) or when the two are the same stream; otherwise one event record on
// `producer` and one cuStreamWaitEvent on `consumer` — never a host-blocking sync. Events come from a per-device
// pool: a wait captures the event's state when it is enqueued, so the event is free for reuse as
// soon as cuStreamWaitEvent returns. Inside a CUDA graph capture the rule of capture.hpp applies:
// one capture -> the same record and wait, captured; a capturing consumer and a producer outside
// -> an external event wait the graph keeps; anything else -> Error(cuda) before enqueuing anything.
void order(StreamRef producer, StreamRef consumer, Device device);

// The doors by which a consumer takes a View: all its pending work, its stream and the work it
// carries as a Pending (an imported IPC View's event; stridex/pending.hpp), ordered before the
// consumer at the point of use, never earlier (docs/distributed.md, "Ordering").
//
// `consumer` (of the View's device) waits for all of it; nothing when `consumer` is kNone (the
// consumer said it takes care of ordering) or the memory is no CUDA memory. No host block.
void order(const View& view, StreamRef consumer);
// For consumers that read only a stream value (the CUDA array interface's `stream`, the caster API's
// and C API's descriptions): the View's stream, or the legacy default stream when it has none but
// carries a Pending, which that stream then waits for now; kNone when nothing is pending.
StreamRef ready_stream(const View& view);
// Blocks the host until all of `view`'s pending work is done: only before the CPU itself touches
// the memory (host copies, the array interface, the buffer protocol).
void wait_on_host(const View& view);

}  // namespace stridex::cuda
