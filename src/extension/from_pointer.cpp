// stridex.from_pointer(ptr, shape, dtype, device=None, owner=None, strides=None, readonly=False):
// a View of raw memory, its device taken from the pointer's attributes (cuda::view_of_pointer).
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>

#include <vector>

#include "export.hpp"
#include "stridex/cuda/from_pointer.hpp"

namespace nb = nanobind;

namespace stridex::python {
namespace {

std::string type_name_of(nb::handle o) { return nb::type_name(o.type()).c_str(); }

// An address: an int, or anything with __index__ / __int__ (stridex.DevicePtr, cuda.bindings'
// CUdeviceptr, ctypes.c_void_p.value ...). Negative or wider than 64 bits is ValueError.
std::uintptr_t address_of(nb::handle ptr) {
    if (PyBool_Check(ptr.ptr())) fail(ErrorKind::type, "ptr must be an address (int), found bool");
    nb::object number;
    if (PyIndex_Check(ptr.ptr()))
        number = nb::steal(PyNumber_Index(ptr.ptr()));
    else if (nb::hasattr(ptr, "__int__"))
        number = nb::steal(PyNumber_Long(ptr.ptr()));
    else
        fail(ErrorKind::type, "ptr must be an address (int, or an object with __int__), found ", type_name_of(ptr));
    if (!number.is_valid()) throw nb::python_error();
    const unsigned long long v = PyLong_AsUnsignedLongLong(number.ptr());
    if (v == static_cast<unsigned long long>(-1) && PyErr_Occurred()) {
        PyErr_Clear();
        fail(ErrorKind::value, "ptr must be an address in [0, 2**64), found ", nb::str(number).c_str());
    }
    return static_cast<std::uintptr_t>(v);
}

std::vector<std::int64_t> int_list(nb::handle seq, const char* what) {
    std::vector<std::int64_t> out;
    if (PyIndex_Check(seq.ptr())) {  // a bare int is a 1-d shape, as in NumPy
        out.push_back(nb::cast<std::int64_t>(nb::int_(nb::steal(PyNumber_Index(seq.ptr())))));
        return out;
    }
    if (!PySequence_Check(seq.ptr()) || nb::isinstance<nb::str>(seq))
        fail(ErrorKind::type, what, " must be a sequence of ints, found ", type_name_of(seq));
    for (nb::handle item : seq) {
        if (!PyIndex_Check(item.ptr()) || PyBool_Check(item.ptr()))
            fail(ErrorKind::type, what, " must be a sequence of ints, found an item of type ", type_name_of(item));
        nb::object i = nb::steal(PyNumber_Index(item.ptr()));
        if (!i.is_valid()) throw nb::python_error();
        out.push_back(nb::cast<std::int64_t>(i));
    }
    return out;
}

// A Dtype from a stridex.Dtype, a name ('float32', 'bfloat16'), or anything with a NumPy dtype
// (np.float32, np.dtype('f4'), ml_dtypes.bfloat16, an array).
Dtype dtype_of(nb::handle spec) {
    if (nb::isinstance<Dtype>(spec)) return nb::cast<Dtype>(spec);
    if (nb::isinstance<nb::str>(spec)) return Dtype::from_name(nb::cast<std::string_view>(spec));
    nb::object np_dtype = nb::hasattr(spec, "dtype") ? nb::object(spec.attr("dtype")) : nb::borrow(spec);
    if (!nb::hasattr(np_dtype, "name") || nb::isinstance<nb::type_object>(np_dtype)) {
        // A scalar type such as np.float32: numpy.dtype() turns it into a dtype.
        np_dtype = nb::module_::import_("numpy").attr("dtype")(spec);
    }
    return Dtype::from_name(nb::cast<std::string>(np_dtype.attr("name")));
}

// A Device from a stridex.Device, a name ('cuda:1') or a DLPack pair (2, 1).
Device device_of(nb::handle spec) {
    if (nb::isinstance<Device>(spec)) return nb::cast<Device>(spec);
    if (nb::isinstance<nb::str>(spec)) return Device::parse(nb::cast<std::string_view>(spec));
    if (nb::isinstance<nb::tuple>(spec) && nb::len(spec) == 2)
        return Device::from_raw(nb::cast<std::int32_t>(spec[0]), nb::cast<std::int32_t>(spec[1]));
    fail(ErrorKind::type, "device must be a stridex.Device, a name such as 'cuda:0', or a (device_type, device_id) "
                          "pair, found ", type_name_of(spec));
}

nb::object from_pointer(nb::handle ptr, nb::handle shape, nb::handle dtype, nb::handle device, nb::handle owner,
                        nb::handle strides, bool readonly) {
    const std::uintptr_t address = address_of(ptr);
    const std::vector<std::int64_t> extents = int_list(shape, "shape");
    const Dtype dt = dtype_of(dtype);
    Layout layout = strides.is_none() ? Layout::contiguous(extents) : Layout(extents, int_list(strides, "strides"));
    std::optional<Device> claimed;
    if (!device.is_none()) claimed = device_of(device);
    Owner keep = owner.is_none() ? Owner() : owner_of(owner);
    View view = cuda::view_of_pointer(reinterpret_cast<void*>(address), std::move(layout), dt, claimed,
                                      std::move(keep), readonly);
    return wrap_view(std::move(view), nb::borrow(owner));
}

}  // namespace

void bind_from_pointer(nb::module_& m) {
    m.def("from_pointer", &from_pointer, nb::arg("ptr"), nb::arg("shape"), nb::arg("dtype"),
          nb::arg("device") = nb::none(), nb::arg("owner") = nb::none(), nb::arg("strides") = nb::none(),
          nb::arg("readonly") = false,
          nb::sig("def from_pointer(ptr: typing.SupportsIndex | typing.SupportsInt, shape: typing.SupportsIndex | "
                  "collections.abc.Sequence[typing.SupportsIndex], dtype: Dtype | str | numpy.dtype[typing.Any] | type, "
                  "device: Device | str | None = None, owner: object = None, strides: "
                  "collections.abc.Sequence[typing.SupportsIndex] | None = None, readonly: bool = False) -> View"),
          "A View of raw memory at address `ptr` (element 0), with `shape` and `strides` in elements (C order "
          "when None). The device is taken from the pointer's CUDA attributes: `device` is optional and only "
          "checked (ValueError when it contradicts the memory). Without a CUDA GPU the memory is cpu memory. "
          "`owner` is kept alive as long as any view or export of this memory.");
}

}  // namespace stridex::python
