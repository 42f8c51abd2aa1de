// The DLPack C exchange API of stridex.View (DLPack 1.2 int / 1.3 capsule; docs/protocols.md): five C
// functions a consumer calls without going through Python's __dlpack__.
//
// No C++ exception crosses these functions: each returns 0, or -1 with the error reported (a
// Python BufferError for the functions that take Python objects, SetError for the allocator,
// which runs without Python).
//
// current_work_stream: stridex has no notion of a "current stream" per thread (torch and CuPy
// do); it answers the legacy default stream (CU_STREAM_LEGACY, 0x1) for CUDA devices, the same
// stream `__dlpack__(stream=None)` means, and NULL for devices without streams. "No sync" then
// means no host sync: a View still pending on another stream has the legacy stream ordered after
// that stream (an event, as for __dlpack__), so what the functions hand out is ready on the stream
// current_work_stream names, which is the exchange API's contract.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "common/arguments.hpp"
#include "export/export.hpp"
#include "sanitizer/handover.hpp"
#include "sanitizer/sanitizer.hpp"
#include "stridex/cuda/stream.hpp"
#include "stridex/cuda/vmm.hpp"
#include "stridex/host_copy.hpp"

namespace nb = nanobind;

namespace stridex::python {
namespace {

using dlpack::DLManagedTensorVersioned;
using dlpack::DLTensor;

// CUDA device memory for the allocator: a VirtualBuffer of exactly one mapping, dropped at once
// (its View keeps the memory mapped until the consumer's deleter runs).
View allocate_cuda(std::span<const std::int64_t> shape, Dtype dtype, int ordinal) {
    const Layout layout = Layout::contiguous(shape);
    const std::int64_t bytes = std::max<std::int64_t>(dtype.storage_bytes(layout.size()), 1);
    cuda::VirtualBufferOptions options;
    options.devices = {ordinal};
    const cuda::VirtualBuffer buffer(static_cast<std::size_t>(bytes), static_cast<std::size_t>(bytes), options);
    return buffer.view(dtype, shape, 0);
}

int managed_tensor_allocator(DLTensor* prototype, DLManagedTensorVersioned** out, void* error_ctx,
                             dlpack::SetErrorFn set_error) noexcept {
    auto report = [&](const char* kind, const char* message) {
        if (set_error) set_error(error_ctx, kind, message);
        return -1;
    };
    if (out == nullptr || prototype == nullptr) return report("ValueError", "stridex allocator: NULL argument");
    *out = nullptr;
    try {
        const DLTensor& p = *prototype;
        if (p.ndim < 0 || p.ndim > kMaxNdim)
            fail(ErrorKind::value, "stridex allocator: ndim must be in [0, ", kMaxNdim, "], found ", p.ndim);
        if (p.ndim > 0 && p.shape == nullptr) fail(ErrorKind::value, "stridex allocator: NULL shape for ndim ", p.ndim);
        const std::span<const std::int64_t> shape(p.shape, static_cast<std::size_t>(p.ndim));
        const Dtype dtype = Dtype::from_raw(p.dtype.code, p.dtype.bits, p.dtype.lanes);
        const Device device = Device::from_raw(p.device.device_type, p.device.device_id);
        View view;
        if (device == Device::cpu())
            view = allocate_host(shape, dtype);
        else if (device.type == DeviceType::kCUDA)
            view = allocate_cuda(shape, dtype, device.id);
        else
            fail(ErrorKind::buffer, "stridex allocator: cannot allocate ", device.name(),
                 " memory (stridex allocates cpu and cuda memory)");
        *out = dlpack::export_versioned(view, 0);
        return 0;
    } catch (const Error& e) {
        return report(python_exception_name(e.kind()), e.what());
    } catch (const std::bad_alloc&) {
        return report("MemoryError", "stridex allocator: out of host memory");
    } catch (const std::exception& e) {
        return report("RuntimeError", e.what());
    } catch (...) {
        return report("RuntimeError", "stridex allocator: unknown C++ exception");
    }
}

// Makes the legacy default stream (current_work_stream's answer) wait for a view's pending work,
// its Pending (an IPC event) included: the exchange API's no-sync contract is that the consumer
// orders that stream before its own, so the protocol itself names the legacy stream here.
void ready_on_work_stream(const View& v) {
    if ((v.stream() == kNoStream && !v.pending()) || !v.device().is_cuda_family()) return;
    cuda::order(v, cuda::StreamRef::legacy());
}

// The hand-over of an exported View. The protocol names no consumer's stream: the work stream it
// was given (the legacy default stream) is the consumer's, to the sanitizer and to stridex's pool.
void hand_over_on_work_stream(const View& v, PyObject* o) {
    const Handover handover{v, py_view(o).source.ptr(), v.stream(), cuda::StreamRef::kLegacy, "DLPack exchange API",
                            {}};
    if (sanitizer::on()) sanitizer::observe(handover);
    handed_to_stream(handover);
}

int not_a_view(PyObject* o) noexcept {
    PyErr_Format(PyExc_BufferError, "stridex exchange API: expected a stridex.View, found %s",
                 to_string(type_name(o)).c_str());
    return -1;
}

int managed_tensor_from_py_object_no_sync(void* py_object, DLManagedTensorVersioned** out) noexcept {
    auto* o = static_cast<PyObject*>(py_object);
    if (o == nullptr || out == nullptr) {
        PyErr_SetString(PyExc_BufferError, "stridex exchange API: NULL argument");
        return -1;
    }
    if (!is_view(o)) return not_a_view(o);
    try {
        const View& v = py_view(o).view;
        require_dlpack_dtype(v);
        ready_on_work_stream(v);
        hand_over_on_work_stream(v, o);
        *out = dlpack::export_versioned(v, 0);
        return 0;
    } catch (...) {
        set_python_error_from_current_exception();
        return -1;
    }
}

int managed_tensor_to_py_object_no_sync(DLManagedTensorVersioned* tensor, void** out_py_object) noexcept {
    if (out_py_object == nullptr) {
        // Stolen in every outcome: with nowhere to put the result, release it now.
        if (tensor && tensor->deleter) tensor->deleter(tensor);
        PyErr_SetString(PyExc_BufferError, "stridex exchange API: NULL output pointer");
        return -1;
    }
    *out_py_object = nullptr;
    try {
        View view = dlpack::import_managed(tensor);  // owns the tensor from here, in every outcome
        *out_py_object = wrap_view(std::move(view), nb::none()).release().ptr();
        return 0;
    } catch (...) {
        set_python_error_from_current_exception();
        return -1;
    }
}

int dltensor_from_py_object_no_sync(void* py_object, DLTensor* out) noexcept {
    auto* o = static_cast<PyObject*>(py_object);
    if (o == nullptr || out == nullptr) {
        PyErr_SetString(PyExc_BufferError, "stridex exchange API: NULL argument");
        return -1;
    }
    if (!is_view(o)) return not_a_view(o);
    if (!nb::inst_ready(o)) {
        PyErr_SetString(PyExc_TypeError,
                        "stridex exchange API: this stridex.View was made by __new__ and holds no view");
        return -1;
    }
    const View& v = py_view(o).view;
    // A bare DLTensor has no flags: it cannot say read-only nor padded, so such views refuse (as
    // legacy capsules do) rather than hand out memory a kernel may write or misread. Immutable
    // views go out as their producer's legacy capsules do (docs/export.md, "Writability").
    if (v.writability() == Writability::readonly) {
        PyErr_SetString(PyExc_BufferError,
                        "stridex exchange API: a read-only view has no borrowed DLTensor (it cannot carry READ_ONLY); "
                        "use managed_tensor_from_py_object_no_sync");
        return -1;
    }
    if (v.subbyte_padded()) {
        PyErr_SetString(PyExc_BufferError,
                        "stridex exchange API: padded sub-byte data has no borrowed DLTensor (it cannot carry "
                        "IS_SUBBYTE_TYPE_PADDED); use managed_tensor_from_py_object_no_sync");
        return -1;
    }
    try {
        require_dlpack_dtype(v);
        ready_on_work_stream(v);
        hand_over_on_work_stream(v, o);
    } catch (...) {
        set_python_error_from_current_exception();
        return -1;
    }
    // Borrowed: shape and strides point into the View's Layout, alive as long as the object.
    out->data = v.ptr();
    out->device = dlpack::dl_device_of(v.device());
    out->ndim = v.ndim();
    out->dtype = dlpack::dl_dtype_of(v.dtype());
    out->shape = const_cast<std::int64_t*>(v.shape().data());
    out->strides = const_cast<std::int64_t*>(v.strides().data());
    out->byte_offset = 0;
    return 0;
}

int current_work_stream(std::int32_t device_type, std::int32_t device_id, void** out_stream) noexcept {
    (void)device_id;
    if (out_stream == nullptr) {
        PyErr_SetString(PyExc_BufferError, "stridex exchange API: NULL output pointer");
        return -1;
    }
    const bool cuda = Device{static_cast<DeviceType>(device_type), 0}.is_cuda_family();
    *out_stream = cuda ? reinterpret_cast<void*>(cuda::StreamRef::kLegacy) : nullptr;
    return 0;
}

const dlpack::DLPackExchangeAPI kExchangeApi{
    {{dlpack::kMajorVersion, dlpack::kMinorVersion}, nullptr},
    &managed_tensor_allocator,
    &managed_tensor_from_py_object_no_sync,
    &managed_tensor_to_py_object_no_sync,
    &dltensor_from_py_object_no_sync,
    &current_work_stream,
};

}  // namespace

void bind_exchange_api(nb::handle view_type) {
    // The capsule has no destructor: the struct is static and outlives every consumer.
    auto* api = const_cast<dlpack::DLPackExchangeAPI*>(&kExchangeApi);
    nb::object capsule = nb::steal(PyCapsule_New(api, dlpack::kExchangeApiCapsule, nullptr));
    if (!capsule.is_valid()) throw nb::python_error();
    view_type.attr("__dlpack_c_exchange_api__") = capsule;
    view_type.attr("__c_dlpack_exchange_api__") = nb::int_(reinterpret_cast<std::uintptr_t>(api));
}

}  // namespace stridex::python
