// libstridex_c: the C API (include/stridex/c_api.h) over the core and the CUDA layer. No Python:
// every entry point is a C function that catches what the C++ layers throw and says it through a
// status code and stridex_last_error().
#include "stridex/c_api.h"

#include <cstddef>
#include <exception>
#include <new>
#include <optional>
#include <string>
#include <utility>

#include "stridex/cuda/copy.hpp"
#include "stridex/cuda/from_pointer.hpp"
#include "stridex/dlpack.hpp"
#include "stridex/error.hpp"
#include "stridex/view.hpp"

namespace stridex::c_api {
namespace {

namespace dl = stridex::dlpack;

// The C declarations are the C++ ones (dlpack.hpp checks its own against the specification), and
// StridexArray is the caster API's (caster_api.hpp), field for field.
static_assert(sizeof(::DLTensor) == sizeof(dl::DLTensor) && offsetof(::DLTensor, byte_offset) == 40);
static_assert(sizeof(::DLManagedTensorVersioned) == sizeof(dl::DLManagedTensorVersioned));
static_assert(offsetof(::DLManagedTensorVersioned, dl_tensor) == offsetof(dl::DLManagedTensorVersioned, dl_tensor));
static_assert(sizeof(::DLManagedTensor) == sizeof(dl::DLManagedTensor));
static_assert(DLPACK_FLAG_BITMASK_READ_ONLY == dl::kFlagReadOnly &&
              DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED == dl::kFlagIsSubbyteTypePadded);
static_assert(offsetof(StridexArray, max_ndim) == 8 && offsetof(StridexArray, tensor) == 16);
static_assert(offsetof(StridexArray, flags) == 64 && offsetof(StridexArray, stream) == 72);
static_assert(offsetof(StridexArray, release) == 80 && sizeof(StridexArray) == 96);

thread_local std::string last_error;

int status_of(ErrorKind kind) noexcept {
    switch (kind) {
        case ErrorKind::buffer: return STRIDEX_ERROR_BUFFER;
        case ErrorKind::type: return STRIDEX_ERROR_TYPE;
        case ErrorKind::value: return STRIDEX_ERROR_VALUE;
        case ErrorKind::index: return STRIDEX_ERROR_INDEX;
        case ErrorKind::cuda: return STRIDEX_ERROR_CUDA;
        case ErrorKind::unsupported: return STRIDEX_ERROR_UNSUPPORTED;
        case ErrorKind::memory: return STRIDEX_ERROR_MEMORY;
    }
    return STRIDEX_ERROR_UNKNOWN;
}

// Thrown for a NULL or unusable argument of the API itself.
struct ArgumentError {
    std::string message;
};

// Runs `body`, turning whatever it throws into a status and this thread's message.
template <class Body>
int guarded(Body&& body) noexcept {
    try {
        last_error.clear();
        body();
        return STRIDEX_OK;
    } catch (const ArgumentError& e) {
        last_error = e.message;
        return STRIDEX_ERROR_ARGUMENT;
    } catch (const Error& e) {
        last_error = e.what();
        return status_of(e.kind());
    } catch (const std::bad_alloc&) {
        last_error = "out of memory";
        return STRIDEX_ERROR_MEMORY;
    } catch (const std::exception& e) {
        last_error = e.what();
        return STRIDEX_ERROR_UNKNOWN;
    } catch (...) {
        last_error = "unknown error";
        return STRIDEX_ERROR_UNKNOWN;
    }
}

// An imported View written into the caller's description, its owner handed over as the callback.
void describe_into(View view, StridexArray& out) {
    if (view.ndim() > out.max_ndim)
        fail(ErrorKind::buffer, "the caller takes arrays of at most ", out.max_ndim, " axes, found ", view.ndim());
    dl::describe(view, reinterpret_cast<dl::DLTensor&>(out.tensor), out.dims);
    out.flags = dl::flags_of(view);
    out.stream = view.stream();
    Owner keep = std::move(view).take_owner();
    const Owner::Callback callback = keep.into_callback();
    out.release = callback.release;
    out.context = callback.context;
}

void check_room(const StridexArray* out) {
    if (out == nullptr) throw ArgumentError{"stridex_import_dlpack: NULL StridexArray"};
    if (out->max_ndim < 0)
        throw ArgumentError{"stridex_import_dlpack: max_ndim must be >= 0, found " + std::to_string(out->max_ndim)};
    if (out->max_ndim > 0 && out->dims == nullptr)
        throw ArgumentError{"stridex_import_dlpack: NULL dims for max_ndim " + std::to_string(out->max_ndim)};
}

// A caller's description as a View borrowing (or, with `owner`, owning) its memory, checked as an
// import is: strides NULL mean C order.
View view_of_description(const StridexArray& a, Owner owner, const char* what) {
    if (a.tensor.ndim > 0 && a.tensor.shape == nullptr)
        throw ArgumentError{std::string(what) + ": NULL shape for " + std::to_string(a.tensor.ndim) + " axes"};
    View view = dl::view_of(reinterpret_cast<const dl::DLTensor&>(a.tensor), std::move(owner),
                            dl::DLTensorRules{.null_strides_mean_c_order = true,
                                              .writability = dl::writability_of_flags(a.flags),
                                              .subbyte_padded = dl::subbyte_padded_of_flags(a.flags)});
    // 0, what a zero-initialised struct holds, reads as nothing pending, as -1 does.
    if (a.stream < kNoStream) fail(ErrorKind::value, what, ": stream ", a.stream, " is not a stream value");
    view.set_stream(a.stream == 0 ? kNoStream : a.stream);
    return view;
}

// stridex_import_dlpack and its legacy twin: one body over the managed tensor's kind (`Managed` is
// stridex's own declaration of the C header's `CTensor`, checked layout-equal above).
template <class Managed, class CTensor>
int import_dlpack(CTensor* tensor, StridexArray* out) {
    if (out != nullptr) {
        out->release = nullptr;
        out->context = nullptr;
    }
    return guarded([&] {
        try {
            check_room(out);
        } catch (...) {
            if (tensor != nullptr && tensor->deleter != nullptr) tensor->deleter(tensor);  // ours in every outcome
            throw;
        }
        // The View owns the tensor from here: if anything below throws, its deleter runs once.
        describe_into(dlpack::import_managed(reinterpret_cast<Managed*>(tensor)), *out);
    });
}

}  // namespace
}  // namespace stridex::c_api

