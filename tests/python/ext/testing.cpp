// stridex_testing: the test-only producers and the stream recorder of tests/python/test_import*.py
// and test_stream_policy.py. Built by the tests (tests/python/ext_build.py), never shipped.
//
// Pure-Python tests cannot build DLPack capsules with chosen fields, nor types that offer the C
// exchange API, nor see which streams stridex orders on a machine without a GPU. This module does
// exactly that and nothing else. It reaches into _stridex only through the stream recorder's
// installer (src/extension/stream/stream_recorder.hpp).
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "common/python_compat.hpp"  // interpreter_finalizing (inline; nothing of _stridex is linked)
#include "import/cupy_api.hpp"       // the CuPy C API table (declarations only)
#include "stream/stream_recorder.hpp"
#include "stridex/dlpack.hpp"
#include "stridex/dtype.hpp"
#include "stridex/error.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace stridex::python {
namespace {

// Counts deleter calls of the capsules made by make_capsule.
struct DeleterCounter {
    int calls = 0;
};

// One test tensor: a DLManagedTensor[Versioned] over the memory of a buffer-protocol object.
struct TestTensor {
    dlpack::DLManagedTensorVersioned versioned{};
    dlpack::DLManagedTensor legacy{};
    bool is_versioned = true;
    Py_buffer buffer{};           // keeps the exporting object alive
    PyObject* counter = nullptr;  // a DeleterCounter (strong), or nullptr
    std::vector<std::int64_t> shape, strides;
};

void destroy(TestTensor* t) noexcept {
    if (interpreter_finalizing()) return;
    PyGILState_STATE gil = PyGILState_Ensure();
    if (t->counter) {
        nb::inst_ptr<DeleterCounter>(nb::handle(t->counter))->calls += 1;
        Py_DECREF(t->counter);
    }
    PyBuffer_Release(&t->buffer);
    PyGILState_Release(gil);
    delete t;
}
void delete_versioned(dlpack::DLManagedTensorVersioned* m) { destroy(static_cast<TestTensor*>(m->manager_ctx)); }
void delete_legacy(dlpack::DLManagedTensor* m) { destroy(static_cast<TestTensor*>(m->manager_ctx)); }

struct TensorSpec {
    bool versioned = true;
    std::uint32_t major = 1, minor = 3;
    std::uint64_t flags = 0;
    bool null_strides = false;
    bool null_shape = false;
    bool null_deleter = false;
    std::uint64_t byte_offset = 0;
    nb::object shape = nb::none(), strides = nb::none(), dtype = nb::none(), device = nb::none();
};

std::vector<std::int64_t> ints(nb::handle seq) {
    std::vector<std::int64_t> out;
    for (nb::handle h : seq) out.push_back(nb::cast<std::int64_t>(h));
    return out;
}

TestTensor* make_tensor(nb::handle array, const TensorSpec& spec, PyObject* counter) {
    auto* t = new TestTensor();
    if (PyObject_GetBuffer(array.ptr(), &t->buffer, PyBUF_RECORDS_RO) != 0) {
        delete t;
        throw nb::python_error();
    }
    try {
        const Dtype format = t->buffer.format ? Dtype::from_buffer_format(t->buffer.format) : dtypes::uint8;
        dlpack::DLDataType dtype{static_cast<std::uint8_t>(format.code), format.bits, format.lanes};
        if (!spec.dtype.is_none()) {
            auto d = ints(spec.dtype);
            dtype = {static_cast<std::uint8_t>(d.at(0)), static_cast<std::uint8_t>(d.at(1)),
                     static_cast<std::uint16_t>(d.size() > 2 ? d[2] : 1)};
        }
        dlpack::DLDevice device{1, 0};
        if (!spec.device.is_none()) {
            auto d = ints(spec.device);
            device = {static_cast<std::int32_t>(d.at(0)), static_cast<std::int32_t>(d.at(1))};
        }
        const int ndim = t->buffer.ndim;
        if (spec.shape.is_none()) {
            for (int i = 0; i < ndim; ++i) t->shape.push_back(t->buffer.shape[i]);
        } else {
            t->shape = ints(spec.shape);
        }
        if (spec.strides.is_none()) {
            for (int i = 0; i < ndim && spec.shape.is_none(); ++i)
                t->strides.push_back(t->buffer.strides ? t->buffer.strides[i] / t->buffer.itemsize : 0);
            if (!spec.shape.is_none()) {  // C-order strides of the given shape
                t->strides.assign(t->shape.size(), 1);
                for (std::size_t i = t->shape.size(); i-- > 1;)
                    t->strides[i - 1] = t->strides[i] * (t->shape[i] ? t->shape[i] : 1);
            }
        } else {
            t->strides = ints(spec.strides);
        }
        dlpack::DLTensor tensor{};
        tensor.data = t->buffer.buf;
        tensor.device = device;
        tensor.ndim = static_cast<std::int32_t>(t->shape.size());
        tensor.dtype = dtype;
        tensor.shape = spec.null_shape || t->shape.empty() ? nullptr : t->shape.data();
        tensor.strides = spec.null_strides || t->strides.empty() ? nullptr : t->strides.data();
        tensor.byte_offset = spec.byte_offset;
        t->is_versioned = spec.versioned;
        if (spec.versioned) {
            t->versioned.version = {spec.major, spec.minor};
            t->versioned.manager_ctx = t;
            t->versioned.deleter = spec.null_deleter ? nullptr : &delete_versioned;
            t->versioned.flags = spec.flags;
            t->versioned.dl_tensor = tensor;
        } else {
            t->legacy.dl_tensor = tensor;
            t->legacy.manager_ctx = t;
            t->legacy.deleter = spec.null_deleter ? nullptr : &delete_legacy;
        }
    } catch (...) {
        PyBuffer_Release(&t->buffer);
        delete t;
        throw;
    }
    // A tensor without a deleter is never freed: it must hold no Python object of nanobind's.
    t->counter = spec.null_deleter ? nullptr : counter;
    Py_XINCREF(t->counter);
    return t;
}

// The producer side of a capsule: an unconsumed capsule runs the deleter when it dies, a "used_"
// one does not (docs/protocols.md, "Capsules and deleters").
void capsule_destructor(PyObject* capsule) {
    const char* name = PyCapsule_GetName(capsule);
    if (name && std::strncmp(name, "used_", 5) == 0) return;  // "used_" + any name: taken by a consumer
    auto* t = static_cast<TestTensor*>(PyCapsule_GetContext(capsule));
    if (!t) return;
    if (t->is_versioned) {
        if (t->versioned.deleter) t->versioned.deleter(&t->versioned);
    } else if (t->legacy.deleter) {
        t->legacy.deleter(&t->legacy);
    }
}

// Capsule names must outlive the capsule: keep every custom name ever used.
const char* stored_name(const std::string& name) {
    static auto* names_seen = new std::vector<std::string*>();
    for (std::string* s : *names_seen)
        if (*s == name) return s->c_str();
    names_seen->push_back(new std::string(name));
    return names_seen->back()->c_str();
}

nb::tuple make_capsule(nb::handle array, bool versioned, nb::object name, nb::object version, std::uint64_t flags,
                       bool null_strides, bool null_shape, bool null_deleter, std::uint64_t byte_offset,
                       nb::object shape, nb::object strides, nb::object dtype, nb::object device) {
    TensorSpec spec;
    spec.versioned = versioned;
    if (!version.is_none()) {
        auto v = ints(version);
        spec.major = static_cast<std::uint32_t>(v.at(0));
        spec.minor = static_cast<std::uint32_t>(v.at(1));
    }
    spec.flags = flags;
    spec.null_strides = null_strides;
    spec.null_shape = null_shape;
    spec.null_deleter = null_deleter;
    spec.byte_offset = byte_offset;
    spec.shape = shape;
    spec.strides = strides;
    spec.dtype = dtype;
    spec.device = device;
    nb::object counter = nb::cast(DeleterCounter{});
    TestTensor* t = make_tensor(array, spec, counter.ptr());
    const char* capsule_name = name.is_none() ? (versioned ? dlpack::kVersionedCapsule : dlpack::kLegacyCapsule)
                                              : stored_name(nb::cast<std::string>(name));
    void* pointer = versioned ? static_cast<void*>(&t->versioned) : static_cast<void*>(&t->legacy);
    PyObject* capsule = PyCapsule_New(pointer, capsule_name, &capsule_destructor);
    if (!capsule) {
        if (versioned)
            delete_versioned(&t->versioned);
        else
            delete_legacy(&t->legacy);
        throw nb::python_error();
    }
    PyCapsule_SetContext(capsule, t);
    return nb::make_tuple(nb::steal(capsule), counter);
}

// ---- Producers offering the DLPack C exchange API ---------------------------------------------
struct ExchangeState {
    std::intptr_t work_stream = 0;  // what current_work_stream reports (0: NULL)
    int work_stream_calls = 0;
    int from_py_calls = 0;
    int borrow_calls = 0;
};
ExchangeState g_exchange;

struct ExchangeBase {
    nb::object array;
    std::int32_t device_type = 1, device_id = 0;
    std::uint64_t flags = 0;
    bool refuse = false;             // answer BufferError
    TestTensor* borrowed = nullptr;  // what dltensor_from_py_object_no_sync lends, alive with the object
    ExchangeBase() = default;
    ExchangeBase(const ExchangeBase&) = delete;
    ExchangeBase& operator=(const ExchangeBase&) = delete;
    ~ExchangeBase() {
        if (borrowed) borrowed->versioned.deleter(&borrowed->versioned);
    }
};
// Three Python types, one per way of offering the API.
struct ExchangeProducer : ExchangeBase {};         // 1.3 capsule
struct ExchangeProducerInt : ExchangeBase {};      // 1.2 int
struct ExchangeProducerChained : ExchangeBase {};  // 1.3 capsule of a major-2 API chaining to major 1

// What both tensor slots share: the producer behind `py_object`, its refusal (BufferError with
// `refusal`), and C++ exceptions turned into Python errors. 0, or -1 with the error set.
template <class Fill>
int answer(void* py_object, const char* refusal, Fill&& fill) noexcept {
    try {
        auto* self = nb::inst_ptr<ExchangeBase>(nb::handle(static_cast<PyObject*>(py_object)));
        if (self->refuse) {
            PyErr_SetString(PyExc_BufferError, refusal);
            return -1;
        }
        fill(*self);
        return 0;
    } catch (nb::python_error& e) {
        e.restore();
    } catch (const std::exception& e) {
        PyErr_SetString(PyExc_BufferError, e.what());
    }
    return -1;
}

int from_py_object(void* py_object, dlpack::DLManagedTensorVersioned** out) noexcept {
    ++g_exchange.from_py_calls;
    return answer(py_object, "this test producer refuses to export", [&](ExchangeBase& self) {
        TensorSpec spec;
        spec.flags = self.flags;
        spec.device = nb::make_tuple(self.device_type, self.device_id);
        *out = &make_tensor(self.array, spec, nullptr)->versioned;
    });
}

// The borrowed slot: a DLTensor over the object's array, valid as long as the object.
int borrow_from_py_object(void* py_object, dlpack::DLTensor* out) noexcept {
    ++g_exchange.borrow_calls;
    return answer(py_object, "this test producer refuses to lend", [&](ExchangeBase& self) {
        if (!self.borrowed) {
            TensorSpec spec;
            spec.device = nb::make_tuple(self.device_type, self.device_id);
            self.borrowed = make_tensor(self.array, spec, nullptr);
        }
        *out = self.borrowed->versioned.dl_tensor;
    });
}

int current_work_stream(std::int32_t, std::int32_t, void** out) noexcept {
    ++g_exchange.work_stream_calls;
    *out = reinterpret_cast<void*>(g_exchange.work_stream);
    return 0;
}

dlpack::DLPackExchangeAPI g_api_v1{{{1, 3}, nullptr},   nullptr, &from_py_object, nullptr, &borrow_from_py_object,
                                   &current_work_stream};
// A future major version: its layout after the header is unknown to stridex, so every slot is
// poison; only prev_api may be followed.
dlpack::DLPackExchangeAPI g_api_v2{{{2, 0}, &g_api_v1.header}, nullptr, nullptr, nullptr, nullptr, nullptr};

template <class T>
void bind_exchange_producer(nb::module_& m, const char* name, nb::object api_attribute, const char* attribute) {
    nb::class_<T>(m, name, "A test producer offering the DLPack C exchange API over a buffer-protocol array.")
        .def(
            "__init__",
            [](T* self, nb::object array, nb::object device, std::uint64_t flags, bool refuse) {
                new (self) T();
                self->array = array;
                if (!device.is_none()) {
                    auto d = ints(device);
                    self->device_type = static_cast<std::int32_t>(d.at(0));
                    self->device_id = static_cast<std::int32_t>(d.at(1));
                }
                self->flags = flags;
                self->refuse = refuse;
            },
            "array"_a, "device"_a = nb::none(), "flags"_a = 0, "refuse"_a = false)
        .def_prop_ro("array", [](const T& s) { return s.array; });
    nb::handle(nb::type<T>()).attr(attribute) = api_attribute;
}

// ---- A stand-in for CuPy >= 14.3's public C API (the capsule cupy._public_c_api) -------------
// The GPU image's CuPy (14.2) predates the capsule, so stridex reads its arrays' layout there;
// test_import_cupy.py installs this table as cupy._public_c_api to drive stridex's API path over the
// same arrays. It answers from the arrays' Python attributes, in the API's struct layout.
struct FakeCupyState {
    std::vector<Py_ssize_t> dims;  // shape then strides of the last array described
    int metadata_calls = 0, stream_calls = 0;
} g_fake_cupy;

int fake_cupy_ptr(PyObject* array, void** ptr) noexcept {
    try {
        *ptr = reinterpret_cast<void*>(nb::cast<std::intptr_t>(nb::handle(array).attr("data").attr("ptr")));
        return 0;
    } catch (nb::python_error& e) {
        e.restore();
        return -1;
    }
}

int fake_cupy_metadata(PyObject* array, CupyMetadata* out) noexcept {
    try {
        nb::handle a(array);
        const auto shape = nb::cast<std::vector<Py_ssize_t>>(a.attr("shape"));
        const auto strides = nb::cast<std::vector<Py_ssize_t>>(a.attr("strides"));
        g_fake_cupy.dims = shape;
        g_fake_cupy.dims.insert(g_fake_cupy.dims.end(), strides.begin(), strides.end());
        nb::object dtype = a.attr("dtype");  // the array's own dtype object: borrowed below
        out->ptr = reinterpret_cast<void*>(nb::cast<std::intptr_t>(a.attr("data").attr("ptr")));
        out->ndim = static_cast<int>(shape.size());
        out->device_id = nb::cast<int>(a.attr("data").attr("device_id"));
        out->size = nb::cast<std::size_t>(a.attr("size"));
        out->itemsize = nb::cast<Py_ssize_t>(dtype.attr("itemsize"));
        out->shape = g_fake_cupy.dims.data();
        out->strides = g_fake_cupy.dims.data() + shape.size();
        out->dtype = dtype.ptr();
        ++g_fake_cupy.metadata_calls;
        return 0;
    } catch (nb::python_error& e) {
        e.restore();
        return -1;
    }
}

int fake_cupy_stream(int device_id, void** stream) noexcept {
    try {
        nb::object current = nb::module_::import_("cupy.cuda").attr("get_current_stream")(device_id);
        *stream = reinterpret_cast<void*>(nb::cast<std::intptr_t>(current.attr("ptr")));
        ++g_fake_cupy.stream_calls;
        return 0;
    } catch (nb::python_error& e) {
        e.restore();
        return -1;
    }
}

CupyApi g_fake_cupy_api{14, 3, nullptr, &fake_cupy_ptr, &fake_cupy_metadata, &fake_cupy_stream};

// ---- The stream recorder: installed into _stridex while a test captures orderings or fakes
// CUDA pointers (src/extension/stream/stream_recorder.hpp) ---------------------------------------------
struct OrderRecord {
    std::intptr_t producer, consumer;
    Device device;
};

struct Recording {
    bool capture_orders = false;      // orderings are logged instead of reaching the driver
    bool fake_cuda_pointers = false;  // every CUDA-array-interface pointer is memory of cuda:0
    std::vector<OrderRecord> orders;
};
Recording g_recording;

void record_order(void*, std::intptr_t producer, std::intptr_t consumer, Device device) noexcept {
    try {
        g_recording.orders.push_back({producer, consumer, device});
    } catch (...) {  // out of memory: a lost record fails the test that looks for it
    }
}

bool fake_device_of_pointer(void*, std::uintptr_t, Device* out) noexcept {
    *out = Device::cuda(0);
    return true;
}

// Its slots follow the switches (a null slot leaves that question to the driver); _stridex reads
// them on every call, so flipping a switch while installed takes effect at once.
StreamRecorder g_recorder{nullptr, nullptr, nullptr};

// Like cuda::DriverOverride: installs the recorder into _stridex and puts back what was there.
class RecorderOverride {
public:
    explicit RecorderOverride(InstallStreamRecorder install) : install_(install), previous_(install(&g_recorder)) {}
    ~RecorderOverride() { install_(previous_); }
    RecorderOverride(const RecorderOverride&) = delete;
    RecorderOverride& operator=(const RecorderOverride&) = delete;

private:
    InstallStreamRecorder install_;
    const StreamRecorder* previous_;
};
RecorderOverride* g_override = nullptr;

InstallStreamRecorder installer() {
    nb::object stridex_module = nb::module_::import_("stridex._stridex");
    nb::object capsule = stridex_module.attr("_install_stream_recorder");
    void* slot = PyCapsule_GetPointer(capsule.ptr(), kStreamRecorderCapsule);
    if (!slot) throw nb::python_error();
    return *static_cast<const InstallStreamRecorder*>(slot);
}

// The recorder is installed while either switch is on.
void update_recorder() {
    g_recorder.order = g_recording.capture_orders ? &record_order : nullptr;
    g_recorder.device_of_pointer = g_recording.fake_cuda_pointers ? &fake_device_of_pointer : nullptr;
    const bool wanted = g_recording.capture_orders || g_recording.fake_cuda_pointers;
    if (wanted && !g_override) g_override = new RecorderOverride(installer());
    if (!wanted && g_override) {
        delete g_override;
        g_override = nullptr;
    }
}

}  // namespace

}  // namespace stridex::python

