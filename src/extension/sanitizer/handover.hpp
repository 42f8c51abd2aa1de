// A hand-over: memory handed from one side to another at one of stridex's doors (an import, an
// export, the DLPack exchange API, a copy, an import from another process). Each door builds one
// `Handover` record, once, and gives it to those who observe hand-overs:
//
//   the sanitizer (sanitizer.hpp)   while it is on: the happens-before log and its reports
//   stridex's pool (below)          frees the memory only after the consumer's stream's work
//
// The pool is told when memory is handed to a consumer's stream it was told about (docs/memory.md,
// "The stream contract of allocation and release"), whichever owner keeps the memory alive. A
// producer whose allocator takes streams (its row's records_streams: torch) is told them when
// stridex's last reference to the memory goes (watch_streams), for the streams whose lifetime
// stridex knows (a stream object the caller passed, kept until then; the per-thread default
// stream). The other allocators take no stream (CuPy's pool, raw pointers), and a stream named by
// a bare handle may be gone by then: the sanitizer's reports are the answer there.
#pragma once

#include <Python.h>

#include <cstdint>

#include "common/enum_set.hpp"
#include "stridex/view.hpp"

namespace stridex::python {

// What a hand-over is, besides its streams.
enum class HandoverFlag : std::uint8_t {
    imported,        // a producer hands its memory over (stridex.view, the casters); otherwise an
                     // existing View is handed to a consumer (an export, a copy, a host read)
    no_sync,         // the consumer asked for no ordering (stridex.NO_SYNC, stream=-1)
    ignores_stream,  // the producer's row: it orders nothing for the consumer's stream
    of_view,         // a stridex.View imported again
    from_process,    // a View imported from another process (stridex.ipc) ...
    with_event,      // ... whose exporter sent its event
};
using HandoverFlags = EnumSet<HandoverFlag, std::uint8_t>;

struct Handover {
    const View& view;
    // The producer's object; for an existing View or one imported again, its owner object. May be
    // null or None.
    PyObject* owner;
    // The stream the producer's work is on (kNoStream: none known). An import records it only while
    // the sanitizer is on (import.cpp): nothing else reads it.
    std::intptr_t producer_stream;
    // The consumer's stream, where the memory is used next; kNoStream: none (no ordering asked, or
    // a host reader).
    std::intptr_t consumer_stream;
    const char* door;  // the entry point, in the words of reports: "stridex.view", "View.__dlpack__" ...
    HandoverFlags flags;
    // The stream object the caller passed for the consumer's stream (borrowed, for the call), or
    // nullptr where only a handle was given (the DLPack protocol's ints).
    PyObject* stream_object = nullptr;
};

// `view` is handed to work on `consumer` (an encoded stream; kNoStream names none: nothing to
// tell). `stream_object` is the stream object the caller passed (borrowed), or nullptr where only
// a handle was given: it is kept alive until the release that orders after it (stridex's pool
// orders after a bare handle too: the caller keeps that stream alive while the memory lives).
// Host memory has nothing to tell either.
void handed_to_stream(const View& view, PyObject* stream_object, std::intptr_t consumer) noexcept;
inline void handed_to_stream(const Handover& h) noexcept {
    handed_to_stream(h.view, h.stream_object, h.consumer_stream);
}

// For an import of `array` whose producer's allocator takes streams: wraps the View's owner so that
// its release (stridex's last reference to the memory) makes a private stream of the framework's
// wait for every stream the View was handed to and records that stream with the allocator
// (torch: Tensor.record_stream). Host memory is left as it is.
void watch_streams(View& view, PyObject* array);

// Whether the allocator of the memory `view` holds will be told of the stream it was imported for
// (`view.stream()`) when stridex's last reference goes: the sanitizer reports no release then.
bool allocator_told(const View& view) noexcept;

}  // namespace stridex::python
