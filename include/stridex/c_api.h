/* stridex from C: import, export and copy of DLPack tensors, with stridex's checks, for consumers in
 * C, Rust, Julia... and no Python. C11 (and C++); link libstridex_c (CMake: stridex::c).
 *
 *     #include <stridex/c_api.h>
 *
 *     int64_t dims[2 * 8];
 *     StridexArray a = {dims, 8};                    // room for 8 axes
 *     if (stridex_import_dlpack(tensor, &a) != STRIDEX_OK)
 *         fprintf(stderr, "%s\n", stridex_last_error());
 *     ... a.tensor.data, a.tensor.shape, a.tensor.strides (in elements), a.tensor.device ...
 *     stridex_release(&a);                           // the producer's deleter runs
 *
 * What the library adds to reading a DLTensor yourself is the rules stridex.view() applies
 * (docs/import.md, docs/core.md): every DLPack field checked (dtype codes and widths, extents and
 * strides, the byte span fitting the address space, NULL data only when empty, sub-byte packing),
 * strides always explicit, byte_offset folded into data, the deleter run exactly once whatever
 * happens; on export the device checked against the memory itself through the CUDA driver (a GPU
 * pointer never leaves tagged as host memory); and copies between any two strided arrays on the
 * CPU or a GPU (docs/copy.md).
 *
 * The description is the caster API's (include/stridex/python/caster_api.hpp, StridexArray of
 * import_array): the same fields at the same offsets, so a description the Python casters receive
 * and one this library fills read alike. That table is the stridex wheel's private contract with its
 * casters (its slots take Python objects); this header is the public one, without Python.
 *
 * Every function returns STRIDEX_OK (0) or an error code; the error's message, naming what was
 * expected and what was found, is stridex_last_error() on the calling thread until its next call.
 * Functions never throw and may be called from any thread.
 *
 * Versioning: STRIDEX_C_API_MAJOR changes when a function or struct changes incompatibly; MINOR
 * when functions are added. stridex_c_api_version() says what the loaded library implements. */
#ifndef STRIDEX_C_API_H_
#define STRIDEX_C_API_H_

#include <stddef.h>
#include <stdint.h>

#define STRIDEX_C_API_MAJOR 1
#define STRIDEX_C_API_MINOR 0

#if defined(__GNUC__)
#define STRIDEX_C_EXPORT __attribute__((visibility("default")))
#else
#define STRIDEX_C_EXPORT
#endif

/* ---- DLPack 1.3, the declarations this API uses, from the specification (dmlc/dlpack). Under
 * dlpack.h's own include guard: include dlpack.h first to use its full header instead (the layout
 * is the same); include it after this header and it is skipped. */
#ifndef DLPACK_DLPACK_H_
#define DLPACK_DLPACK_H_

#define DLPACK_MAJOR_VERSION 1
#define DLPACK_MINOR_VERSION 3

#ifdef __cplusplus
#define DLPACK_EXTERN_C extern "C"
#else
#define DLPACK_EXTERN_C
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    uint32_t major;
    uint32_t minor;
} DLPackVersion;

typedef enum {
    kDLCPU = 1,
    kDLCUDA = 2,
    kDLCUDAHost = 3,
    kDLOpenCL = 4,
    kDLVulkan = 7,
    kDLMetal = 8,
    kDLVPI = 9,
    kDLROCM = 10,
    kDLROCMHost = 11,
    kDLExtDev = 12,
    kDLCUDAManaged = 13,
    kDLOneAPI = 14,
    kDLWebGPU = 15,
    kDLHexagon = 16,
    kDLMAIA = 17,
    kDLTrn = 18
} DLDeviceType;

typedef struct {
    DLDeviceType device_type;
    int32_t device_id;
} DLDevice;

typedef enum {
    kDLInt = 0,
    kDLUInt = 1,
    kDLFloat = 2,
    kDLOpaqueHandle = 3,
    kDLBfloat = 4,
    kDLComplex = 5,
    kDLBool = 6,
    kDLFloat8_e3m4 = 7,
    kDLFloat8_e4m3 = 8,
    kDLFloat8_e4m3b11fnuz = 9,
    kDLFloat8_e4m3fn = 10,
    kDLFloat8_e4m3fnuz = 11,
    kDLFloat8_e5m2 = 12,
    kDLFloat8_e5m2fnuz = 13,
    kDLFloat8_e8m0fnu = 14,
    kDLFloat6_e2m3fn = 15,
    kDLFloat6_e3m2fn = 16,
    kDLFloat4_e2m1fn = 17
} DLDataTypeCode;

typedef struct {
    uint8_t code;   /* a DLDataTypeCode */
    uint8_t bits;   /* of one lane */
    uint16_t lanes; /* 1 for scalars */
} DLDataType;

typedef struct {
    void* data; /* element 0 is at data + byte_offset */
    DLDevice device;
    int32_t ndim;
    DLDataType dtype;
    int64_t* shape;
    int64_t* strides; /* in elements; NULL means C order (only before minor 2) */
    uint64_t byte_offset;
} DLTensor;

typedef struct DLManagedTensor {
    DLTensor dl_tensor;
    void* manager_ctx;
    void (*deleter)(struct DLManagedTensor* self);
} DLManagedTensor;

#define DLPACK_FLAG_BITMASK_READ_ONLY (1UL << 0UL)
#define DLPACK_FLAG_BITMASK_IS_COPIED (1UL << 1UL)
#define DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED (1UL << 2UL)

