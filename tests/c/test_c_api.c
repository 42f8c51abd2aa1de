/* The C API from C (include/stridex/c_api.h): import, export and copy, every error path with its
 * status and message, and every keep-alive run exactly once. Plain C11, no test framework: each
 * CHECK prints what failed, and the exit status is the number of failures. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stridex/c_api.h"

static int failures = 0;

#define CHECK(cond) \
    do { \
        if (!(cond)) { \
            fprintf(stderr, "%s:%d: CHECK(%s) failed; last error: %s\n", __FILE__, __LINE__, #cond, \
                    stridex_last_error()); \
            ++failures; \
        } \
    } while (0)

#define CHECK_ERROR(call, status, words) \
    do { \
        int rc_ = (call); \
        if (rc_ != (status) || strstr(stridex_last_error(), (words)) == NULL) { \
            fprintf(stderr, "%s:%d: %s returned %d (expected %d), message \"%s\" (expected to contain \"%s\")\n", \
                    __FILE__, __LINE__, #call, rc_, (int)(status), stridex_last_error(), (words)); \
            ++failures; \
        } \
    } while (0)

/* A producer's tensor: a versioned or legacy DLPack struct over a caller's buffer, whose deleter
 * counts its calls. */
typedef struct {
    DLManagedTensorVersioned versioned;
    DLManagedTensor legacy;
    int64_t shape[4];
    int64_t strides[4];
    int deleted;
} Producer;

static void delete_versioned(DLManagedTensorVersioned* self) { ++((Producer*)self->manager_ctx)->deleted; }
static void delete_legacy(DLManagedTensor* self) { ++((Producer*)self->manager_ctx)->deleted; }

static DLTensor host_tensor(void* data, int32_t ndim, const int64_t* shape, const int64_t* strides, Producer* p,
                            uint8_t code, uint8_t bits) {
    DLTensor t;
    int32_t i;
    for (i = 0; i < ndim; ++i) {
        p->shape[i] = shape[i];
        p->strides[i] = strides ? strides[i] : 0;
    }
    t.data = data;
    t.device.device_type = kDLCPU;
    t.device.device_id = 0;
    t.ndim = ndim;
    t.dtype.code = code;
    t.dtype.bits = bits;
    t.dtype.lanes = 1;
    t.shape = p->shape;
    t.strides = strides ? p->strides : NULL;
    t.byte_offset = 0;
    return t;
}

static DLManagedTensorVersioned* versioned(Producer* p, DLTensor t, uint64_t flags) {
    memset(p, 0, sizeof(DLManagedTensorVersioned));
    p->versioned.version.major = DLPACK_MAJOR_VERSION;
    p->versioned.version.minor = DLPACK_MINOR_VERSION;
    p->versioned.manager_ctx = p;
    p->versioned.deleter = delete_versioned;
    p->versioned.flags = flags;
    p->versioned.dl_tensor = t;
    p->deleted = 0;
    return &p->versioned;
}

static int released = 0;
static void release_counter(void* context) { released += *(int*)context; }

static void test_version(void) {
    CHECK(stridex_c_api_version() == ((STRIDEX_C_API_MAJOR << 16) | STRIDEX_C_API_MINOR));
    CHECK(strcmp(stridex_last_error(), "") == 0);
}

static void test_import_versioned(void) {
    float data[6] = {0, 1, 2, 3, 4, 5};
    const int64_t shape[2] = {2, 3}, strides[2] = {1, 2}; /* F order */
    int64_t dims[2 * 4];
    StridexArray a = {dims, 4, 0, {0}, 0, 0, NULL, NULL};
    Producer p;
    DLManagedTensorVersioned* t = versioned(&p, host_tensor(data, 2, shape, strides, &p, kDLFloat, 32),
                                            DLPACK_FLAG_BITMASK_READ_ONLY);
    t->dl_tensor.byte_offset = 0;
    CHECK(stridex_import_dlpack(t, &a) == STRIDEX_OK);
    CHECK(a.tensor.data == (void*)data && a.tensor.byte_offset == 0);
    CHECK(a.tensor.ndim == 2 && a.tensor.shape == dims && a.tensor.strides == dims + 2);
    CHECK(dims[0] == 2 && dims[1] == 3 && dims[2] == 1 && dims[3] == 2);
    CHECK(a.tensor.dtype.code == kDLFloat && a.tensor.dtype.bits == 32 && a.tensor.dtype.lanes == 1);
    CHECK(a.tensor.device.device_type == kDLCPU && a.tensor.device.device_id == 0);
    CHECK(a.flags == DLPACK_FLAG_BITMASK_READ_ONLY);
    CHECK(a.stream == -1); /* host memory: nothing pending */
    CHECK(a.release != NULL);
    CHECK(p.deleted == 0); /* the description keeps the producer's memory alive */
    stridex_release(&a);
    CHECK(p.deleted == 1 && a.release == NULL);
    stridex_release(&a); /* twice is harmless */
    CHECK(p.deleted == 1);
}