using namespace stridex;
using namespace stridex::c_api;

extern "C" {

uint32_t stridex_c_api_version(void) { return (uint32_t{STRIDEX_C_API_MAJOR} << 16) | STRIDEX_C_API_MINOR; }

const char* stridex_last_error(void) { return last_error.c_str(); }

int stridex_import_dlpack(DLManagedTensorVersioned* tensor, StridexArray* out) {
    return import_dlpack<dlpack::DLManagedTensorVersioned>(tensor, out);
}

int stridex_import_dlpack_legacy(DLManagedTensor* tensor, StridexArray* out) {
    return import_dlpack<dlpack::DLManagedTensor>(tensor, out);
}

int stridex_export_dlpack(StridexArray* array, DLManagedTensorVersioned** out) {
    if (out != nullptr) *out = nullptr;
    return guarded([&] {
        if (array == nullptr) throw ArgumentError{"stridex_export_dlpack: NULL StridexArray"};
        // The keep-alive is ours from here, in every outcome.
        void (*release)(void*) = std::exchange(array->release, nullptr);
        void* context = std::exchange(array->context, nullptr);
        Owner owner;
        if (release != nullptr) {
            try {
                // A C function pointer: C code cannot throw through it, so it is taken as noexcept.
                owner = Owner::from_action([release, context]() noexcept { release(context); });
            } catch (...) {
                release(context);
                throw;
            }
        }
        if (out == nullptr) throw ArgumentError{"stridex_export_dlpack: NULL output pointer"};
        const View view = view_of_description(*array, std::move(owner), "stridex_export_dlpack");
        // The device from the memory, the claim only a check (founding bug report 5, docs/protocols.md).
        if (!view.layout().empty()) (void)cuda::resolve_device(view.ptr(), view.byte_span(), view.device());
        *out = reinterpret_cast<DLManagedTensorVersioned*>(dlpack::export_versioned(view));
    });
}

int stridex_copy(const StridexArray* dst, const StridexArray* src, intptr_t stream, intptr_t* ready) {
    return guarded([&] {
        if (dst == nullptr || src == nullptr) throw ArgumentError{"stridex_copy: NULL StridexArray"};
        if (stream == 0 || stream < kNoStream)
            throw ArgumentError{"stridex_copy: stream " + std::to_string(stream) +
                                " is not a stream value (-1 none, 1 legacy, 2 per-thread, else a CUstream)"};
        const View to = view_of_description(*dst, Owner(), "stridex_copy (dst)");
        const View from = view_of_description(*src, Owner(), "stridex_copy (src)");
        const std::intptr_t done = stridex::copy(to, from, stream);
        if (ready != nullptr) *ready = done;
    });
}

void stridex_release(StridexArray* array) {
    if (array == nullptr || array->release == nullptr) return;
    void (*release)(void*) = std::exchange(array->release, nullptr);
    release(std::exchange(array->context, nullptr));
}

}  // extern "C"
