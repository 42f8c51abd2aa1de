// What stridex tells allocators when it hands memory to a consumer's stream (docs/memory.md, "The
// stream contract of allocation and release").
//
// Every door that hands a View to a stream it was told about (an import for a stream, an export
// with a stream, the DLPack exchange API, a copy's source and destination) calls handed_to_stream
// once, beside the sanitizer's hook: stridex's pool then frees the memory only after that stream's
// work, and a producer whose allocator takes streams (its row's records_streams: torch) is told
// them when stridex's last reference to the memory goes (watch_streams), for the streams whose
// lifetime stridex knows (a stream object the caller passed, kept until then; the per-thread
// default stream). The other allocators take no stream (CuPy's pool, raw pointers), and a stream
// named by a bare handle may be gone by then: the sanitizer's reports are the answer there.
#pragma once

#include <Python.h>

#include <cstdint>

#include "stridex/view.hpp"

namespace stridex::python {

// `view` is handed to work on `consumer` (an encoded stream; kNoStream names none: nothing to
// tell). `stream_object` is the stream object the caller passed (borrowed), or nullptr where only
// a handle was given: it is kept alive until the release that orders after it (stridex's pool
// orders after a bare handle too: the caller keeps that stream alive while the memory lives).
// Host memory has nothing to tell either.
void handed_to_stream(const View& view, PyObject* stream_object, std::intptr_t consumer);

// For an import of `array` whose producer's allocator takes streams: wraps the View's owner so that
// its release (stridex's last reference to the memory) makes a private stream of the framework's
// wait for every stream the View was handed to and records that stream with the allocator
// (torch: Tensor.record_stream). Host memory is left as it is.
void watch_streams(View& view, PyObject* array);

// Whether the allocator of the memory `view` holds will be told of the stream it was imported for
// (`view.stream()`) when stridex's last reference goes: the sanitizer reports no release then.
bool allocator_told(const View& view) noexcept;

}  // namespace stridex::python
