// The hand-over to a stream (handover.hpp): stridex's pool, and the producers' allocators that take
// streams.
#include "handover.hpp"

#include <nanobind/nanobind.h>

#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "attributes.hpp"
#include "import_type_cache.hpp"
#include "py_owner.hpp"
#include "stridex/cuda/memory.hpp"
#include "stridex/cuda/stream.hpp"

namespace nb = nanobind;

namespace stridex::python {
namespace {

// A producer's array whose allocator is told, when stridex's last reference to its memory goes,
// every stream a View of it was handed to (watch_streams). Why then and not at each hand-over:
// torch's record_stream(s) makes torch record an event on `s` when the tensor is freed, which
// crashes once `s` is destroyed (a torch tensor handed to a CuPy stream that went first), and
// stridex cannot keep a consumer's stream alive that long. At the release every consumer's work is
// queued: one private stream of the framework's (never destroyed) waits for each consumer stream,
// and that stream is recorded with the allocator.
struct Watched {
    Owner inner;      // what kept the memory alive before: the producer's capsule, or its array
    PyObject* array;  // the producer's array (strong)
    int device;
    std::mutex mutex;                                      // hand-overs may run on several threads
    std::vector<std::pair<std::intptr_t, Owner>> streams;  // each consumer stream once, with its object
};

// torch's private stream of each device: a torch.cuda.Stream of its pool (torch never destroys
// those), made once and kept for the process.
std::vector<PyObject*>* g_private_streams = nullptr;

PyObject* private_stream(int device) {
    if (!g_private_streams) g_private_streams = new std::vector<PyObject*>();
    if (g_private_streams->size() <= static_cast<std::size_t>(device))
        g_private_streams->resize(static_cast<std::size_t>(device) + 1, nullptr);
    PyObject*& stream = (*g_private_streams)[static_cast<std::size_t>(device)];
    if (!stream) {
        nb::object cuda = nb::steal(loaded_attr("torch", "cuda"));
        if (!cuda.is_valid()) throw nb::python_error();
        stream = cuda.attr("Stream")(nb::arg("device") = device).release().ptr();
    }
    return stream;
}

void tell_allocator(Watched& w) {
    if (w.streams.empty()) return;
    nb::object record = nb::steal(attr_or_null(w.array, "record_stream"));
    if (!record.is_valid()) return;  // a stand-in of the framework's type, without the method
    nb::handle stream = private_stream(w.device);
    const auto handle = nb::cast<std::uintptr_t>(stream.attr("cuda_stream"));
    const cuda::StreamRef waiter = cuda::StreamRef::from_handle(reinterpret_cast<cuda::CUstream>(handle));
    for (const auto& [consumer, keep] : w.streams)
        cuda::order(cuda::StreamRef(consumer), waiter, Device::cuda(w.device));
    record(stream);
}

void release_watched(void* context) noexcept {
    std::unique_ptr<Watched> w(static_cast<Watched*>(context));
    if (interpreter_finalizing()) {
        // Taking the GIL now would hang or crash: the references go with the process.
        for (auto& entry : w->streams) (void)std::move(entry.second).into_callback();
        return;
    }
    const nb::gil_scoped_acquire gil;
    try {
        tell_allocator(*w);
    } catch (nb::python_error& e) {
        e.discard_as_unraisable("stridex: telling torch's allocator the streams a View was handed to");
    } catch (...) {  // a stream gone or in a capture: nothing more can be ordered
    }
    w->streams.clear();
    Py_DECREF(w->array);
    w->inner.reset();  // with the GIL: a Python owner drops its object here
}

Watched* watched_of(const Owner& owner) noexcept {
    return static_cast<Watched*>(owner.callback_context(&release_watched));
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

void watch_streams(View& view, PyObject* array) {
    if (view.device().type != DeviceType::kCUDA || watched_of(view.owner())) return;
    auto w = std::make_unique<Watched>();
    w->inner = view.owner();
    w->array = array;
    w->device = view.device().id;
    Owner owner = Owner::from_callback(&release_watched, w.get());
    Py_INCREF(array);
    (void)w.release();
    view.set_owner(std::move(owner));
}

void handed_to_stream(const View& view, PyObject* stream_object, std::intptr_t consumer) {
    if (consumer == kNoStream || view.device().type != DeviceType::kCUDA || view.size() == 0) return;
    const int device = view.device().id;
    const cuda::CUstream handle = cuda::StreamRef(consumer).handle();
    const Owner keep = stream_object ? owner_of(stream_object) : Owner{};
    // stridex's own memory: by its owner, else by address (a torch tensor made from a pool View).
    if (!cuda::note_use(view.owner(), handle, device, keep)) cuda::note_use_at(view.ptr(), handle, device, keep);
    // The legacy default stream is torch's default stream, on which tensors made outside a stream
    // context are allocated: torch orders their reuse after it already (and the default request
    // would otherwise cost every import a record at its release).
    if (Watched* w = watched_of(view.owner()); w && consumer != cuda::StreamRef::kLegacy) {
        const std::lock_guard lock(w->mutex);
        for (auto& [stream, kept] : w->streams)
            if (stream == consumer) {
                if (!kept) kept = keep;
                return;
            }
        w->streams.emplace_back(consumer, keep);
    }
}

}  // namespace stridex::python