// Takes the tensor out of a versioned capsule (renamed used_, as a consumer does) and runs its
// deleter on a new native thread, which has no Python thread state at all, while this thread has
// released the GIL: how a C++ consumer drops an import from one of its own threads.
void delete_on_native_thread(nb::handle capsule) {
    auto* tensor = static_cast<stridex::dlpack::DLManagedTensorVersioned*>(
        PyCapsule_GetPointer(capsule.ptr(), stridex::dlpack::kVersionedCapsule));
    if (!tensor) throw nb::python_error();
    if (PyCapsule_SetName(capsule.ptr(), stridex::dlpack::kUsedVersionedCapsule) != 0) throw nb::python_error();
    nb::gil_scoped_release released;
    std::thread([tensor] { tensor->deleter(tensor); }).join();
}

NB_MODULE(stridex_testing, m) {
    using namespace stridex::python;
    m.doc() = "Test-only producers and the stream recorder of the stridex test suite.";

    nb::class_<DeleterCounter>(m, "DeleterCounter").def_ro("calls", &DeleterCounter::calls);
    m.def("delete_on_native_thread", &delete_on_native_thread, "capsule"_a,
          "Runs a versioned capsule's deleter on a native thread without the GIL (the capsule is consumed).");
    m.def(
        "fake_cupy_api",
        [](nb::handle ndarray_type, int major, int minor) {
            if (!PyType_Check(ndarray_type.ptr())) throw nb::type_error("expected cupy.ndarray");
            g_fake_cupy_api.ndarray_type = reinterpret_cast<PyTypeObject*>(ndarray_type.ptr());
            g_fake_cupy_api.version_major = major;
            g_fake_cupy_api.version_minor = minor;
            return nb::steal(PyCapsule_New(&g_fake_cupy_api, kCupyApiCapsule, nullptr));
        },
        "ndarray_type"_a, "major"_a = 14, "minor"_a = 3,
        "A CuPy >= 14.3 public C API capsule over cupy.ndarray, answering from Python attributes.");
    m.def("fake_cupy_api_calls", [] { return nb::make_tuple(g_fake_cupy.metadata_calls, g_fake_cupy.stream_calls); });
    m.def("make_capsule", &make_capsule, "array"_a, nb::kw_only(), "versioned"_a = true, "name"_a = nb::none(),
          "version"_a = nb::none(), "flags"_a = 0, "null_strides"_a = false, "null_shape"_a = false,
          "null_deleter"_a = false, "byte_offset"_a = 0, "shape"_a = nb::none(), "strides"_a = nb::none(),
          "dtype"_a = nb::none(), "device"_a = nb::none(),
          "A DLPack capsule over `array`'s memory with chosen fields; returns (capsule, DeleterCounter). shape and "
          "strides count elements; dtype is (code, bits[, lanes]); device is (device_type, device_id).");

    nb::object capsule_v1 = nb::steal(PyCapsule_New(&g_api_v1, stridex::dlpack::kExchangeApiCapsule, nullptr));
    nb::object capsule_v2 = nb::steal(PyCapsule_New(&g_api_v2, stridex::dlpack::kExchangeApiCapsule, nullptr));
    if (!capsule_v1.is_valid() || !capsule_v2.is_valid()) throw nb::python_error();
    bind_exchange_producer<ExchangeProducer>(m, "ExchangeProducer", capsule_v1, "__dlpack_c_exchange_api__");
    bind_exchange_producer<ExchangeProducerInt>(m, "ExchangeProducerInt",
                                                nb::int_(reinterpret_cast<std::uintptr_t>(&g_api_v1)),
                                                "__c_dlpack_exchange_api__");
    bind_exchange_producer<ExchangeProducerChained>(m, "ExchangeProducerChained", capsule_v2,
                                                    "__dlpack_c_exchange_api__");
    m.def(
        "set_work_stream", [](std::intptr_t s) { g_exchange.work_stream = s; },
        "What the test exchange API's current_work_stream reports (0 = NULL).");
    m.def(
        "exchange_calls", [] { return nb::make_tuple(g_exchange.from_py_calls, g_exchange.work_stream_calls); },
        "(managed_tensor_from_py_object_no_sync calls, current_work_stream calls) so far.");
    m.def(
        "borrow_calls", [] { return g_exchange.borrow_calls; }, "dltensor_from_py_object_no_sync calls so far.");

    m.def(
        "capture_orders",
        [](bool on) {
            g_recording.capture_orders = on;
            update_recorder();
        },
        "on"_a, "While on, stream orderings are recorded (captured_orders) instead of reaching the CUDA driver.");
    m.def(
        "captured_orders",
        [] {
            nb::list out;
            for (const OrderRecord& r : g_recording.orders)
                out.append(nb::make_tuple(r.producer, r.consumer, r.device.name()));
            g_recording.orders.clear();
            return out;
        },
        "[(producer, consumer, device)]: `consumer` was made to wait for the work queued on `producer`. Clears the "
        "log.");
    m.def(
        "fake_cuda_pointers",
        [](bool on) {
            g_recording.fake_cuda_pointers = on;
            update_recorder();
        },
        "on"_a, "While on, __cuda_array_interface__ pointers are taken to be memory of cuda:0.");
}