typedef struct DLManagedTensorVersioned {
    DLPackVersion version;
    void* manager_ctx;
    void (*deleter)(struct DLManagedTensorVersioned* self);
    uint64_t flags;
    DLTensor dl_tensor;
} DLManagedTensorVersioned;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* DLPACK_DLPACK_H_ */

#ifdef __cplusplus
extern "C" {
#endif

/* ---- stridex ------------------------------------------------------------------------------- */

/* Error codes: the kinds of stridex::Error (include/stridex/error.hpp), and the Python exception
 * each becomes in the Python face. */
typedef enum {
    STRIDEX_OK = 0,
    STRIDEX_ERROR_BUFFER = 1,      /* this exchange refused (BufferError): e.g. more axes than room */
    STRIDEX_ERROR_TYPE = 2,        /* wrong kind of value or dtype (TypeError) */
    STRIDEX_ERROR_VALUE = 3,       /* a malformed value: bad shape, strides, device (ValueError) */
    STRIDEX_ERROR_INDEX = 4,       /* an index out of range (IndexError) */
    STRIDEX_ERROR_CUDA = 5,        /* a CUDA driver failure, or CUDA unavailable (RuntimeError) */
    STRIDEX_ERROR_UNSUPPORTED = 6, /* valid by DLPack, not handled by stridex (BufferError) */
    STRIDEX_ERROR_MEMORY = 7,      /* an allocation failed (MemoryError) */
    STRIDEX_ERROR_ARGUMENT = 8,    /* a NULL or otherwise unusable argument to this API */
    STRIDEX_ERROR_UNKNOWN = 9      /* anything else */
} StridexStatus;

/* One array, described in DLPack's terms, and what keeps it alive. The caller sets `dims` and
 * `max_ndim` before an import; the library sets the rest. For export and copy the caller fills it.
 *   tensor: shape and strides point into dims (shape, then strides: 2 * ndim values), strides in
 *     elements, data addresses element 0 (byte_offset 0) after an import;
 *   flags: DLPACK_FLAG_BITMASK_READ_ONLY, DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED;
 *   stream: the CUDA stream the data is ready on, in the protocol encoding (-1 nothing pending,
 *     1 legacy default stream, 2 per-thread default stream, else a CUstream; 0, what a
 *     zero-initialised struct holds, reads as -1); -1 after an import; not carried by an export (a
 *     DLPack tensor has no stream: make the data ready before handing the tensor on);
 *   release(context): the keep-alive, run exactly once (stridex_release), from any thread; NULL
 *     when nothing needs releasing. */
typedef struct StridexArray {
    int64_t* dims;    /* (caller) room for 2 * max_ndim values */
    int32_t max_ndim; /* (caller) the most axes the caller takes */
    int32_t reserved; /* 0 */
    DLTensor tensor;
    uint64_t flags;
    intptr_t stream;
    void (*release)(void* context);
    void* context;
} StridexArray;

/* (STRIDEX_C_API_MAJOR << 16) | STRIDEX_C_API_MINOR of the loaded library. */
STRIDEX_C_EXPORT uint32_t stridex_c_api_version(void);

/* The message of this thread's last failed call ("" when there was none). Valid until the next
 * call into this API on the same thread. */
STRIDEX_C_EXPORT const char* stridex_last_error(void);

/* A versioned DLPack tensor, checked by stridex's rules, described in *out; the tensor's deleter
 * becomes out->release. Takes ownership of `tensor` in every outcome: on failure its deleter has
 * run (exactly once) and out->release is NULL. A tensor of more than out->max_ndim axes is
 * STRIDEX_ERROR_BUFFER. Tensors of a major version other than 1 are refused (DLPack's rule). */
STRIDEX_C_EXPORT int stridex_import_dlpack(DLManagedTensorVersioned* tensor, StridexArray* out);

/* The same for a legacy (unversioned) tensor, which cannot say read-only: out->flags is 0. */
STRIDEX_C_EXPORT int stridex_import_dlpack_legacy(DLManagedTensor* tensor, StridexArray* out);

/* A new versioned DLPack tensor (version 1.3) of the array `array` describes, for any DLPack
 * consumer; its deleter runs array->release once. `array->tensor.strides` may be NULL (C order)
 * and byte_offset non-zero; dims and max_ndim are not read. The description is checked as an
 * import is, and its device against the memory itself: with a CUDA driver the device is what the
 * driver says the pointer is, and a tensor claiming otherwise (a GPU pointer tagged kDLCPU) is
 * STRIDEX_ERROR_VALUE; without one, a CUDA device claim is. Takes over array->release in every
 * outcome (set to NULL here): on failure it has run. */
STRIDEX_C_EXPORT int stridex_export_dlpack(StridexArray* array, DLManagedTensorVersioned** out);

/* Copies the elements of `src` into `dst`, element (i, j, ...) to (i, j, ...): one shape, one
 * dtype (no casting), any strides and devices (CPU, CUDA device, pinned, managed; docs/copy.md).
 * dst must be writable and address no element twice. Queued on `stream` (the protocol encoding;
 * -1: done before returning) after the work pending on src->stream and dst->stream; *ready (may
 * be NULL) is the stream dst is ready on, -1 when the copy completed before returning. Borrows
 * both descriptions: their release callbacks are not run. */
STRIDEX_C_EXPORT int stridex_copy(const StridexArray* dst, const StridexArray* src, intptr_t stream, intptr_t* ready);

/* Runs array->release(array->context) if set, and clears both: safe to call twice. */
STRIDEX_C_EXPORT void stridex_release(StridexArray* array);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* STRIDEX_C_API_H_ */
