// DLPack importers: the C exchange API (no Python call at all), __dlpack__ (one call, two when the
// stream to send depends on the device), and capsules.
#include <cerrno>
#include <cstring>
#if defined(__linux__)
#include <link.h>
#include <sys/uio.h>
#include <unistd.h>
#endif
#include <optional>

#include "common/arguments.hpp"
#include "common/limited_api.hpp"
#include "common/set_error.hpp"
#include "export/py_owner.hpp"
#include "import/importers.hpp"
#include "stridex/cuda/driver.hpp"
#include "stridex/error.hpp"

namespace nb = nanobind;

namespace stridex::python {
namespace {

PyObject* g_consumed_capsule_error = nullptr;  // set once by bind_consumed_capsule_error

using dlpack::kExchangeApiCapsule, dlpack::kLegacyCapsule, dlpack::kUsedLegacyCapsule, dlpack::kUsedVersionedCapsule,
    dlpack::kVersionedCapsule;

[[noreturn]] void raise_current_or(PyObject* type, const char* message) {
    if (!PyErr_Occurred()) PyErr_SetString(type, message);
    throw nb::python_error();
}

// A producer's own failure to export (the Python error set now) as the caller sees it: a BufferError,
// whatever the producer raised (torch's exchange API raises RuntimeError for quantized tensors, where
// the array API says BufferError), with the producer's type and message kept, and its exception as
// __cause__. A BufferError passes unchanged; so do errors that are not a refusal (MemoryError,
// KeyboardInterrupt and other BaseExceptions that are not Exceptions).
[[noreturn]] void raise_refusal(PyObject* obj, const char* what) {
    if (!PyErr_Occurred())
        PyErr_Format(PyExc_BufferError, "%s.%s failed without saying why", to_string(type_name(obj)).c_str(), what);
    if (PyErr_ExceptionMatches(PyExc_BufferError) || !PyErr_ExceptionMatches(PyExc_Exception) ||
        PyErr_ExceptionMatches(PyExc_MemoryError))
        throw nb::python_error();
    nb::python_error cause;  // taken out of the error indicator, normalized, with its traceback
    nb::raise_from(cause, PyExc_BufferError, "%s.%s refused to export: %s: %S", to_string(type_name(obj)).c_str(), what,
                   to_string(type_name(cause.value().ptr())).c_str(), cause.value().ptr());
}

// An attribute of the type object itself (class attributes, through the MRO), or nullptr. A
// metaclass may run code for it: an Exception it raises means no attribute, anything else
// (KeyboardInterrupt) is raised.
PyObject* type_attr(PyTypeObject* type, PyObject* name) {
    PyObject* out = PyObject_GetAttr(reinterpret_cast<PyObject*>(type), name);
    if (!out) clear_exception_or_throw();
    return out;
}

// __dlpack_device__() -> Device. Unknown device types are kept as they are: they only select
// the stream value (None), and the capsule's own device is validated on import.
Device call_dlpack_device(PyObject* obj, const TypeEntry& entry) {
    PyObject* args[2] = {nullptr, obj};
    nb::object result = nb::steal(
        entry.dlpack_device_unbound
            ? PyObject_Vectorcall(entry.dlpack_device, args + 1, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, nullptr)
            : PyObject_CallMethodObjArgs(obj, names.dlpack_device, nullptr));
    if (!result.is_valid()) raise_refusal(obj, "__dlpack_device__()");
    PyObject* r = result.ptr();
    long values[2] = {0, 0};
    bool ok = PyTuple_Check(r) && PyTuple_GET_SIZE(r) == 2;
    for (Py_ssize_t i = 0; ok && i < 2; ++i) {
        PyObject* item = PyTuple_GET_ITEM(r, i);
        ok = PyIndex_Check(item) && !PyBool_Check(item);
        if (!ok) break;
        nb::object index = nb::steal(PyNumber_Index(item));
        if (!index.is_valid()) throw nb::python_error();
        values[i] = PyLong_AsLong(index.ptr());
        if (values[i] == -1 && PyErr_Occurred()) throw nb::python_error();
        ok = values[i] >= INT32_MIN && values[i] <= INT32_MAX;
    }
    if (!ok)
        fail(ErrorKind::value, "__dlpack_device__() must return a (device_type, device_id) tuple of ints, found ",
             short_repr(r));
    return Device{static_cast<DeviceType>(values[0]), static_cast<std::int32_t>(values[1])};
}

// __dlpack__(stream=..., max_version=(1, 3)). A TypeError means an unknown keyword (array API):
// retried with fewer keywords, which is allowed because stridex never sends dl_device or copy.
// The level that worked is remembered for the type by the caller (entry.keywords). A JAX array
// whose capsule jaxlib gives directly is not asked at all (import_jax.cpp).
nb::object call_dlpack(PyObject* obj, TypeEntry& entry, DlpackStream& stream) {
    if (entry.jaxlib_export)
        if (PyObject* capsule = export_through_jaxlib(obj, stream.value)) return nb::steal(capsule);
    // None is every conformant producer's default: left out (one keyword less for the producer to
    // bind) unless the row says the default is something else (torch >= 2.10: -1). Host-only
    // producers take nothing but None anyway.
    const bool omit_stream = entry.row->host_only || (stream.value == Py_None && !entry.row->spell_none);
    DlpackKeywords level = entry.keywords;  // what the producer takes
    for (;;) {
        PyObject* args[4] = {nullptr, obj, nullptr, nullptr};
        PyObject* kwnames = nullptr;
        if (level == DlpackKeywords::full) {
            if (omit_stream) {
                args[2] = names.max_version;
                kwnames = names.kw_max_version;
            } else {
                args[2] = stream.value;
                args[3] = names.max_version;
                kwnames = names.kw_stream_max_version;
            }
        } else if (level == DlpackKeywords::stream_only && !omit_stream) {
            args[2] = stream.value;
            kwnames = names.kw_stream;
        }
        PyObject* result;
        if (entry.dlpack_unbound) {
            result = PyObject_Vectorcall(entry.dlpack, args + 1, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, kwnames);
        } else {
            nb::object bound = nb::steal(PyObject_GetAttr(obj, names.dlpack));
            if (!bound.is_valid()) raise_refusal(obj, "__dlpack__");
            result = PyObject_Vectorcall(bound.ptr(), args + 2, PY_VECTORCALL_ARGUMENTS_OFFSET, kwnames);
        }
        if (result) {
            entry.keywords = level;
            return nb::steal(result);
        }
        // Only a call that passed keywords can have failed for them.
        if (kwnames == nullptr || !PyErr_ExceptionMatches(PyExc_TypeError)) raise_refusal(obj, "__dlpack__()");
        PyErr_Clear();
        level = level == DlpackKeywords::full ? DlpackKeywords::stream_only : DlpackKeywords::none;
        // A producer that takes no stream cannot be asked to order anything.
        if (level == DlpackKeywords::none && stream.value != Py_None) stream.ready = kNoStream;
    }
}

// CuPy 13.4-14.2 (cupy#10172) divides negative byte strides by the item size as unsigned numbers:
// -k elements arrive as 2**64/itemsize - k. For a power-of-two item size that is exact, so it is
// undone exactly; such values (at least 2**63/itemsize) cannot be the strides of a real array, and
// true negative strides (2**63 and up as unsigned) are left alone. Item size 1 comes out right.
void repair_unsigned_strides(PyObject* capsule) noexcept {
    const char* name = PyCapsule_CheckExact(capsule) ? PyCapsule_GetName(capsule) : nullptr;
    dlpack::DLTensor* t = nullptr;
    if (name && std::strcmp(name, kVersionedCapsule) == 0) {
        auto* m = static_cast<dlpack::DLManagedTensorVersioned*>(PyCapsule_GetPointer(capsule, name));
        if (m && m->version.major == dlpack::kMajorVersion) t = &m->dl_tensor;
    } else if (name && std::strcmp(name, kLegacyCapsule) == 0) {
        auto* m = static_cast<dlpack::DLManagedTensor*>(PyCapsule_GetPointer(capsule, name));
        if (m) t = &m->dl_tensor;
    }
    if (PyErr_Occurred()) PyErr_Clear();
    if (!t || !t->strides || t->ndim <= 0 || t->ndim > kMaxNdim) return;
    const std::uint64_t itemsize = (std::uint64_t{t->dtype.bits} * t->dtype.lanes + 7) / 8;
    if (itemsize < 2 || (itemsize & (itemsize - 1)) != 0) return;
    const std::uint64_t wrap = UINT64_MAX / itemsize + 1;  // 2**64 / itemsize
    for (std::int32_t i = 0; i < t->ndim; ++i) {
        const auto s = static_cast<std::uint64_t>(t->strides[i]);
        if (s >= wrap / 2 && s < wrap) t->strides[i] = static_cast<std::int64_t>(s - wrap);
    }
}

// ---- Reading an exchange API that Python code pointed at ------------------------------------
// Any class can set __c_dlpack_exchange_api__ = 12345 (or id(something)), and a capsule's struct
// can chain prev_api into a loop. Before stridex trusts a struct it checks, without faulting,
// that every byte it reads is mapped (process_vm_readv on our own process fails with EFAULT
// instead of crashing), walks at most kMaxApiChain headers, and checks that the function pointers
// lie in an executable segment of a loaded shared object or of the executable (code generated at
// run time, e.g. by a JIT or as ctypes callbacks, is therefore not taken; such a producer's
// __dlpack__ still is). A real producer's API passes all of this; anything else is declined: the
// next protocol is tried, and an import that finds no other says why the API was declined.
constexpr int kMaxApiChain = 8;

// Why an exchange API was declined, for each of the two attributes (DeclineForm): words for
// stridex.view()'s error where the type offers nothing else.
enum class Decline { not_capsule, not_address, unreadable, no_major, loop, not_code };
enum class DeclineForm { capsule, address };

const char* declined(DeclineForm form, Decline why) noexcept {
    const bool capsule = form == DeclineForm::capsule;
    switch (why) {
        case Decline::not_capsule: return "__dlpack_c_exchange_api__ is not a capsule named 'dlpack_exchange_api'";
        case Decline::not_address: return "__c_dlpack_exchange_api__ is not an address: an exact int in [1, 2**64)";
        case Decline::unreadable:
            return capsule ? "the table __dlpack_c_exchange_api__ points at is not readable memory"
                           : "the table __c_dlpack_exchange_api__ points at is not readable memory";
        case Decline::no_major:
            return capsule ? "the prev_api chain of __dlpack_c_exchange_api__ has no table of major version 1"
                           : "the prev_api chain of __c_dlpack_exchange_api__ has no table of major version 1";
        case Decline::loop:
            return capsule ? "the prev_api chain of __dlpack_c_exchange_api__ does not end within 8 tables"
                           : "the prev_api chain of __c_dlpack_exchange_api__ does not end within 8 tables";
        case Decline::not_code:
            return capsule ? "the functions of __dlpack_c_exchange_api__ are not code of a loaded library or of the "
                             "executable: made at run time, like ctypes callbacks and JIT code, which stridex does "
                             "not call"
                           : "the functions of __c_dlpack_exchange_api__ are not code of a loaded library or of the "
                             "executable: made at run time, like ctypes callbacks and JIT code, which stridex does "
                             "not call";
    }
    return "";
}

template <class T>
bool read_foreign(const void* address, T* out) noexcept {
    if (address == nullptr || reinterpret_cast<std::uintptr_t>(address) % alignof(T) != 0) return false;
#if defined(__linux__)
    iovec local{out, sizeof(T)};
    iovec remote{const_cast<void*>(address), sizeof(T)};
    if (process_vm_readv(getpid(), &local, 1, &remote, 1, 0) == static_cast<ssize_t>(sizeof(T))) return true;
    if (errno != EPERM && errno != ENOSYS) return false;  // EFAULT: not mapped
    // A sandbox that forbids the call (seccomp): only the protocol's promise is left.
    std::memcpy(out, address, sizeof(T));
    return true;
#else
    std::memcpy(out, address, sizeof(T));  // elsewhere the protocol's promise is all there is
    return true;
#endif
}

// Inside an executable segment of a loaded shared object or of the executable. A data address
// (a type object, say) lies inside a loaded object too, which is why dladdr would not do.
bool is_code(const void* function) noexcept {
#if defined(__linux__)
    struct Search {
        std::uintptr_t address;
        bool found;
    } search{reinterpret_cast<std::uintptr_t>(function), false};
    dl_iterate_phdr(
        [](dl_phdr_info* info, std::size_t, void* data) -> int {
            auto* s = static_cast<Search*>(data);
            for (int i = 0; i < info->dlpi_phnum; ++i) {
                const auto& segment = info->dlpi_phdr[i];
                if (segment.p_type != PT_LOAD || (segment.p_flags & PF_X) == 0) continue;
                const std::uintptr_t start = info->dlpi_addr + segment.p_vaddr;
                if (s->address >= start && s->address - start < segment.p_memsz) {
                    s->found = true;
                    return 1;
                }
            }
            return 0;
        },
        &search);
    return search.found;
#else
    return function != nullptr;
#endif
}

// The table of major 1 at `address` (walking prev_api), or nullptr and `why` it is declined.
const dlpack::DLPackExchangeAPI* trusted_exchange_api(const void* address, Decline* why) noexcept {
    // Each major version may change the layout after the header; prev_api chains to older ones.
    dlpack::DLPackExchangeAPIHeader header{};
    for (int hop = 0; hop < kMaxApiChain; ++hop) {
        if (hop > 0 && address == nullptr) {
            *why = Decline::no_major;  // the chain ended before major 1
            return nullptr;
        }
        if (!read_foreign(address, &header)) {
            *why = Decline::unreadable;
            return nullptr;
        }
        if (header.version.major == dlpack::kMajorVersion) {
            dlpack::DLPackExchangeAPI api{};
            if (!read_foreign(address, &api)) {
                *why = Decline::unreadable;
                return nullptr;
            }
            const bool usable = is_code(reinterpret_cast<const void*>(api.managed_tensor_from_py_object_no_sync)) &&
                                is_code(reinterpret_cast<const void*>(api.current_work_stream));
            *why = Decline::not_code;
            return usable ? static_cast<const dlpack::DLPackExchangeAPI*>(address) : nullptr;
        }
        address = header.prev_api;
    }
    *why = Decline::loop;  // a chain this long is a loop, or nothing a producer would build
    return nullptr;
}

}  // namespace

const dlpack::DLPackExchangeAPI* exchange_api_of(PyTypeObject* type, PyObject** holder, const char** declined_why) {
    const char* ignored = nullptr;
    if (!declined_why) declined_why = &ignored;
    *holder = nullptr;
    *declined_why = nullptr;
    const void* address = nullptr;
    DeclineForm form = DeclineForm::capsule;
    if (PyObject* capsule = type_attr(type, names.exchange_api)) {
        // 1.3: only a capsule of exactly this name is taken (None is absent; True or any other
        // object is declined).
        if (PyCapsule_IsValid(capsule, kExchangeApiCapsule)) {
            address = PyCapsule_GetPointer(capsule, kExchangeApiCapsule);
            *holder = capsule;
        } else {
            if (capsule != Py_None) *declined_why = declined(form, Decline::not_capsule);
            Py_DECREF(capsule);
        }
    }
    if (!address) {
        if (PyObject* number = type_attr(type, names.exchange_api_int)) {
            // 1.2: an address as a plain int, by the protocol's design. An exact int only: True is
            // an int to Python but no address, and an int subclass may be anything.
            if (PyLong_CheckExact(number)) {
                address = PyLong_AsVoidPtr(number);
                if (PyErr_Occurred()) {
                    PyErr_Clear();
                    address = nullptr;
                }
            }
            if (address) {
                *holder = number;
                form = DeclineForm::address;
            } else {
                // The 1.3 attribute's reason first, where it had one.
                if (number != Py_None && !*declined_why)
                    *declined_why = declined(DeclineForm::address, Decline::not_address);
                Py_DECREF(number);
            }
        }
    }
    Decline why{};
    const dlpack::DLPackExchangeAPI* api = address ? trusted_exchange_api(address, &why) : nullptr;
    if (!api) {
        if (address) *declined_why = declined(form, why);
        Py_XDECREF(*holder);
        *holder = nullptr;
    }
    return api;
}

namespace {

// The producer's current stream for a device, if it is a GPU (the exchange API's contract: no sync
// was done, so the data is ready in that stream's order); kNoStream elsewhere.
std::intptr_t exchange_ready_stream(const dlpack::DLPackExchangeAPI* api, dlpack::DLDevice device) {
    if (!Device{static_cast<DeviceType>(device.device_type), device.device_id}.is_cuda_device_or_managed())
        return kNoStream;
    void* stream = nullptr;
    if (api->current_work_stream(device.device_type, device.device_id, &stream) != 0)
        raise_current_or(PyExc_BufferError, "DLPack exchange API current_work_stream failed without saying why");
    // NULL is the driver's default (legacy) stream, which the protocols spell kLegacy (1).
    return cuda::StreamRef::from_handle(static_cast<cuda::CUstream>(stream)).encoded();
}

// torch's exchange API exports what Tensor.__dlpack__ refuses (measured on torch 2.11): a tensor
// that requires grad, and one with the conjugate bit set, whose memory holds the unconjugated
// values. Refused here as __dlpack__ refuses them, so that stridex in the middle neither exports
// what torch would not nor hands over wrong values; and refused for good (FinalRefusal), since
// torch's __cuda_array_interface__ would export the conjugate view's memory as it is. Only complex
// tensors can carry the bit, so only they pay for asking; and torch lets only floating-point and
// complex tensors require grad (any other dtype is a RuntimeError), so integer and boolean tensors
// are not asked at all (torch's getter is 30 to 50 ns of a 250 ns import on an H100 host). The
// getter is called through its C function where the type's probe found one (the shortcut
// torch_getter), else as getattr(obj, "requires_grad").
// The messages are torch's own (its test suite matches them), with what stridex adds.
void refuse_what_dlpack_refuses(PyObject* obj, const TypeEntry& entry, dlpack::DLDataType dtype) {
    const auto code = static_cast<DtypeCode>(dtype.code);
    if (code == DtypeCode::kInt || code == DtypeCode::kUInt || code == DtypeCode::kBool) return;
    const bool complex = code == DtypeCode::kComplex;
    nb::object grad = nb::steal(entry.requires_grad_get ? entry.requires_grad_get(obj, entry.requires_grad_closure)
                                                        : PyObject_GetAttr(obj, names.requires_grad));
    if (!grad.is_valid()) throw nb::python_error();
    if (grad.ptr() == Py_True)
        throw FinalRefusal(to_string(type_name(obj)) +
                           ": Can't export tensors that require gradient, use tensor.detach() (Tensor.__dlpack__ "
                           "refuses them too)");
    if (!complex) return;
    nb::object conj = nb::steal(PyObject_CallMethodNoArgs(obj, names.is_conj));
    if (!conj.is_valid()) throw nb::python_error();
    if (conj.ptr() == Py_True)
        throw FinalRefusal(to_string(type_name(obj)) +
                           ": Can't export tensors with the conjugate bit set (its memory holds the unconjugated "
                           "values; Tensor.__dlpack__ refuses them too), use tensor.resolve_conj()");
}

}  // namespace

bool borrows_exchange_tensors(const TypeEntry& entry) noexcept {
    return entry.exchange && entry.exchange->dltensor_from_py_object_no_sync &&
           entry.row->takes(Shortcut::torch_borrowed);
}

View import_exchange(PyObject* obj, const TypeEntry& entry, std::intptr_t& ready) {
    const dlpack::DLPackExchangeAPI* api = entry.exchange;
    const ProducerRow& row = *entry.row;
    if (borrows_exchange_tensors(entry)) {
        // The shortcut torch_borrowed (the row says a bare DLTensor, which has no flags, says all the
        // managed one would: torch tensors are never read-only).
        // Borrowed: the DLTensor describes obj's own memory for as long as obj lives, and the View's
        // owner is obj itself. A sub-byte dtype's padding is a flag, which only the managed tensor
        // carries: those few go the managed way below.
        dlpack::DLTensor borrowed{};
        if (api->dltensor_from_py_object_no_sync(obj, &borrowed) != 0)
            raise_refusal(obj, "__dlpack_c_exchange_api__ dltensor_from_py_object_no_sync()");
        if (borrowed.dtype.bits % 8 == 0) {
            if (row.exchange_skips_refusals) refuse_what_dlpack_refuses(obj, entry, borrowed.dtype);
            ready = exchange_ready_stream(api, borrowed.device);
            return dlpack::view_of(borrowed, owner_of(obj),
                                   dlpack::DLTensorRules{.writability = Writability::writable});
        }
    }
    dlpack::DLManagedTensorVersioned* tensor = nullptr;
    if (api->managed_tensor_from_py_object_no_sync(obj, &tensor) != 0)
        raise_refusal(obj, "__dlpack_c_exchange_api__ managed_tensor_from_py_object_no_sync()");
    if (tensor == nullptr)
        fail(ErrorKind::buffer, "the DLPack exchange API of ", type_name(obj), " returned no tensor");
    // The refusals and the stream come before import_managed takes the tensor (its deleter may run
    // any time after), so that a failure leaves only the tensor to release.
    ready = kNoStream;
    if (tensor->version.major == dlpack::kMajorVersion) {
        try {
            if (row.exchange_skips_refusals) refuse_what_dlpack_refuses(obj, entry, tensor->dl_tensor.dtype);
            ready = exchange_ready_stream(api, tensor->dl_tensor.device);
        } catch (...) {
            if (tensor->deleter) tensor->deleter(tensor);
            throw;
        }
    }
    // From here the View owns the deleter: any throw runs it exactly once.
    return dlpack::import_managed(tensor);
}

StreamRequest caller_stream_request(PyObject* obj, const TypeEntry& entry) {
    const dlpack::DLPackExchangeAPI* api = entry.exchange;  // checked when the type was probed
    if (api == nullptr || entry.dlpack_device == nullptr) return {};
    const Device device = call_dlpack_device(obj, entry);
    if (!device.is_cuda_device_or_managed()) return {};
    return {StreamRequest::Kind::on_stream, exchange_ready_stream(api, dlpack::dl_device_of(device))};
}

View import_dlpack_method(PyObject* obj, TypeEntry& entry, const StreamRequest& request, std::intptr_t& ready) {
    const ProducerRow& row = *entry.row;
    // __dlpack_device__ first, but only when the stream to send depends on it: the default request
    // sends None to every row that does not spell the legacy stream out, and host-only producers
    // take nothing but None.
    std::optional<Device> device;
    if (!row.host_only && entry.dlpack_device &&
        (request.kind != StreamRequest::Kind::by_default || row.needs_current_device || row.spells_default_stream()))
        device = call_dlpack_device(obj, entry);
    DlpackStream stream;
    if (row.host_only)
        stream.ready = kNoStream;  // NumPy & co: None (not even sent), nothing pending
    else
        dlpack_stream(request, device ? &*device : nullptr, row, stream);

    // torch >= 2.9 refuses tensors of a GPU other than the current one: make it current.
    std::optional<cuda::ContextGuard> current;
    if (row.needs_current_device && device && device->type == DeviceType::kCUDA && cuda::device_count() > device->id)
        current.emplace(device->id);
    nb::object capsule;
    try {
        capsule = call_dlpack(obj, entry, stream);
    } catch (nb::python_error& e) {
        // The producer's own refusal, final where its other protocols would export the array
        // without the check (the row says why). In its words, which test suites match.
        if (row.refusals_final && e.matches(PyExc_BufferError)) throw FinalRefusal(nb::str(e.value()).c_str());
        throw;
    }
    current.reset();

    ready = stream.ready;
    if (row.repair_negative_strides) repair_unsigned_strides(capsule.ptr());
    // JAX arrays are immutable, but its legacy capsules cannot say so (jax#19123).
    return consume_capsule(capsule.ptr(), /*raw=*/false, /*immutable=*/row.immutable);
}

View consume_capsule(PyObject* capsule, bool raw, bool immutable) {
    const ErrorKind wrong = raw ? ErrorKind::type : ErrorKind::buffer;
    if (!PyCapsule_CheckExact(capsule)) fail(wrong, "__dlpack__() must return a PyCapsule, found ", type_name(capsule));
    const char* name = PyCapsule_GetName(capsule);  // may be NULL, without an error
    // Decide by the NAME, not by what was asked: JAX, MLX and nanobind answer a versioned request
    // with a legacy capsule (cuda-python#285).
    const bool versioned = name && std::strcmp(name, kVersionedCapsule) == 0;
    if (versioned || (name && std::strcmp(name, kLegacyCapsule) == 0)) {
        void* pointer = PyCapsule_GetPointer(capsule, name);
        if (!pointer) throw nb::python_error();
        // Renamed before anything can fail: the producer's destructor skips "used_" capsules, so
        // from here on import_managed alone runs the deleter, exactly once, on every path.
        if (PyCapsule_SetName(capsule, versioned ? kUsedVersionedCapsule : kUsedLegacyCapsule) != 0)
            throw nb::python_error();
        // A capsule __dlpack__ just returned is ours alone: its destructor (which would only find
        // the "used_" name and return) need not run at all.
        if (!raw) PyCapsule_SetDestructor(capsule, nullptr);
        if (versioned) {
            View view = dlpack::import_managed(static_cast<dlpack::DLManagedTensorVersioned*>(pointer));
            // An immutable producer's unflagged versioned tensor: read-only by contract.
            if (immutable && !view.readonly()) return view.with_writability(Writability::immutable);
            return view;
        }
        return dlpack::import_managed(static_cast<dlpack::DLManagedTensor*>(pointer), immutable);
    }
    if (name && std::strncmp(name, kUsedLegacyCapsule, sizeof kUsedLegacyCapsule - 1) == 0) {
        // "consumed multiple times": the words CuPy's own error has, which its suite matches.
        const std::string message =
            "a DLPack capsule cannot be consumed multiple times: this one was already consumed (it is named '" +
            to_string(excerpt(name)) + "')";
        PyErr_SetString(g_consumed_capsule_error, message.c_str());
        throw nb::python_error();
    }
    if (raw)
        fail(ErrorKind::type,
             "expected a DLPack capsule named 'dltensor_versioned' or 'dltensor', found a capsule named '",
             excerpt(name ? name : "NULL"), "'");
    fail(ErrorKind::buffer, "__dlpack__() returned a capsule named '", excerpt(name ? name : "NULL"),
         "', expected 'dltensor_versioned' or 'dltensor'");
}

void bind_consumed_capsule_error(nb::module_& m) {
    nb::object bases = nb::steal(PyTuple_Pack(3, PyExc_BufferError, PyExc_ValueError, PyExc_RuntimeError));
    if (!bases.is_valid()) throw nb::python_error();
    g_consumed_capsule_error = PyErr_NewExceptionWithDoc(
        "stridex.ConsumedCapsuleError",
        "A DLPack capsule imported a second time (it is renamed used_dltensor[_versioned] when first imported).\n"
        "A BufferError, and also a ValueError and a RuntimeError: what CuPy's and torch's from_dlpack raise\n"
        "for the same mistake, so that code written against either catches it with stridex in the middle.",
        bases.ptr(), nullptr);
    if (!g_consumed_capsule_error) throw nb::python_error();
    // The global keeps its own reference (never released): the class must outlive anything that
    // removes the module attribute, since any later import may still raise it.
    m.attr("ConsumedCapsuleError") = nb::borrow(g_consumed_capsule_error);
}

}  // namespace stridex::python