static void test_import_folds_the_byte_offset(void) {
    double data[4] = {0, 1, 2, 3};
    const int64_t shape[1] = {3}, strides[1] = {1};
    int64_t dims[2];
    StridexArray a = {dims, 1, 0, {0}, 0, 0, NULL, NULL};
    Producer p;
    DLManagedTensorVersioned* t = versioned(&p, host_tensor(data, 1, shape, strides, &p, kDLFloat, 64), 0);
    t->dl_tensor.byte_offset = sizeof(double);
    CHECK(stridex_import_dlpack(t, &a) == STRIDEX_OK);
    CHECK(a.tensor.data == (void*)(data + 1) && a.tensor.byte_offset == 0);
    CHECK(((const double*)a.tensor.data)[2] == 3.0);
    CHECK(a.flags == 0);
    stridex_release(&a);
    CHECK(p.deleted == 1);
}

static void test_import_refusals_run_the_deleter_once(void) {
    float data[4] = {0};
    int64_t dims[2 * 4];
    StridexArray a = {dims, 4, 0, {0}, 0, 0, NULL, NULL};
    StridexArray one_axis = {dims, 1, 0, {0}, 0, 0, NULL, NULL};
    Producer p;
    const int64_t bad_shape[1] = {-2}, shape[2] = {2, 2}, strides[2] = {2, 1}, unit[1] = {1};

    CHECK_ERROR(stridex_import_dlpack(versioned(&p, host_tensor(data, 1, bad_shape, unit, &p, kDLFloat, 32), 0), &a),
                STRIDEX_ERROR_VALUE, "-2");
    CHECK(p.deleted == 1 && a.release == NULL);

    CHECK_ERROR(stridex_import_dlpack(versioned(&p, host_tensor(data, 2, shape, strides, &p, kDLFloat, 32), 0),
                                      &one_axis),
                STRIDEX_ERROR_BUFFER, "at most 1 axes, found 2");
    CHECK(p.deleted == 1 && one_axis.release == NULL);

    CHECK_ERROR(stridex_import_dlpack(versioned(&p, host_tensor(data, 2, shape, strides, &p, kDLFloat, 7), 0), &a),
                STRIDEX_ERROR_TYPE, "float");
    CHECK(p.deleted == 1);

    versioned(&p, host_tensor(data, 2, shape, strides, &p, kDLFloat, 32), 0);
    p.versioned.version.major = 2;
    CHECK_ERROR(stridex_import_dlpack(&p.versioned, &a), STRIDEX_ERROR_BUFFER,
                "DLPack major version 2 is not supported");
    CHECK(p.deleted == 1);

    /* NULL data for a non-empty array */
    CHECK_ERROR(stridex_import_dlpack(versioned(&p, host_tensor(NULL, 2, shape, strides, &p, kDLFloat, 32), 0), &a),
                STRIDEX_ERROR_VALUE, "NULL");
    CHECK(p.deleted == 1);

    CHECK_ERROR(stridex_import_dlpack(versioned(&p, host_tensor(data, 2, shape, strides, &p, kDLFloat, 32), 0), NULL),
                STRIDEX_ERROR_ARGUMENT, "NULL StridexArray");
    CHECK(p.deleted == 1);

    a.max_ndim = -1;
    CHECK_ERROR(stridex_import_dlpack(versioned(&p, host_tensor(data, 2, shape, strides, &p, kDLFloat, 32), 0), &a),
                STRIDEX_ERROR_ARGUMENT, "max_ndim must be >= 0, found -1");
    CHECK(p.deleted == 1);
    a.max_ndim = 4;
    a.dims = NULL;
    CHECK_ERROR(stridex_import_dlpack(versioned(&p, host_tensor(data, 2, shape, strides, &p, kDLFloat, 32), 0), &a),
                STRIDEX_ERROR_ARGUMENT, "NULL dims for max_ndim 4");
    CHECK(p.deleted == 1);

    CHECK_ERROR(stridex_import_dlpack(NULL, &one_axis), STRIDEX_ERROR_VALUE, "found NULL");
    /* a success clears the message */
    CHECK(stridex_import_dlpack(versioned(&p, host_tensor(data, 1, unit, unit, &p, kDLFloat, 32), 0), &one_axis) ==
          STRIDEX_OK);
    CHECK(strcmp(stridex_last_error(), "") == 0);
    stridex_release(&one_axis);
    CHECK(p.deleted == 1);
}

