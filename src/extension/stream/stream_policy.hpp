// The stream contract of stridex.view(obj, stream=...) (docs/import.md, "The `stream` argument",
// has the user-facing table; docs/protocols.md the protocol rules).
//
//   1. parse_stream: the caller's `stream` argument -> a StreamRequest (what the caller means).
//   2. dlpack_stream: a request + the array's device + the producer's row -> the value to pass to
//      that producer's __dlpack__(stream=...) and the stream its data is then ready on.
//   3. order_consumer_stream: once imported, make the caller's stream wait for the stream the data
//      is ready on (one event record + wait through stridex::cuda::order, never a host block) and
//      record the caller's stream in the View.
#pragma once

#include <nanobind/nanobind.h>

#include <cstdint>

#include "stream/producers.hpp"
#include "stridex/cuda/stream.hpp"
#include "stridex/device.hpp"
#include "stridex/view.hpp"

namespace stridex::python {

struct StreamRequest {
    enum class Kind : std::uint8_t {
        by_default,  // stream=None: the array API default, the legacy default stream on CUDA
        no_sync,     // stridex.NO_SYNC or -1: no ordering at all, the caller takes care of it
        on_stream,   // an explicit stream: 1 legacy, 2 per-thread, or a CUstream handle (never 0)
    };
    Kind kind = Kind::by_default;
    std::intptr_t handle = 0;    // on_stream only
    PyObject* object = nullptr;  // the stream object given (borrowed, for the call), or nullptr

    // The stream the caller will use the data on: the legacy default stream for the default request.
    std::intptr_t consumer() const noexcept { return kind == Kind::on_stream ? handle : cuda::StreamRef::kLegacy; }
};

// None, stridex.NO_SYNC, an int (0 -> ValueError, -1 = NO_SYNC, 1, 2, handle), an object with
// __cuda_stream__ (preferred), a torch (.cuda_stream), CuPy (.ptr) or Numba (.handle) stream, or
// anything with __index__. A stream object whose handle is NULL means the legacy default stream
// (StreamValue::from_handle).
// Throws stridex::Error (type or value) or nb::python_error.
StreamRequest parse_stream(PyObject* stream);

// The DLPack / CUDA-array-interface encoding of a stream as an int, for stridex.view(stream=...),
// View.__dlpack__(stream=...), a CAI's 'stream' key and the caster API: -1 means no
// synchronization (where `allow_no_sync`), 1 the legacy default stream, 2 the per-thread default
// stream, anything above a CUstream handle. 0 (legacy or per-thread?) and values below -1 are the
// core's StreamValue's ValueError (view.hpp). `where` names the argument in the ValueError.
std::intptr_t checked_stream_int(long long value, const char* where, bool allow_no_sync);
// The same for a Python int argument (int64_arg, then the rules above): stridex.view(stream=<int>),
// View.__dlpack__(stream=...) and View._with_stream(stream).
std::intptr_t stream_int_arg(PyObject* o, const char* where, bool allow_no_sync);

// The NO_SYNC sentinel (a borrowed reference, valid once bind_stream_policy ran).
PyObject* no_sync_sentinel() noexcept;
// Drops stridex's own reference to it (at exit; the module attribute keeps it until teardown).
void release_no_sync_sentinel() noexcept;

// What to pass as __dlpack__(stream=...). `value` is a borrowed reference (None or a cached int)
// kept alive by `holder` when it is a fresh int; `ready` is the stream the producer promises the
// data is ready on when given that value (kNoStream: no promise).
struct DlpackStream {
    PyObject* value;
    PyObject* holder = nullptr;  // owned reference to release (fresh ints)
    std::intptr_t ready;
    DlpackStream() noexcept : value(Py_None), ready(cuda::StreamRef::kLegacy) {}
    DlpackStream(const DlpackStream&) = delete;
    DlpackStream& operator=(const DlpackStream&) = delete;
    ~DlpackStream() { Py_XDECREF(holder); }
};

// `device` is nullptr when the producer was not asked (host-only rows, the default request to
// rows that do not spell the legacy stream out).
// Throws only on allocation failure.
void dlpack_stream(const StreamRequest& request, const Device* device, const ProducerRow& row, DlpackStream& out);

// Makes the caller's stream wait for `ready` (and for the View's Pending, an IPC event, where it
// carries one) when the View's memory is stream-ordered and the caller asked for ordering, then
// records the stream the View is ready on: the caller's stream, or for NO_SYNC `ready` itself (the
// producer's stream, kNoStream when unknown), the Pending kept.
void order_consumer_stream(View& view, const StreamRequest& request, std::intptr_t ready);

// ---- CUDA queries the importers need (through stridex::cuda) ----------------------------------
// Device of a pointer from the driver's attributes; for 0, the current device. Without a driver
// (or without a GPU) every non-null pointer is host memory and 0 is cuda:0.
Device device_of_cuda_pointer(std::uintptr_t ptr);

// Registers stridex.NO_SYNC (and its type) and the stream recorder's installer (stream_recorder.hpp).
void bind_stream_policy(nanobind::module_& m);

}  // namespace stridex::python
