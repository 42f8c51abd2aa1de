// The hand-over to a stream (handover.hpp): stridex's pool, and the producers' allocators that take
// streams.
#include "handover.hpp"

#include <nanobind/nanobind.h>

#include <utility>
#include <vector>

#include "attributes.hpp"
#include "import_type_cache.hpp"
#include "stridex/cuda/memory.hpp"
#include "stridex/cuda/stream.hpp"

namespace nb = nanobind;

namespace stridex::python {
namespace {

// torch's stream objects for stream handles, made once each: record_stream takes a torch.cuda.Stream
// (a wrapper of the handle, so a handle the driver reused after its stream was destroyed still
// names the stream it names now). A few streams at most: a vector, emptied when it grows past 64.
struct TorchStream {
    std::intptr_t stream;
    int device;
    nb::object object;
};
std::vector<TorchStream>* g_torch_streams = nullptr;

// The torch.cuda.Stream of `stream` on `device`: torch's default stream for the legacy default
// stream (torch's default stream is it), else torch.cuda.ExternalStream(handle, device).
nb::object torch_stream(std::intptr_t stream, int device) {
    if (!g_torch_streams) g_torch_streams = new std::vector<TorchStream>();
    for (const TorchStream& s : *g_torch_streams)
        if (s.stream == stream && s.device == device) return s.object;
    nb::object cuda = nb::steal(loaded_attr("torch", "cuda"));
    if (!cuda.is_valid()) throw nb::python_error();  // torch arrays without torch.cuda: not one of torch's
    nb::object object = stream == cuda::StreamRef::kLegacy
                            ? cuda.attr("default_stream")(device)
                            : cuda.attr("ExternalStream")(static_cast<std::uintptr_t>(reinterpret_cast<std::uintptr_t>(
                                                              cuda::StreamRef(stream).handle())),
                                                          device);
    if (g_torch_streams->size() >= 64) g_torch_streams->clear();
    g_torch_streams->push_back({stream, device, object});
    return object;
}

}  // namespace

bool allocator_takes_streams(PyObject* source) {
    if (!source || source == Py_None) return false;
    const Depth depth;  // a probe may run Python code that imports
    bool uncached = false;
    TypeEntry e = entry_for(Py_TYPE(source), &uncached);
    const Uncached guard{e, uncached};
    return e.row && e.row->records_streams;
}

void handed_to_stream(const View& view, PyObject* source, std::intptr_t consumer) {
    if (consumer == kNoStream || view.device().type != DeviceType::kCUDA || view.size() == 0) return;
    const int device = view.device().id;
    const cuda::CUstream handle = cuda::StreamRef(consumer).handle();
    // stridex's own memory: by its owner, else by address (a torch tensor made from a pool View).
    if (!cuda::note_use(view.owner(), handle, device)) cuda::note_use_at(view.ptr(), handle, device);
    if (!allocator_takes_streams(source)) return;
    // Every stream, the current one too: torch counts only the stream the tensor was allocated on
    // (its record_stream ignores that one), and code under `with torch.cuda.stream(s)` reads it on s.
    nb::object record = nb::steal(attr_or_null(source, "record_stream"));
    if (!record.is_valid()) return;  // a stand-in of the framework's type without the method
    record(torch_stream(consumer, device));
}

void forget_handover_streams() noexcept { delete std::exchange(g_torch_streams, nullptr); }

}  // namespace stridex::python