static void test_import_legacy(void) {
    int32_t data[3] = {7, 8, 9};
    const int64_t shape[1] = {3};
    int64_t dims[2];
    StridexArray a = {dims, 1, 0, {0}, 0, 0, NULL, NULL};
    Producer p;
    memset(&p, 0, sizeof p);
    p.legacy.dl_tensor = host_tensor(data, 1, shape, NULL, &p, kDLInt, 32); /* NULL strides: C order */
    p.legacy.manager_ctx = &p;
    p.legacy.deleter = delete_legacy;
    CHECK(stridex_import_dlpack_legacy(&p.legacy, &a) == STRIDEX_OK);
    CHECK(a.tensor.strides[0] == 1 && a.flags == 0 && a.tensor.data == (void*)data);
    stridex_release(&a);
    CHECK(p.deleted == 1);
}

static StridexArray describe_host(void* data, int32_t ndim, int64_t* shape, int64_t* strides, uint8_t code,
                                  uint8_t bits) {
    StridexArray a;
    memset(&a, 0, sizeof a);
    a.tensor.data = data;
    a.tensor.device.device_type = kDLCPU;
    a.tensor.ndim = ndim;
    a.tensor.dtype.code = code;
    a.tensor.dtype.bits = bits;
    a.tensor.dtype.lanes = 1;
    a.tensor.shape = shape;
    a.tensor.strides = strides;
    a.stream = -1;
    return a;
}

