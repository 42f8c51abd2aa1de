// Arguments from Python, converted in one place: every integer that crosses into C++ is
// range-checked here, and every message echoes at most a short prefix of what it was given.
//
// The rules (docs/import.md, "Arguments from Python"):
//   * integers are Python ints or objects with __index__; bool is refused (True is not 1 here),
//     and so is float (1.5 is no address, no extent);
//   * a value outside the C type it becomes is ValueError naming the argument and the type
//     ("does not fit in int64", as NumPy's "maximum supported dimension"), except indices, which
//     are IndexError as for Python sequences; an address is a ValueError outside [0, 2**64);
//   * addresses also take objects with only __int__ (cuda.bindings' CUdeviceptr), never floats;
//   * a size (bytes, an alignment) is an int in [0, 2**63): below 0 is ValueError ">= 0";
//   * a shape is an int (one axis) or a sequence of at most kMaxNdim ints;
//   * a device is a stridex.Device, a name ('cuda:0') or a DLPack (device_type, device_id) tuple
//     (not a list: the specification's type), and where only CUDA devices make sense, a CUDA ordinal (an int); a
//     negative id is a ValueError and an unknown device type a BufferError, whatever the entry;
//   * a dtype is a stridex.Dtype, a name ('float32', or torch's 'torch.float32'), a torch dtype, an
//     array (its .dtype) or anything numpy.dtype() takes; the same spellings at every entry.
#pragma once

#include <Python.h>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "stridex/cuda/constraints.hpp"
#include "stridex/device.hpp"
#include "stridex/dtype.hpp"
#include "stridex/error.hpp"

namespace stridex::python {

// The name of o's type, for messages (cut to 64 characters: a class name is foreign text too).
Excerpt type_name(PyObject* o) noexcept;

// repr(o), cut to `limit` characters with "..." appended: messages stay short whatever the input.
std::string short_repr(PyObject* o, std::size_t limit = 80);

// `what` names the argument in messages: "reshape(): shape", "__array_interface__['offset']".
std::int64_t int64_arg(PyObject* o, const char* what);
std::int32_t int32_arg(PyObject* o, const char* what);
// An axis of a view of `ndim` dimensions, negative counting from the end: IndexError otherwise.
int axis_arg(PyObject* o, int ndim, const char* what);
// An index into an axis: any int; beyond int64 it cannot be in range -> IndexError.
std::int64_t index_arg(PyObject* o, const char* what);
// An address in [0, 2**64).
std::uintptr_t address_arg(PyObject* o, const char* what);
// A size in bytes (or an alignment): an int64 >= 0.
std::size_t size_arg(PyObject* o, const char* what);
// A Device in the spellings above: the one device parser, behind device= (empty, View.copy/to,
// from_pointer), __dlpack__(dl_device=), stridex.Device(...), DevicePtr and VirtualBuffer. An
// unknown DLPack type is BufferError (unsupported: unservable, not malformed), a negative id
// ValueError. An int is a CUDA ordinal only for arguments that name CUDA devices anyway
// (DevicePtr, VirtualBuffer): elsewhere a bare int says nothing about the kind of memory: TypeError.
Device device_arg(PyObject* o, const char* what, bool ints_are_cuda_ordinals);
// A CUDA ordinal: any device spelling that names a CUDA device (an int is one), ValueError otherwise.
int cuda_ordinal_arg(PyObject* o, const char* what);
// A Dtype from a stridex.Dtype, a name ('float32', 'torch.float32'), a torch dtype, an array
// (its .dtype, read through this same parser) or anything numpy.dtype() takes ('<f4', np.float32,
// ml_dtypes.bfloat16): the one dtype parser, behind stridex.dtype(), stridex.Dtype(...), empty,
// from_pointer and VirtualBuffer.view. None is a TypeError (no default). Non-native byte order is
// refused (ValueError): stridex views hold native-order elements, and reading '>f4' bytes as
// float32 would misread. A producer's dtype property that raises an Exception is no dtype; a
// KeyboardInterrupt propagates.
Dtype dtype_arg(PyObject* o, const char* what);
// A shape or strides: one int, or a sequence of ints (not str/bytes), at most kMaxNdim of them.
std::vector<std::int64_t> int64_list_arg(PyObject* o, const char* what);

// stridex.view's constraint keywords, each null when not given.
struct ViewConstraintArgs {
    PyObject* dtype = nullptr;
    PyObject* ndim = nullptr;
    PyObject* shape = nullptr;  // ints, or None for any extent
    PyObject* device = nullptr;
    PyObject* writable = nullptr;  // True: required; False: make the View read-only; None: as it is
    PyObject* contiguous = nullptr;
    bool any() const noexcept { return dtype || ndim || shape || device || writable || contiguous; }
};
// The same constraints as a C++ Arg<...> (stridex/cuda/constraints.hpp), so that a View is checked by
// conform() and refused in the casters' words: dtype as dtype_arg, ndim, shape (None entries are
// arg::any), device as device_arg (a bare type name such as 'cuda' is any ordinal, as arg::cuda),
// writable=True (arg::writable), contiguous='C' or True (arg::c_contig), 'F' (arg::f_contig), None
// or False (any). The arguments' own errors name `what`'s keyword.
Requirements requirements_arg(const ViewConstraintArgs& args, const char* what);

// The other way: a tuple of Python ints, each value times `scale` (byte strides). Views keep
// every stride times the item size inside int64 (View::check_bytes), so this cannot overflow.
PyObject* int_tuple(std::span<const std::int64_t> values, std::int64_t scale = 1);

}  // namespace stridex::python
