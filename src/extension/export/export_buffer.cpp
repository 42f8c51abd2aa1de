// The buffer protocol (PEP 3118) on stridex.View, for host-accessible memory: memoryview(view),
// NumPy's first choice in np.asarray(view), bytes(view), struct, array, ...
//
// Strides are exported in bytes, as the protocol wants; negative and zero strides are legal there.
// A read-only view refuses a writable request (BufferError); the protocol has no format for
// bfloat16 or float8, so those refuse too (consumers fall back to __array__ or DLPack).
#include <algorithm>
#include <cstring>
#include <string>

#include "common/attributes.hpp"
#include "common/limited_api.hpp"
#include "export/export.hpp"

namespace stridex::python {
namespace {

// What the Py_buffer points into, freed by releasebuffer: the format and shape/strides arrays.
struct BufferBlock {
    char format[8];
    Py_ssize_t dims[1];  // shape[ndim], then strides[ndim] (allocated to size)
};

int buffer_error(const std::string& message) noexcept {
    PyErr_SetString(PyExc_BufferError, message.c_str());
    return -1;
}

bool requested(int flags, int what) noexcept { return (flags & what) == what; }

// The format of an opaque element: the producer's own (from its buffer), kept by the View, which
// the Py_buffer keeps alive; nullptr when the producer described it by typestr and descr only.
const char* opaque_format(const PyView& pv) {
    PyObject* format = element_description(pv, "format");
    const char* text = format && PyUnicode_Check(format) ? PyUnicode_AsUTF8(format) : nullptr;
    if (!text) clear_exception_or_throw();
    return text;
}
}  // namespace

int view_getbuffer(PyObject* self, Py_buffer* b, int flags) noexcept {
    b->obj = nullptr;
    try {
        const PyView& pv = py_view(self);
        const View& v = pv.view;
        if (!v.device().host_accessible())
            return buffer_error("stridex.View of " + v.device().name() +
                                " memory has no buffer protocol: the CPU cannot read it");
        if (requested(flags, PyBUF_WRITABLE) && v.readonly())
            return buffer_error("stridex.View is read-only: a writable buffer was requested");
        const char* element_format = nullptr;
        std::string format;
        if (v.dtype().is_opaque_bytes()) {
            element_format = opaque_format(pv);
            if (!element_format)
                return buffer_error("an opaque element of " + std::to_string(v.itemsize()) +
                                    " bytes has no PEP 3118 format its producer gave; use __array_interface__");
        } else if (v.is_packed_subbyte() || v.dtype().lanes != 1) {
            return buffer_error("dtype " + v.dtype().name() + " has no PEP 3118 buffer format");
        } else {
            try {
                format = v.dtype().buffer_format();
            } catch (const Error&) {
                return buffer_error("dtype " + v.dtype().name() +
                                    " has no PEP 3118 buffer format; use __dlpack__ or numpy.asarray");
            }
        }
        const bool c = v.layout().is_c_contiguous();
        const bool f = v.layout().is_f_contiguous();
        if (requested(flags, PyBUF_C_CONTIGUOUS) && !c) return buffer_error("stridex.View is not C-contiguous");
        if (requested(flags, PyBUF_F_CONTIGUOUS) && !f) return buffer_error("stridex.View is not Fortran-contiguous");
        if (requested(flags, PyBUF_ANY_CONTIGUOUS) && !c && !f) return buffer_error("stridex.View is not contiguous");
        if (!requested(flags, PyBUF_STRIDES) && !c)
            return buffer_error("stridex.View is not C-contiguous, and the consumer takes no strides");
        host_sync(v);

        const int ndim = v.ndim();
        const std::size_t bytes = sizeof(BufferBlock) + sizeof(Py_ssize_t) * (2 * static_cast<std::size_t>(ndim));
        auto* block = static_cast<BufferBlock*>(PyMem_Malloc(bytes));
        if (block == nullptr) {
            PyErr_NoMemory();
            return -1;
        }
        std::memset(block->format, 0, sizeof block->format);
        std::memcpy(block->format, format.data(), std::min(format.size(), sizeof block->format - 1));
        Py_ssize_t* shape = block->dims;
        Py_ssize_t* strides = block->dims + ndim;
        for (int a = 0; a < ndim; ++a) {
            const auto i = static_cast<std::size_t>(a);
            shape[a] = static_cast<Py_ssize_t>(v.shape()[i]);
            strides[a] = static_cast<Py_ssize_t>(v.strides()[i] * v.itemsize());
        }
        b->buf = v.ptr();
        b->len = static_cast<Py_ssize_t>(v.size() * v.itemsize());
        b->readonly = v.readonly() ? 1 : 0;
        b->itemsize = static_cast<Py_ssize_t>(v.itemsize());
        b->format = !requested(flags, PyBUF_FORMAT) ? nullptr
                    : element_format                ? const_cast<char*>(element_format)
                                                    : block->format;
        b->ndim = ndim;
        b->shape = requested(flags, PyBUF_ND) ? shape : nullptr;
        b->strides = requested(flags, PyBUF_STRIDES) ? strides : nullptr;
        b->suboffsets = nullptr;
        b->internal = block;
        Py_INCREF(self);  // the buffer keeps the View, and so its memory, alive
        b->obj = self;
        return 0;
    } catch (...) {
        set_python_error_from_current_exception();
        return -1;
    }
}

void view_releasebuffer(PyObject*, Py_buffer* b) noexcept { PyMem_Free(b->internal); }

}  // namespace stridex::python