static void test_export_round_trip(void) {
    float data[6] = {1, 2, 3, 4, 5, 6};
    int64_t shape[2] = {3, 2}, strides[2] = {1, 3};
    int weight = 1;
    StridexArray a = describe_host(data, 2, shape, strides, kDLFloat, 32);
    DLManagedTensorVersioned* t = NULL;
    int64_t dims[4];
    StridexArray back = {dims, 2, 0, {0}, 0, 0, NULL, NULL};
    a.flags = DLPACK_FLAG_BITMASK_READ_ONLY;
    a.release = release_counter;
    a.context = &weight;
    released = 0;
    CHECK(stridex_export_dlpack(&a, &t) == STRIDEX_OK);
    CHECK(a.release == NULL); /* taken over */
    CHECK(t != NULL && t->version.major == 1 && t->version.minor == 3);
    CHECK(t->dl_tensor.data == (void*)data && t->dl_tensor.byte_offset == 0);
    CHECK(t->dl_tensor.shape[0] == 3 && t->dl_tensor.shape[1] == 2);
    CHECK(t->dl_tensor.strides[0] == 1 && t->dl_tensor.strides[1] == 3);
    CHECK((t->flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0);
    CHECK(t->dl_tensor.device.device_type == kDLCPU);
    /* any DLPack consumer takes it: here stridex itself */
    CHECK(stridex_import_dlpack(t, &back) == STRIDEX_OK);
    CHECK(back.tensor.data == (void*)data && back.flags == DLPACK_FLAG_BITMASK_READ_ONLY);
    CHECK(released == 0);
    stridex_release(&back);
    CHECK(released == 1);
}

static void test_export_c_order_default_and_offset(void) {
    int16_t data[8] = {0};
    int64_t shape[2] = {2, 3};
    StridexArray a = describe_host(data, 2, shape, NULL, kDLInt, 16); /* NULL strides: C order */
    DLManagedTensorVersioned* t = NULL;
    a.tensor.byte_offset = 2 * sizeof(int16_t);
    CHECK(stridex_export_dlpack(&a, &t) == STRIDEX_OK);
    CHECK(t->dl_tensor.strides[0] == 3 && t->dl_tensor.strides[1] == 1);
    CHECK(t->dl_tensor.data == (void*)(data + 2) && t->dl_tensor.byte_offset == 0);
    CHECK(t->flags == 0);
    t->deleter(t);
}

static void test_export_refusals(void) {
    float data[4] = {0};
    int64_t shape[1] = {4}, unit[1] = {1}, negative[1] = {-1};
    int weight = 1;
    DLManagedTensorVersioned* t = NULL;
    StridexArray a = describe_host(data, 1, shape, unit, kDLFloat, 32);

    /* Host memory claimed as GPU memory: with a driver it says cpu, without one no memory is. */
    a.tensor.device.device_type = kDLCUDA;
    a.release = release_counter;
    a.context = &weight;
    released = 0;
    CHECK_ERROR(stridex_export_dlpack(&a, &t), STRIDEX_ERROR_VALUE, "cuda");
    CHECK(t == NULL && released == 1 && a.release == NULL);

    a = describe_host(data, 1, negative, unit, kDLFloat, 32);
    a.release = release_counter;
    a.context = &weight;
    CHECK_ERROR(stridex_export_dlpack(&a, &t), STRIDEX_ERROR_VALUE, "-1");
    CHECK(released == 2);

    a = describe_host(data, 1, NULL, unit, kDLFloat, 32);
    CHECK_ERROR(stridex_export_dlpack(&a, &t), STRIDEX_ERROR_ARGUMENT, "NULL shape for 1 axes");
    a = describe_host(data, 1, shape, unit, kDLFloat, 32);
    a.release = release_counter;
    a.context = &weight;
    CHECK_ERROR(stridex_export_dlpack(&a, NULL), STRIDEX_ERROR_ARGUMENT, "NULL output pointer");
    CHECK(released == 3);
    CHECK_ERROR(stridex_export_dlpack(NULL, &t), STRIDEX_ERROR_ARGUMENT, "NULL StridexArray");
}

static void test_copy(void) {
    float src_data[6] = {0, 1, 2, 3, 4, 5}, dst_data[6] = {0};
    double wide[6] = {0};
    int64_t src_shape[2] = {3, 2}, src_strides[2] = {1, 3}; /* the transpose of a C-order 2 x 3 */
    int64_t dst_shape[2] = {3, 2}, other_shape[2] = {2, 3};
    intptr_t ready = 0;
    StridexArray src = describe_host(src_data, 2, src_shape, src_strides, kDLFloat, 32);
    StridexArray dst = describe_host(dst_data, 2, dst_shape, NULL, kDLFloat, 32);
    StridexArray bad;
    CHECK(stridex_copy(&dst, &src, -1, &ready) == STRIDEX_OK);
    CHECK(ready == -1);
    CHECK(dst_data[0] == 0 && dst_data[1] == 3 && dst_data[2] == 1 && dst_data[3] == 4 && dst_data[4] == 2 &&
          dst_data[5] == 5);
    /* a zero-initialised stream field reads as nothing pending */
    src.stream = 0;
    CHECK(stridex_copy(&dst, &src, -1, NULL) == STRIDEX_OK);

    bad = describe_host(dst_data, 2, other_shape, NULL, kDLFloat, 32);
    CHECK_ERROR(stridex_copy(&bad, &src, -1, NULL), STRIDEX_ERROR_VALUE, "shape");
    bad = describe_host(wide, 2, dst_shape, NULL, kDLFloat, 64);
    CHECK_ERROR(stridex_copy(&bad, &src, -1, NULL), STRIDEX_ERROR_VALUE, "dtype");
    bad = dst;
    bad.flags = DLPACK_FLAG_BITMASK_READ_ONLY;
    CHECK_ERROR(stridex_copy(&bad, &src, -1, NULL), STRIDEX_ERROR_BUFFER, "read-only");
    CHECK_ERROR(stridex_copy(&dst, &src, 0, NULL), STRIDEX_ERROR_ARGUMENT, "stream 0 is not a stream value");
    CHECK_ERROR(stridex_copy(NULL, &src, -1, NULL), STRIDEX_ERROR_ARGUMENT, "NULL StridexArray");
}

int main(void) {
    test_version();
    test_import_versioned();
    test_import_folds_the_byte_offset();
    test_import_refusals_run_the_deleter_once();
    test_import_legacy();
    test_export_round_trip();
    test_export_c_order_default_and_offset();
    test_export_refusals();
    test_copy();
    if (failures == 0) printf("test_c_api: all checks passed\n");
    return failures;
}
