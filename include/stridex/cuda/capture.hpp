// CUDA graph capture: the one query of a stream's capture state and the rules stridex follows on a
// capturing stream (docs/graphs.md).
//
//   - No host synchronization, query or host wait on a capturing stream, and no work on a stream
//     outside the capture that the capture would have to wait for: such work is refused with
//     Error(cuda) *before* anything is enqueued, so the capture stays valid (refuse_in_capture).
//   - The legacy default stream cannot take part in a capture. While a blocking stream of its
//     context captures, the driver reports it as implicitly captured (CaptureStatus::implicit) and
//     stridex refuses to use it.
//   - Orderings (order(), stream.hpp): both streams in one capture -> an ordinary captured record
//     and wait; a capturing consumer and a producer outside the capture -> the producer's work so
//     far is recorded (eagerly) in an event of its own that the graph waits on as an external event
//     (CU_EVENT_WAIT_EXTERNAL): the first replay then runs after that work, and the event lives as
//     long as the graph; a consumer outside the capture waiting for a capturing producer, or two
//     different captures -> refused (captured work runs only when a graph is launched).
//   - Lifetime: what captured work reads or writes stays alive as long as the graph
//     (keep_alive_in_capture: a user object retained by the capture's graph).
#pragma once

#include <string>
#include <string_view>

#include "stridex/cuda/stream.hpp"
#include "stridex/owner.hpp"

namespace stridex::cuda {

enum class CaptureStatus : unsigned char {
    none,         // not capturing
    active,       // capturing into `graph`
    invalidated,  // a capture that already failed: the driver answers every call with its error
    implicit,     // the legacy default stream while a blocking stream of its context captures
};

struct Capture {
    CaptureStatus status = CaptureStatus::none;
    unsigned long long id = 0;  // unique per capture sequence
    CUgraph graph = nullptr;    // the graph being captured into (active only)

    bool active() const noexcept { return status == CaptureStatus::active; }
    // Any state in which stridex must not treat the stream as an ordinary one.
    bool capturing() const noexcept { return status != CaptureStatus::none; }
};

// The capture state of `stream`, on device `ordinal` (whose primary context the legacy and
// per-thread streams mean). kNone is never capturing. A driver without the query (older than
// CUDA 11.3) has no captures stridex could join: none. Never blocks.
Capture capture_of(StreamRef stream, int ordinal);

// "stream 0x7f.. (capturing a CUDA graph)" / "the legacy default stream": the words every capture
// error uses for a stream.
std::string describe_capture(StreamRef stream, const Capture& capture);

// Error(cuda) "<operation> cannot run inside a CUDA graph capture: <why>; <stream> is capturing
// ... Nothing was enqueued: the capture is still valid." Callers refuse before enqueuing anything.
[[noreturn]] void refuse_in_capture(std::string_view operation, StreamRef stream, const Capture& capture,
                                    std::string_view why);

// Keeps `owner` alive until the graph `capture` captures into is destroyed (a user object the
// graph retains). Nothing happens when `capture` is not active or `owner` is empty. The graph's
// release runs on a driver thread, which may call neither CUDA nor (without the GIL) Python: it
// only queues the Owner, which drain_graph_releases() drops later, on a thread of the caller.
void keep_alive_in_capture(const Capture& capture, Owner owner);

// The ordering across a capture's boundary (order(), above): `consumer` captures (`capture`),
// `producer` does not. Records the producer's pending work in a fresh event (eager: not part of the
// graph) and makes the graph wait on it as an external event; the event is destroyed after the
// graph is. The context of `ordinal` must be current.
void wait_across_capture(StreamRef producer, StreamRef consumer, const Capture& capture, int ordinal);

// Drops every Owner (and destroys every event) released by graphs since the last drain. Called by
// keep_alive_in_capture and order() on the way, and by the notifier below. Never throws.
void drain_graph_releases() noexcept;
// How many releases wait for a drain (tests).
std::size_t pending_graph_releases() noexcept;
// Called (from the driver's thread, holding no lock, no GIL) each time a graph releases something,
// so that a host with a safe place to drain (the Python extension: a pending call under the GIL)
// drains promptly. nullptr: drains happen only on the next capture-time call.
void set_graph_release_notifier(void (*notify)() noexcept) noexcept;

}  // namespace stridex::cuda
