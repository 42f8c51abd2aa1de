// What stridex tells allocators when it hands memory to a consumer's stream (docs/memory.md, "The
// stream contract of allocation and release").
//
// Every door that hands a View to a stream it was told about (an import for a stream, an export
// with a stream, the DLPack exchange API, a copy's source) calls handed_to_stream once, beside the
// sanitizer's hook: stridex's pool then frees the memory only after that stream's work, and a
// producer whose row says its allocator takes streams safely (records_streams, producers.hpp) is
// told the stream too (through a record_stream method). No row does today: torch's would crash
// once the consumer's stream is destroyed. For the others the sanitizer's reports are the answer.
#pragma once

#include <Python.h>

#include <cstdint>

#include "stridex/view.hpp"

namespace stridex::python {

// `view`, whose owner object is `source` (may be null or None), is handed to work on `consumer` (an
// encoded stream; kNoStream names none: nothing to tell). Host memory has nothing to tell either.
// Throws nb::python_error when the producer's allocator refused the stream.
void handed_to_stream(const View& view, PyObject* source, std::intptr_t consumer);

// Whether the allocator of `source`'s framework is told the streams its arrays are handed to (its
// producer row's records_streams). The sanitizer reports no release of such memory.
bool allocator_takes_streams(PyObject* source);

// Drops the stream objects kept for torch (atexit: teardown sees every object released).
void forget_handover_streams() noexcept;

}  // namespace stridex::python
