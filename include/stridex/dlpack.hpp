// DLPack 1.3 ABI, written from the specification (dmlc/dlpack, include/dlpack/dlpack.h docs),
// plus stridex's import into and export from a View.
//
// The structs live in stridex::dlpack so that including dlpack.h as well does not clash; they are
// layout-identical to the C definitions (checked below), so pointers may be cast between the two.
#pragma once

#include <cstddef>
#include <cstdint>

#include "stridex/view.hpp"

namespace stridex::dlpack {

inline constexpr std::uint32_t kMajorVersion = 1;
inline constexpr std::uint32_t kMinorVersion = 3;  // the minor stridex implements and exports

// PyCapsule names (the Python specification of DLPack). A consumer renames a capsule it took to the
// "used_" name, so that the capsule's destructor knows the consumer now owns the tensor.
inline constexpr char kVersionedCapsule[] = "dltensor_versioned";
inline constexpr char kLegacyCapsule[] = "dltensor";
inline constexpr char kUsedVersionedCapsule[] = "used_dltensor_versioned";
inline constexpr char kUsedLegacyCapsule[] = "used_dltensor";
inline constexpr char kExchangeApiCapsule[] = "dlpack_exchange_api";  // __dlpack_c_exchange_api__

struct DLPackVersion {
    std::uint32_t major;
    std::uint32_t minor;
};

// DLDeviceType and DLDataTypeCode values are stridex::DeviceType and stridex::DtypeCode.
struct DLDevice {
    std::int32_t device_type;  // an int32 enum in C
    std::int32_t device_id;
};

struct DLDataType {
    std::uint8_t code;
    std::uint8_t bits;    // bits of one lane; sub-byte types are packed unless flagged padded
    std::uint16_t lanes;  // 1 for scalars
};

struct DLTensor {
    void* data;  // base pointer; element 0 is at data + byte_offset
    DLDevice device;
    std::int32_t ndim;
    DLDataType dtype;
    std::int64_t* shape;    // may be NULL only when ndim == 0 (1.3)
    std::int64_t* strides;  // in elements; NULL means C order (legacy and minor < 2 only)
    std::uint64_t byte_offset;
};

struct DLManagedTensor {
    DLTensor dl_tensor;
    void* manager_ctx;
    void (*deleter)(DLManagedTensor* self);  // may be NULL; frees manager_ctx and the struct
};

// Bits of DLManagedTensorVersioned::flags.
inline constexpr std::uint64_t kFlagReadOnly = 1ULL << 0;
inline constexpr std::uint64_t kFlagIsCopied = 1ULL << 1;  // consumer is the sole owner
inline constexpr std::uint64_t kFlagIsSubbyteTypePadded = 1ULL << 2;

// A Device and a Dtype as DLPack writes them: the one conversion each, for every export (capsules,
// the exchange API's borrowed tensors) and every question put to a producer (current_work_stream).
constexpr DLDevice dl_device_of(Device device) noexcept {
    return DLDevice{static_cast<std::int32_t>(device.type), device.id};
}
constexpr DLDataType dl_dtype_of(Dtype dtype) noexcept {
    return DLDataType{static_cast<std::uint8_t>(dtype.code), dtype.bits, dtype.lanes};
}

// What the flags say of a view, both ways: every importer and exporter of versioned tensors (and
// the casters' C description, caster_api.hpp) goes through these two.
inline std::uint64_t flags_of(const View& view) noexcept {
    return (view.readonly() ? kFlagReadOnly : 0) | (view.subbyte_padded() ? kFlagIsSubbyteTypePadded : 0);
}
inline Writability writability_of_flags(std::uint64_t flags) noexcept {
    return (flags & kFlagReadOnly) != 0 ? Writability::readonly : Writability::writable;
}
inline bool subbyte_padded_of_flags(std::uint64_t flags) noexcept { return (flags & kFlagIsSubbyteTypePadded) != 0; }

struct DLManagedTensorVersioned {
    DLPackVersion version;  // this prefix (version, manager_ctx, deleter, flags) is frozen
    void* manager_ctx;
    void (*deleter)(DLManagedTensorVersioned* self);
    std::uint64_t flags;
    DLTensor dl_tensor;
};

// The C exchange API (1.2 as an int on the type, 1.3 as a "dlpack_exchange_api" capsule): C
// functions a consumer calls instead of __dlpack__, with the GIL held. Every slot is a C entry
// point: it must not throw (C++ exceptions are caught and translated inside), returns 0 on
// success and -1 on failure, with a Python exception set (except where a slot takes an error
// callback instead). "NoSync" slots do no stream synchronization: the consumer orders its stream
// after current_work_stream itself.

// Reports an error from managed_tensor_allocator: `kind` is a Python exception name
// ("MemoryError", "BufferError"...), `message` its text. Called at most once per failure.
using SetErrorFn = void (*)(void* error_ctx, const char* kind, const char* message);
// Allocates a new tensor shaped like `prototype` (its data pointer ignored) on the same device.
// 0: *out is a new tensor the caller owns (it calls out->deleter exactly once); -1: nothing was
// allocated, and the error was reported through set_error(error_ctx, kind, message).
using ManagedTensorAllocator = int (*)(DLTensor* prototype, DLManagedTensorVersioned** out, void* error_ctx,
                                       SetErrorFn set_error);
// 0: *out is a new tensor viewing py_object's memory, owned by the caller (it calls out->deleter
// exactly once; the tensor keeps py_object's memory alive). -1: Python exception set, *out unset.
using ManagedTensorFromPyObjectNoSync = int (*)(void* py_object, DLManagedTensorVersioned** out);
// Steals `tensor` in every outcome. 0: *out_py_object is a new reference to a Python array that
// owns it (its deleter runs when that array dies). -1: Python exception set, and the deleter has
// run already.
using ManagedTensorToPyObjectNoSync = int (*)(DLManagedTensorVersioned* tensor, void** out_py_object);
// 0: *out describes py_object's memory without any ownership (no deleter, no reference): valid
// only while the caller keeps py_object alive and unchanged. -1: Python exception set. Optional:
// the only slot that may be NULL.
using DLTensorFromPyObjectNoSync = int (*)(void* py_object, DLTensor* out);
// 0: *out_stream is the producer's current work stream on that device (a CUstream on CUDA; NULL
// means the legacy default stream, or no stream on devices without streams). -1: Python exception
// set.
using CurrentWorkStream = int (*)(std::int32_t device_type, std::int32_t device_id, void** out_stream);

struct DLPackExchangeAPIHeader {
    DLPackVersion version;              // of the API struct: a consumer uses it only for major 1
    DLPackExchangeAPIHeader* prev_api;  // chain to an API of an older major version, or NULL
};

// Static for the life of the process: neither side frees it, and the capsule has no destructor.
struct DLPackExchangeAPI {
    DLPackExchangeAPIHeader header;
    ManagedTensorAllocator managed_tensor_allocator;
    ManagedTensorFromPyObjectNoSync managed_tensor_from_py_object_no_sync;
    ManagedTensorToPyObjectNoSync managed_tensor_to_py_object_no_sync;
    DLTensorFromPyObjectNoSync dltensor_from_py_object_no_sync;  // the only slot that may be NULL
    CurrentWorkStream current_work_stream;
};

// The C ABI on LP64 platforms, as the specification lays it out.
static_assert(sizeof(DLPackVersion) == 8);
static_assert(sizeof(DLDevice) == 8 && sizeof(DLDataType) == 4);
static_assert(offsetof(DLTensor, data) == 0 && offsetof(DLTensor, device) == 8);
static_assert(offsetof(DLTensor, ndim) == 16 && offsetof(DLTensor, dtype) == 20);
static_assert(offsetof(DLTensor, shape) == 24 && offsetof(DLTensor, strides) == 32);
static_assert(offsetof(DLTensor, byte_offset) == 40 && sizeof(DLTensor) == 48);
static_assert(offsetof(DLManagedTensor, manager_ctx) == 48 && offsetof(DLManagedTensor, deleter) == 56);
static_assert(sizeof(DLManagedTensor) == 64);
static_assert(offsetof(DLManagedTensorVersioned, manager_ctx) == 8);
static_assert(offsetof(DLManagedTensorVersioned, deleter) == 16);
static_assert(offsetof(DLManagedTensorVersioned, flags) == 24);
static_assert(offsetof(DLManagedTensorVersioned, dl_tensor) == 32);
static_assert(sizeof(DLManagedTensorVersioned) == 80);
static_assert(sizeof(DLPackExchangeAPIHeader) == 16 && sizeof(DLPackExchangeAPI) == 56);
static_assert(sizeof(DLDataType) == sizeof(Dtype) && sizeof(DLDevice) == sizeof(Device));

// ---- import -----------------------------------------------------------------------------------
// Both take ownership of `tensor` in every outcome: on success the View's owner runs the deleter
// when the last View goes; on any error the deleter has run exactly once before the throw.
// Versioned tensors say writable or read-only (READ_ONLY). Legacy tensors carry no flags: their
// views are Writability::unknown, or ::immutable where the caller knows the producer's data is
// immutable (JAX exports immutable arrays through legacy capsules).
View import_managed(DLManagedTensorVersioned* tensor);
View import_managed(DLManagedTensor* tensor, bool immutable = false);

// A borrowed DLTensor (exchange API's dltensor_from_py_object_no_sync): validated like a
// versioned 1.3 tensor; `owner` keeps the memory alive.
struct DLTensorRules {
    bool null_strides_mean_c_order = false;  // legacy and versioned minor < 2
    Writability writability = Writability::writable;
    bool subbyte_padded = false;
};
View view_of(const DLTensor& tensor, Owner owner, DLTensorRules rules);

// ---- export -----------------------------------------------------------------------------------
// The returned tensor holds a reference to the view's owner, released exactly once by its deleter
// (from any thread). Shape and strides are always explicit; data addresses element 0 directly
// (byte_offset 0), since torch, Warp and older cuda.core ignore byte_offset.
// READ_ONLY comes from the view; pass kFlagIsCopied when the view is a fresh copy.
DLManagedTensorVersioned* export_versioned(const View& view, std::uint64_t extra_flags = 0);
// The view described in `t`, as every export describes it: shape then strides written to `dims`
// (room for 2 * ndim values), data at element 0 (byte_offset 0). Nothing is kept alive.
void describe(const View& view, DLTensor& t, std::int64_t* dims) noexcept;
// Legacy tensors cannot say "read-only", so a view whose producer said read-only is refused (Error
// kind buffer), as that producer refuses; immutable and unknown views go out unflagged, as their
// producers' own legacy tensors do.
DLManagedTensor* export_legacy(const View& view);

}  // namespace stridex::dlpack
