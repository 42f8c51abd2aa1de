// CUDA graph capture: the capture query, the refusal's words, and what graphs keep alive.
#include "stridex/cuda/capture.hpp"

#include "stridex/cuda/memory.hpp"

#include <atomic>
#include <cstdio>
#include <mutex>
#include <utility>
#include <vector>

namespace stridex::cuda {
namespace {

// CUstreamCaptureStatus, CUresult and flag values (cuda.h names in comments).
constexpr int kCaptureStatusNone = 0;                // CU_STREAM_CAPTURE_STATUS_NONE
constexpr int kCaptureStatusActive = 1;              // CU_STREAM_CAPTURE_STATUS_ACTIVE
constexpr CUresult kCaptureImplicit = 906;           // CUDA_ERROR_STREAM_CAPTURE_IMPLICIT
constexpr unsigned kUserObjectNoDestructorSync = 1;  // CU_USER_OBJECT_NO_DESTRUCTOR_SYNC (required)
constexpr unsigned kGraphUserObjectMove = 1;         // CU_GRAPH_USER_OBJECT_MOVE
constexpr unsigned kEventWaitExternal = 1;           // CU_EVENT_WAIT_EXTERNAL

// What a graph keeps alive: an Owner, or an event of the external wait (destroyed in the context
// of `ordinal` when the graph goes).
struct Kept {
    Owner owner;
    CUevent event = nullptr;
    int ordinal = 0;
};

// Releases the graphs handed back, waiting for a thread that may call CUDA and drop Owners. Never
// destroyed: a graph destroyed during exit (a framework's, after static destructors ran) still
// releases its user objects into them, on the driver's thread.
std::mutex& released_mutex() {
    static auto* m = new std::mutex();
    return *m;
}
std::vector<Kept*>& released_list() {
    static auto* list = new std::vector<Kept*>();
    return *list;
}
std::atomic<void (*)() noexcept> g_notify{nullptr};

// The user object's destructor: runs on a driver thread, must not call CUDA and must not block on
// anything a CUDA call may hold. A lock held for a push_back only, then the notifier.
void on_graph_release(void* p) {
    try {
        const std::lock_guard lock(released_mutex());
        released_list().push_back(static_cast<Kept*>(p));
    } catch (...) {  // out of memory: leak the Owner rather than drop it on this thread
        return;
    }
    if (auto notify = g_notify.load(std::memory_order_acquire)) notify();
}

// Hands `kept` to the graph of `capture`: a user object whose only reference moves to the graph.
void retain_in_graph(const Capture& capture, Kept* kept) {
    Driver& d = driver();
    CUuserObject object = nullptr;
    try {
        d.call("cuUserObjectCreate", d.api().user_object_create, &object, static_cast<void*>(kept), &on_graph_release,
               1u, kUserObjectNoDestructorSync);
    } catch (...) {
        on_graph_release(kept);  // the next drain drops it (and destroys its event) on a safe thread
        throw;
    }
    // From here the user object owns `kept`: a failed retain releases it (the destructor queues it).
    const CUresult r = d.api().graph_retain_user_object
                           ? d.api().graph_retain_user_object(capture.graph, object, 1u, kGraphUserObjectMove)
                           : result::not_found;
    if (r != result::success) {
        d.try_call(d.raw().user_object_release, object, 1u);
        d.fail_call("cuGraphRetainUserObject", r);
    }
}

}  // namespace

Capture capture_of(StreamRef stream, int ordinal) {
    if (stream.is_none()) return {};
    Driver& d = driver();
    if (!d.usable() || !d.api().stream_get_capture_info) return {};
    const ContextGuard guard(d, ordinal);  // the legacy and per-thread streams are the context's
    int status = kCaptureStatusNone;
    Capture out;
    const CUresult r = d.api().stream_get_capture_info(stream.handle(), &status, &out.id, &out.graph, nullptr, nullptr);
    if (r == kCaptureImplicit) {  // the legacy stream; the blocking stream's capture is not harmed
        out.status = CaptureStatus::implicit;
        return out;
    }
    if (r != result::success) d.fail_call("cuStreamGetCaptureInfo", r);
    out.status = status == kCaptureStatusNone     ? CaptureStatus::none
                 : status == kCaptureStatusActive ? CaptureStatus::active
                                                  : CaptureStatus::invalidated;
    if (!out.active()) out.graph = nullptr;
    return out;
}

std::string describe_capture(StreamRef stream, const Capture& capture) {
    std::string name = stream == StreamRef::legacy() ? "the legacy default stream"
                       : stream == StreamRef::per_thread()
                           ? "the per-thread default stream"
                           : "stream " + hex(static_cast<std::uint64_t>(stream.encoded()));
    switch (capture.status) {
        case CaptureStatus::none: return name;
        case CaptureStatus::active: return name + " (capturing CUDA graph capture " + std::to_string(capture.id) + ")";
        case CaptureStatus::invalidated: return name + " (in a CUDA graph capture that is already invalidated)";
        case CaptureStatus::implicit:
            return name + " (implicitly part of a CUDA graph capture: a blocking stream of its context is capturing)";
    }
    return name;
}

void refuse_in_capture(std::string_view operation, StreamRef stream, const Capture& capture, std::string_view why) {
    fail(ErrorKind::cuda, operation, " cannot run inside a CUDA graph capture: ", why, "; ",
         describe_capture(stream, capture), ". Nothing was enqueued: the capture is still valid");
}

void keep_alive_in_capture(const Capture& capture, Owner owner) {
    if (!capture.active() || !owner) return;                  // the common case: not capturing, no lock taken
    if (detail::owned_by_capture(owner, capture.id)) return;  // the graph's own memory (memory.hpp)
    drain_graph_releases();
    retain_in_graph(capture, new Kept{std::move(owner)});
}

void wait_across_capture(StreamRef producer, StreamRef consumer, const Capture& capture, int ordinal) {
    drain_graph_releases();
    Driver& d = driver();
    // A fresh event, never a pooled one: the graph's wait node waits on the event's latest record at
    // every replay, so nothing else may ever record it. The graph owns it before it is used, so
    // that no path leaves a wait node on a destroyed event.
    CUevent event = nullptr;
    d.call("cuEventCreate", d.api().event_create, &event, cu::kEventDisableTiming);
    retain_in_graph(capture, new Kept{Owner{}, event, ordinal});
    d.call("cuEventRecord", d.api().event_record, event, producer.handle());
    d.call("cuStreamWaitEvent", d.api().stream_wait_event, consumer.handle(), event, kEventWaitExternal);
}

void drain_graph_releases() noexcept {
    std::vector<Kept*> released;
    {
        const std::lock_guard lock(released_mutex());
        released.swap(released_list());
    }
    for (Kept* kept : released) {
        if (kept->event) {
            try {
                Driver& d = driver();
                const ContextGuard guard(d, kept->ordinal);
                d.try_call(d.raw().event_destroy, kept->event);
            } catch (...) {  // the driver is gone (exit): nothing left to destroy
            }
        }
        delete kept;  // drops the Owner on this thread
    }
}

std::size_t pending_graph_releases() noexcept {
    const std::lock_guard lock(released_mutex());
    return released_list().size();
}

void set_graph_release_notifier(void (*notify)() noexcept) noexcept {
    g_notify.store(notify, std::memory_order_release);
}

}  // namespace stridex::cuda
