// What stridex tells its pool when it hands memory to a consumer's stream (docs/memory.md, "The
// stream contract of allocation and release").
//
// Every door that hands a View to a stream it was told about (an import for a stream, an export
// with a stream, the DLPack exchange API, a copy's source and destination) calls handed_to_stream
// once, beside the sanitizer's hook: stridex's pool then frees the memory only after that stream's
// work, whichever owner keeps it alive. Other allocators are not told: torch's record_stream would
// make torch record an event on the consumer's stream when the tensor is freed, which crashes once
// that stream is destroyed (a CuPy stream handed a torch tensor, seen on an H200); for them the
// sanitizer's reports are the answer.
#pragma once

#include <cstdint>

#include "stridex/view.hpp"

namespace stridex::python {

// `view` is handed to work on `consumer` (an encoded stream; kNoStream names none: nothing to
// tell). Only GPU memory of stridex's pool is concerned; anything else is left as it is.
void handed_to_stream(const View& view, std::intptr_t consumer) noexcept;

}  // namespace stridex::python
