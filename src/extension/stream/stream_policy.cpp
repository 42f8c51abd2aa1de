// The stream contract (see stream_policy.hpp and docs/import.md).
#include "stream/stream_policy.hpp"

#include "common/arguments.hpp"
#include "common/attributes.hpp"
#include "common/limited_api.hpp"
#include "common/names.hpp"
#include "sanitizer/sanitizer.hpp"

#include <cstring>
#include <string>
#include <utility>

#include "common/python_compat.hpp"
#include "stream/stream_recorder.hpp"
#include "stridex/cuda/capture.hpp"
#include "stridex/cuda/driver.hpp"
#include "stridex/cuda/pointer.hpp"
#include "stridex/cuda/stream.hpp"
#include "stridex/error.hpp"

namespace nb = nanobind;

namespace stridex::python {
namespace {

PyObject* g_no_sync = nullptr;  // the NO_SYNC sentinel, alive for the life of the process

const char kAccepted[] =
    "stream must be None (the default: legacy default stream on CUDA), stridex.NO_SYNC (or -1: no "
    "ordering), an int (1 legacy default stream, 2 per-thread default stream, or a CUstream handle), an object "
    "with __cuda_stream__, or a torch, CuPy or Numba stream";

// An explicit int from the caller. 0 is rejected: DLPack and the CUDA array interface forbid it,
// since it could mean the legacy or the per-thread default stream.
StreamRequest from_int(PyObject* value) {
    // int64 is intptr_t on every platform stridex builds for (LP64): no second range check.
    static_assert(sizeof(std::intptr_t) == sizeof(std::int64_t));
    const std::intptr_t stream = stream_int_arg(value, "stream", /*allow_no_sync=*/true);
    if (stream == kNoStream) return {StreamRequest::Kind::no_sync, 0};
    return {StreamRequest::Kind::on_stream, stream};
}

}  // namespace

std::intptr_t checked_stream_int(long long value, const char* where, bool allow_no_sync) {
    // The encoding's own rule (0 and values below -1) is the core's StreamValue; only "-1 is not
    // allowed here" (a CAI's 'stream' key) is this argument's.
    if (value == kNoStream && !allow_no_sync)
        fail(ErrorKind::value, where, " must be 1, 2 or a stream handle, found -1");
    return StreamValue(static_cast<std::intptr_t>(value), where).encoded();
}

std::intptr_t stream_int_arg(PyObject* o, const char* where, bool allow_no_sync) {
    return checked_stream_int(int64_arg(o, where), where, allow_no_sync);
}

namespace {

// A handle read from a stream object. NULL (or None, a ctypes c_void_p's NULL) is the driver's
// default stream, i.e. the legacy one (torch.cuda.default_stream().cuda_stream is 0): it becomes
// kLegacy (1), as CuPy and torch do, by StreamValue::from_handle, the one home of that rule.
StreamRequest from_handle(PyObject* value, const char* where) {
    const std::int64_t v = value == Py_None ? 0 : int64_arg(value, where);
    if (v < 0) fail(ErrorKind::value, where, " must be a stream handle (a non-negative int), found ", v);
    return {StreamRequest::Kind::on_stream, StreamValue::from_handle(static_cast<std::uintptr_t>(v)).encoded()};
}

bool module_starts_with(PyObject* obj, const char* prefix) {
    nb::object module = nb::steal(optional_attr(reinterpret_cast<PyObject*>(Py_TYPE(obj)), names.module));
    if (!module.is_valid() || !PyUnicode_Check(module.ptr())) return false;
    const char* text = PyUnicode_AsUTF8(module.ptr());
    if (!text) {
        clear_exception_or_throw();
        return false;
    }
    return std::strncmp(text, prefix, std::strlen(prefix)) == 0;
}

StreamRequest from_object(PyObject* stream) {
    // The CUDA stream protocol (cuda.core; CuPy >= 13, recent torch and Numba too): preferred.
    if (nb::object protocol = nb::steal(optional_attr(stream, names.cuda_stream_protocol)); protocol.is_valid()) {
        nb::object pair = PyCallable_Check(protocol.ptr()) ? protocol() : protocol;
        if (!PyTuple_Check(pair.ptr()) || PyTuple_GET_SIZE(pair.ptr()) != 2)
            fail(ErrorKind::value, "__cuda_stream__() must return a (version, handle) tuple, found ",
                 short_repr(pair.ptr()));
        return from_handle(PyTuple_GET_ITEM(pair.ptr(), 1), "__cuda_stream__()[1]");
    }
    // torch.cuda.Stream / ExternalStream
    if (nb::object h = nb::steal(optional_attr(stream, names.cuda_stream)); h.is_valid())
        return from_handle(h.ptr(), "stream.cuda_stream");
    // cupy.cuda.Stream / ExternalStream
    if (module_starts_with(stream, "cupy"))
        if (nb::object h = nb::steal(optional_attr(stream, names.ptr)); h.is_valid())
            return from_handle(h.ptr(), "stream.ptr");
    // numba.cuda streams: .handle is a ctypes c_void_p (.value, None for NULL) or a driver handle.
    if (module_starts_with(stream, "numba")) {
        if (nb::object h = nb::steal(optional_attr(stream, names.handle)); h.is_valid()) {
            if (nb::object v = nb::steal(optional_attr(h.ptr(), names.value)); v.is_valid())
                return from_handle(v.ptr(), "stream.handle.value");
            nb::object as_int = nb::steal(PyNumber_Long(stream));
            if (as_int.is_valid()) return from_handle(as_int.ptr(), "int(stream)");
            clear_exception_or_throw();  // no int(): the handle itself, unless Ctrl-C came in between
            return from_handle(h.ptr(), "stream.handle");
        }
    }
    // NumPy integers, IntEnums and other int-likes are plain ints.
    if (PyIndex_Check(stream)) {
        nb::object index = nb::steal(PyNumber_Index(stream));
        if (!index.is_valid()) throw nb::python_error();
        return from_int(index.ptr());
    }
    fail(ErrorKind::type, kAccepted, "; found ", type_name(stream));
}

// ---- the stream recorder (stream_recorder.hpp): tests without a GPU watch the orderings here ----
const StreamRecorder* g_recorder = nullptr;

const StreamRecorder* install_stream_recorder(const StreamRecorder* recorder) noexcept {
    return std::exchange(g_recorder, recorder);
}

void order_streams(std::intptr_t producer, std::intptr_t consumer, Device device) {
    if (g_recorder && g_recorder->order) {
        g_recorder->order(g_recorder->context, producer, consumer, device);
        return;
    }
    cuda::order(cuda::StreamRef(producer), cuda::StreamRef(consumer), device);
}

// The current device: the one of the context current on this thread (torch, CuPy and the runtime
// API make the device's primary context current), device 0 when none is.
Device current_cuda_device() {
    cuda::Driver& d = cuda::driver();
    if (!d.usable() || d.device_count() == 0) return Device::cuda(0);
    cuda::CUcontext current = nullptr;
    d.call("cuCtxGetCurrent", d.api().ctx_get_current, &current);
    if (current == nullptr) return Device::cuda(0);
    cuda::CUdevice device = -1;
    d.call("cuCtxGetDevice", d.api().ctx_get_device, &device);
    // CUdevice is a handle; the ordinal is its index among cuDeviceGet's answers (cached).
    for (int i = 0; i < d.device_count(); ++i)
        if (d.device(i) == device) return Device::cuda(i);
    return Device::cuda(0);
}

}  // namespace

PyObject* no_sync_sentinel() noexcept { return g_no_sync; }

void release_no_sync_sentinel() noexcept {
    cuda::set_graph_release_notifier(nullptr);  // no pending calls into a module that is going
    // Still compared by identity after this (stridex.view called from later atexit handlers): the
    // module attribute keeps the object, and so its address, alive until the module goes.
    Py_XDECREF(g_no_sync);
}

StreamRequest parse_stream(PyObject* stream) {
    if (stream == Py_None) return {};
    if (stream == g_no_sync) return {StreamRequest::Kind::no_sync, 0};
    if (PyLong_Check(stream)) {
        if (PyBool_Check(stream)) fail(ErrorKind::type, kAccepted, "; found bool");
        return from_int(stream);
    }
    StreamRequest request = from_object(stream);
    request.object = stream;
    if (sanitizer::on()) sanitizer::stream_object_seen(stream, request.handle);
    return request;
}

void dlpack_stream(const StreamRequest& request, const Device* device, const ProducerRow& row, DlpackStream& out) {
    out.value = Py_None;
    if (row.host_only) {  // NumPy & co: None is the only value they take, and nothing is pending
        out.ready = kNoStream;
        return;
    }
    if (device == nullptr) {
        // The default request, the device not asked (or without __dlpack_device__): None. On CUDA
        // that is the legacy default stream (array API; torch, CuPy, Warp) or a host-side wait
        // until ready (JAX), so the data is ready on the legacy stream either way; on the host,
        // None is the only legal value.
        out.ready = cuda::StreamRef::kLegacy;
        return;
    }
    std::intptr_t send = 0;  // 0: send None
    if (device->type == DeviceType::kROCM) {
        // ROCm: None is the legacy default stream, other values are hipStream_t; stridex passes
        // the caller's intent through and orders nothing itself.
        out.ready = kNoStream;
        if (request.kind == StreamRequest::Kind::no_sync) send = -1;
        if (request.kind == StreamRequest::Kind::on_stream) send = request.handle;
    } else if (device->is_cuda_device_or_managed()) {
        switch (request.kind) {
            case StreamRequest::Kind::by_default:
                // The legacy stream, as 1 where the row spells it (what torch's and CuPy's own
                // from_dlpack send), else None, which means the same to the array API.
                if (row.spells_default_stream()) send = cuda::StreamRef::kLegacy;
                out.ready = cuda::StreamRef::kLegacy;
                break;
            case StreamRequest::Kind::no_sync:
                if (row.takes_no_sync) {
                    send = -1;
                    out.ready = kNoStream;
                } else {
                    out.ready = cuda::StreamRef::kLegacy;  // JAX: None makes it wait on the host, -1 would fail
                }
                break;
            case StreamRequest::Kind::on_stream:
                if (request.handle == cuda::StreamRef::kPerThread && !row.takes_per_thread) {
                    // torch refuses 2: it syncs the legacy stream instead, and
                    // order_consumer_stream() makes the per-thread stream wait for that with an event.
                    send = cuda::StreamRef::kLegacy;
                    out.ready = cuda::StreamRef::kLegacy;
                } else {
                    send = request.handle;
                    out.ready = request.handle;
                }
                break;
        }
    } else {
        // CPU, pinned (torch treats it as CPU and refuses a CUDA stream), and every other device:
        // None, the only value host producers accept. Nothing is promised about pending work.
        out.ready = kNoStream;
    }
    if (send != 0) {
        out.holder = PyLong_FromSsize_t(send);
        if (!out.holder) throw nb::python_error();
        out.value = out.holder;
    }
}

namespace {
// The capture state of a stream the View's memory is used on (the context of its device).
cuda::Capture capture_on(std::intptr_t stream, Device device) {
    // Under the stream recorder (tests without a GPU) the streams are made-up values: no driver.
    if (stream == kNoStream || g_recorder) return {};
    return cuda::capture_of(cuda::StreamRef(stream), device.type == DeviceType::kCUDA ? device.id : 0);
}
}  // namespace

void order_consumer_stream(View& view, const StreamRequest& request, std::intptr_t ready) {
    const Device device = view.device();
    if (!device.is_cuda_family()) {
        view.set_stream(kNoStream);
        return;
    }
    if (request.kind == StreamRequest::Kind::no_sync) {
        // No ordering now: a Pending (a stridex.View ready after an IPC event) stays with the View,
        // for whichever door the caller later takes it through.
        std::shared_ptr<const Pending> pending = view.pending();
        view.set_stream(ready);
        view.set_pending(std::move(pending));
        return;
    }
    std::intptr_t consumer = request.consumer();
    // The default request inside a capture (docs/graphs.md): the legacy default stream cannot take
    // part in a capture, so when the producer reports its current stream (the exchange API's
    // current_work_stream, CuPy's current stream) and that stream is capturing, the request means
    // that stream: the caller captures on it.
    cuda::Capture capture;
    if (request.kind == StreamRequest::Kind::by_default && ready != kNoStream && ready != cuda::StreamRef::kLegacy) {
        capture = capture_on(ready, device);
        if (capture.active()) consumer = ready;
    } else if (consumer != cuda::StreamRef::kLegacy) {
        capture = capture_on(consumer, device);
    }
    if (const auto& pending = view.pending()) pending->order_before(consumer, device);
    if (ready != kNoStream && ready != consumer) order_streams(ready, consumer, device);
    // Captured work on `consumer` may use the memory at every replay: the producer stays alive as
    // long as the graph.
    if (capture.active()) cuda::keep_alive_in_capture(capture, view.owner());
    view.set_stream(consumer);
}

Device device_of_cuda_pointer(std::uintptr_t ptr) {
    if (Device answer;
        g_recorder && g_recorder->device_of_pointer && g_recorder->device_of_pointer(g_recorder->context, ptr, &answer))
        return answer;
    if (ptr == 0) return current_cuda_device();
    return cuda::pointer_info(ptr).device();
}

namespace {
// NO_SYNC is a plain CPython object rather than a nanobind instance: it lives as long as the module
// (and longer, in whoever holds it), which nanobind's leak check at exit would report.
PyObject* no_sync_repr(PyObject*) { return PyUnicode_FromString("stridex.NO_SYNC"); }
PyObject* no_sync_reduce(PyObject*, PyObject*) { return PyUnicode_FromString("NO_SYNC"); }
PyMethodDef g_no_sync_methods[] = {{"__reduce__", &no_sync_reduce, METH_NOARGS, nullptr},
                                   {nullptr, nullptr, 0, nullptr}};
PyType_Slot g_no_sync_slots[] = {
    {Py_tp_repr, reinterpret_cast<void*>(&no_sync_repr)},
    {Py_tp_methods, g_no_sync_methods},
    {Py_tp_doc, const_cast<char*>("The type of stridex.NO_SYNC: ask stridex.view() for no stream ordering at all.")},
    {0, nullptr},
};
PyType_Spec g_no_sync_spec = {"stridex._stridex.NoSyncType", sizeof(PyObject), 0,
                              Py_TPFLAGS_DEFAULT | Py_TPFLAGS_DISALLOW_INSTANTIATION, g_no_sync_slots};
}  // namespace

namespace {
// Owners a CUDA graph released (capture.hpp) are dropped in a pending call: on the main thread,
// with the GIL, never on the driver's thread that destroys the graph.
int drain_graph_releases(void*) {
    cuda::drain_graph_releases();
    return 0;
}
void notify_graph_release() noexcept {
    // No thread state is needed to add a pending call; a full queue leaves the Owners for the
    // next capture-time call, which drains too.
    if (!interpreter_finalizing()) (void)Py_AddPendingCall(&drain_graph_releases, nullptr);
}
}  // namespace

void bind_stream_policy(nb::module_& m) {
    cuda::set_graph_release_notifier(&notify_graph_release);
    nb::object type = nb::steal(PyType_FromSpec(&g_no_sync_spec));
    if (!type.is_valid()) throw nb::python_error();
    g_no_sync = PyType_GenericAlloc(reinterpret_cast<PyTypeObject*>(type.ptr()), 0);  // the only instance
    if (!g_no_sync) throw nb::python_error();
    m.attr("NoSyncType") = type;
    m.attr("NO_SYNC") = nb::borrow(g_no_sync);
    // The capsule points at a static holding the installer (a data pointer, as capsules take).
    static const InstallStreamRecorder installer_slot = &install_stream_recorder;
    nb::object installer = nb::steal(
        PyCapsule_New(const_cast<InstallStreamRecorder*>(&installer_slot), kStreamRecorderCapsule, nullptr));
    if (!installer.is_valid()) throw nb::python_error();
    m.attr("_install_stream_recorder") = installer;
}

}  // namespace stridex::python
