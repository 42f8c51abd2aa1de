// The hand-over to a stream (handover.hpp): stridex's pool, and the producers' allocators that take
// streams.
#include "sanitizer/handover.hpp"

#include <nanobind/nanobind.h>

#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "common/attributes.hpp"
#include "common/python_owner.hpp"
#include "stridex/cuda/capture.hpp"
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

// Whether any consumer stream of `w` is capturing a CUDA graph now. Ordering the private stream
// after it would then wait on an event recorded into the capture, which a stream outside the
// capture may not do (the driver refuses it and may invalidate the capture).
bool consumer_capturing(const Watched& w) {
    for (const auto& [consumer, keep] : w.streams)
        if (cuda::capture_of(cuda::StreamRef(consumer), w.device).capturing()) return true;
    return false;
}

void tell_allocator(Watched& w, nb::handle record) {
    nb::handle stream = private_stream(w.device);
    const auto handle = nb::cast<std::uintptr_t>(stream.attr("cuda_stream"));
    const cuda::StreamRef waiter = cuda::StreamRef::from_handle(reinterpret_cast<cuda::CUstream>(handle));
    for (const auto& [consumer, keep] : w.streams)
        cuda::order(cuda::StreamRef(consumer), waiter, Device::cuda(w.device));
    record(stream);
}

// Releases whose consumer streams were capturing: told once no capture runs on them (the next
// release or hand-over retries). Each keeps its array, so torch cannot reuse the memory meanwhile.
std::vector<Watched*>* g_deferred = nullptr;

// Tells the allocator and drops the references, with the GIL; false (nothing done) while a
// consumer stream captures.
bool finish(Watched& w) noexcept {
    try {
        if (!w.streams.empty()) {
            // A stand-in of the framework's type has no record_stream: nothing to tell (and its
            // streams may be no real streams).
            nb::object record = nb::steal(attr_or_null(w.array, "record_stream"));
            if (record.is_valid()) {
                if (consumer_capturing(w)) return false;
                tell_allocator(w, record);
            }
        }
    } catch (nb::python_error& e) {
        e.discard_as_unraisable("stridex: telling torch's allocator the streams a View was handed to");
    } catch (...) {  // a stream gone: nothing more can be ordered
    }
    w.streams.clear();
    Py_DECREF(w.array);
    w.inner.reset();  // with the GIL: a Python owner drops its object here
    return true;
}

// Retries the deferred releases; the GIL is held.
void retry_deferred() noexcept {
    if (!g_deferred || g_deferred->empty()) return;
    std::vector<Watched*> waiting;
    waiting.swap(*g_deferred);
    for (Watched* w : waiting) {
        if (finish(*w)) {
            delete w;
            continue;
        }
        try {
            g_deferred->push_back(w);
        } catch (...) {  // no memory to wait: the array is kept for the process (never a reuse race)
        }
    }
}

void release_watched(void* context) noexcept {
    std::unique_ptr<Watched> w(static_cast<Watched*>(context));
    if (interpreter_finalizing()) {
        // Taking the GIL now would hang or crash: the references go with the process.
        for (auto& entry : w->streams) (void)std::move(entry.second).into_callback();
        (void)std::move(w->inner).into_callback();
        return;
    }
    with_gil([&w]() noexcept {
        retry_deferred();
        if (finish(*w)) return;
        try {
            if (!g_deferred) g_deferred = new std::vector<Watched*>();
            g_deferred->push_back(w.get());
        } catch (...) {  // no memory to wait: the array is kept for the process (never a reuse race)
        }
        (void)w.release();
    });
}

Watched* watched_of(const Owner& owner) noexcept {
    return static_cast<Watched*>(owner.callback_context(&release_watched));
}

}  // namespace

void watch_streams(View& view, PyObject* array) {
    retry_deferred();
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

void handed_to_stream(const View& view, PyObject* stream_object, std::intptr_t consumer) noexcept {
    if (consumer == kNoStream || view.device().type != DeviceType::kCUDA || view.size() == 0) return;
    const int device = view.device().id;
    const cuda::CUstream handle = cuda::StreamRef(consumer).handle();
    Owner keep;
    if (stream_object) try {
            keep = owner_of(stream_object);
        } catch (...) {  // no memory to keep it: the stream is noted as a bare handle
        }
    // stridex's own memory: by its owner, else by address (a torch tensor made from a pool View).
    if (!cuda::note_use(view.owner(), handle, device, keep)) cuda::note_use_at(view.ptr(), handle, device, keep);
    // Which consumer streams torch's allocator hears of, at the release:
    //  - not the legacy default stream: torch's default stream, on which tensors made outside a
    //    stream context are allocated, so torch orders their reuse after it already (and the
    //    default request would otherwise cost every import a record at its release);
    //  - a stream whose object the caller passed (kept alive until then) and the per-thread
    //    default stream (never destroyed);
    //  - not a stream named by a bare handle (the DLPack protocol's __dlpack__(stream=int), the
    //    exchange API): stridex cannot know it outlives the tensor, and ordering after a destroyed
    //    stream is undefined. The sanitizer reports those releases (docs/memory.md).
    if (consumer == cuda::StreamRef::kLegacy || (!keep && consumer != cuda::StreamRef::kPerThread)) return;
    if (Watched* w = watched_of(view.owner())) {
        const std::lock_guard lock(w->mutex);
        for (auto& [stream, kept] : w->streams)
            if (stream == consumer) {
                if (!kept) kept = keep;
                return;
            }
        try {
            w->streams.emplace_back(consumer, keep);
        } catch (...) {  // no memory for the record: torch is not told of this stream (as of a bare handle)
        }
    }
}

bool allocator_told(const View& view) noexcept {
    Watched* w = watched_of(view.owner());
    if (!w) return false;
    if (view.stream() == cuda::StreamRef::kLegacy) return true;  // torch orders its default stream
    const std::lock_guard lock(w->mutex);
    for (const auto& entry : w->streams)
        if (entry.first == view.stream()) return true;
    return false;
}

}  // namespace stridex::python
