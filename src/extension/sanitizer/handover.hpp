// A hand-over: memory handed from one side to another at one of stridex's doors (an import, an
// export, the DLPack exchange API, a copy, an import from another process). Each door builds one
// `Handover` record, once, and gives it to those who observe hand-overs:
//
//   the sanitizer (sanitizer.hpp)   while it is on: the happens-before log and its reports
//   stridex's pool (below)          frees the memory only after the consumer's stream's work
//
// The pool is told when memory is handed to a consumer's stream it was told about (docs/memory.md,
// "The stream contract of allocation and release"), whichever owner keeps the memory alive. Other
// allocators are not told: torch's record_stream would make torch record an event on the
// consumer's stream when the tensor is freed, which crashes once that stream is destroyed (a CuPy
// stream handed a torch tensor, seen on an H200); for them the sanitizer's reports are the answer.
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
};

// `view` is handed to work on `consumer` (an encoded stream; kNoStream names none: nothing to
// tell). Only GPU memory of stridex's pool is concerned; anything else is left as it is.
void handed_to_stream(const View& view, std::intptr_t consumer) noexcept;
inline void handed_to_stream(const Handover& h) noexcept { handed_to_stream(h.view, h.consumer_stream); }

}  // namespace stridex::python
