// The hand-over race sanitizer (docs/sanitizer.md): while on, every hand-over stridex mediates is
// logged per memory range, and four kinds of stream race are reported as stridex.StreamRaceWarning
// (or raised as stridex.StreamRaceError):
//
//   no_sync              a hand-over with no ordering (NO_SYNC, or a producer that ignores the
//                        consumer's stream) while the producer's stream still has pending work
//   reuse_after_release  memory handed over again from another owner after the earlier owner died,
//                        while the earlier consumer's stream may still be reading it
//   release_pending      a View released, taking the last reference to its owner, while work queued
//                        on its (consumer's) stream may still use the memory, with no event given
//                        to the producer's allocator
//   ipc_unwaited         an IPC View used without ordering before its producer's event is waited for
//
// Off, each hook costs one relaxed atomic load at the call site (`on()` is inline): callers write
// `if (sanitizer::on()) sanitizer::...(...)`. Every hook runs with the GIL held. "May still be
// running" is a host query (cuStreamQuery), never a wait. The sanitizer only observes: each door
// gives it the record it built of its hand-over (handover.hpp), and it asks no producer anything.
#pragma once

#include <nanobind/nanobind.h>

#include <atomic>
#include <cstdint>

#include "sanitizer/handover.hpp"
#include "stridex/view.hpp"

namespace stridex::python::sanitizer {

namespace detail {
inline std::atomic<bool> g_on{false};
}  // namespace detail

// Whether the sanitizer is on (STRIDEX_SANITIZE=streams, or inside stridex.sanitize()).
inline bool on() noexcept { return detail::g_on.load(std::memory_order_relaxed); }

// A hand-over at one of stridex's doors (handover.hpp): logged, and checked for the races above.
// Throws nb::python_error in raise mode.
void observe(const Handover& handover);

// A stridex.View object is being destroyed; `source` is its owner object (may be empty or None).
// Releases both itself (so it can tell whether the owner died with the View): the caller's
// members are empty afterwards. Never throws: a report here is a warning even in raise mode (an
// exception there would be unraisable).
void released(View& view, nanobind::object& source) noexcept;

// A stream object the caller passed (stridex.view(stream=...), stridex.copy, ...) and its handle:
// the sanitizer holds the object while its log names the handle, so the handle may be queried
// after the call that passed it (a stream handle outliving its stream is not safe to query;
// streams known no other way are queried only within the hand-over that names them).
void stream_object_seen(PyObject* object, std::intptr_t handle) noexcept;

// stridex._stridex._sanitizer_* and StreamRaceWarning / StreamRaceError; reads STRIDEX_SANITIZE.
void bind_sanitizer(nanobind::module_& m);

}  // namespace stridex::python::sanitizer
