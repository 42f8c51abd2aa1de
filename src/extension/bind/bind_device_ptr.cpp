// stridex.DevicePtr: a device address that does integer arithmetic and comparisons like an int,
// checked at both ends of the 64-bit address space (the rules live in stridex/cuda/pointer.hpp).
#include <Python.h>
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include <cstdint>
#include <string>

#include "common/arguments.hpp"
#include "common/bindings.hpp"
#include "stridex/cuda/pointer.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace stridex::python {
namespace {

using cuda::DevicePtr;

// The Python int behind an operand of arithmetic and comparisons, or an empty object when `h` is
// no integer (floats included: Python then answers NotImplemented's TypeError). Not arguments.hpp's
// int64_arg: an operand may be any Python int (a negative one is simply smaller than every address).
nb::object as_python_int(nb::handle h) {
    PyObject* o = h.ptr();
    if (PyLong_Check(o)) return nb::borrow(h);
    if (PyFloat_Check(o) || !PyIndex_Check(o)) return {};
    nb::object i = nb::steal(PyNumber_Index(o));
    if (!i.is_valid()) throw nb::python_error();
    return i;
}

// p + n or p - n for a Python int n of any size: results outside [0, 2^64) are ValueError (the
// C++ operators check; ints beyond 64 bits cannot give an address at all).
DevicePtr offset(const DevicePtr& p, nb::handle n, bool subtract) {
    int overflow = 0;
    const long long v = PyLong_AsLongLongAndOverflow(n.ptr(), &overflow);
    if (v == -1 && PyErr_Occurred()) throw nb::python_error();
    if (overflow == 0) return subtract ? p - v : p + v;
    if (overflow > 0) {
        const unsigned long long u = PyLong_AsUnsignedLongLong(n.ptr());
        if (!(u == static_cast<unsigned long long>(-1) && PyErr_Occurred())) return subtract ? p - u : p + u;
        PyErr_Clear();
    }
    fail(ErrorKind::value, "pointer arithmetic leaves the 64-bit address space: ", hex(p.address()),
         subtract ? " - " : " + ", short_repr(n.ptr()));
}

// ---- DevicePtr -------------------------------------------------------------------------------------

nb::object not_implemented() { return nb::borrow(Py_NotImplemented); }

nb::object py_int(std::uint64_t v) { return nb::steal(PyLong_FromUnsignedLongLong(v)); }

// What the other operand of a comparison is: a DevicePtr, an int (or __index__ object), or neither.
enum class Operand { pointer, integer, other };
Operand classify(nb::handle other) {
    if (nb::isinstance<DevicePtr>(other)) return Operand::pointer;
    return as_python_int(other).is_valid() ? Operand::integer : Operand::other;
}

// Python ints of any size against the address, exactly (a negative int is simply smaller).
std::strong_ordering compare_int(const DevicePtr& p, nb::handle other) {
    nb::object mine = py_int(p.address());
    nb::object theirs = as_python_int(other);
    if (PyObject_RichCompareBool(mine.ptr(), theirs.ptr(), Py_LT)) return std::strong_ordering::less;
    if (PyObject_RichCompareBool(mine.ptr(), theirs.ptr(), Py_GT)) return std::strong_ordering::greater;
    return std::strong_ordering::equal;
}

// ==, != : pointers are equal when address and device are; an int when the address is.
auto equality(bool want_equal) {
    return [want_equal](const DevicePtr& p, nb::handle other) -> nb::object {
        switch (classify(other)) {
            case Operand::pointer: return nb::bool_((p == nb::cast<const DevicePtr&>(other)) == want_equal);
            case Operand::integer: return nb::bool_((compare_int(p, other) == 0) == want_equal);
            case Operand::other: break;
        }
        return not_implemented();
    };
}

// <, <=, >, >= : with ints by address; with pointers of the same device only (ValueError otherwise).
template <class Test>
auto ordering(Test test) {
    return [test](const DevicePtr& p, nb::handle other) -> nb::object {
        switch (classify(other)) {
            case Operand::pointer: return nb::bool_(test(p <=> nb::cast<const DevicePtr&>(other)));
            case Operand::integer: return nb::bool_(test(compare_int(p, other)));
            case Operand::other: break;
        }
        return not_implemented();
    };
}

}  // namespace

void bind_device_ptr(nb::module_& m) {
    nb::class_<DevicePtr>(m, "DevicePtr",
                          "A device address and the device it belongs to. Behaves as an int (int(), "
                          "__index__, == and hash like the int), with byte arithmetic that refuses "
                          "results outside [0, 2**64) (ValueError).")
        .def(
            "__init__",
            [](DevicePtr* self, nb::handle addr, nb::handle device) {
                const std::uint64_t a = address_arg(addr.ptr(), "DevicePtr(): addr");
                Device d;
                if (!device.is_none())
                    d = device_arg(device.ptr(), "DevicePtr(): device", /*ints_are_cuda_ordinals=*/true);
                else if (nb::isinstance<DevicePtr>(addr))
                    d = nb::cast<const DevicePtr&>(addr).device();
                else
                    d = cuda::device_of_pointer(static_cast<std::uintptr_t>(a));  // ask the memory
                new (self) DevicePtr(a, d);
            },
            "addr"_a, "device"_a = nb::none(),
            nb::sig("def __init__(self, addr: typing.SupportsIndex | typing.SupportsInt, device: Device | str | "
                    "typing.SupportsIndex | tuple[int, int] | None = None) -> None"),
            "addr: an int, or an object with __index__ or __int__ (cuda.bindings CUdeviceptr). device: a "
            "stridex.Device, 'cuda:N', an ordinal or a DLPack (device_type, device_id) pair; None asks the driver what "
            "memory addr points to (cpu "
            "for memory CUDA does not know, and for every address when there is no driver).")
        .def_prop_ro(
            "address", [](const DevicePtr& p) { return py_int(p.address()); }, nb::sig("def address(self) -> int"),
            "The address as an int.")
        .def_prop_ro("device", &DevicePtr::device, "The stridex.Device the address is on (given, or the driver's).")
        .def(
            "__int__", [](const DevicePtr& p) { return py_int(p.address()); }, nb::sig("def __int__(self) -> int"))
        .def(
            "__index__", [](const DevicePtr& p) { return py_int(p.address()); }, nb::sig("def __index__(self) -> int"))
        .def("__bool__", [](const DevicePtr& p) { return p.address() != 0; })
        .def("__hash__", [](const DevicePtr& p) { return nb::hash(py_int(p.address())); })
        // Operands may be anything, None included: unknown types give NotImplemented, so Python
        // falls back to identity for == and raises TypeError for < and arithmetic.
        .def("__eq__", equality(/*want_equal=*/true), "other"_a.none(),
             nb::sig("def __eq__(self, other: object, /) -> bool"))
        .def("__ne__", equality(/*want_equal=*/false), "other"_a.none(),
             nb::sig("def __ne__(self, other: object, /) -> bool"))
        .def("__lt__", ordering([](std::strong_ordering c) { return c < 0; }), "other"_a.none(),
             nb::sig("def __lt__(self, other: DevicePtr | int, /) -> bool"))
        .def("__le__", ordering([](std::strong_ordering c) { return c <= 0; }), "other"_a.none(),
             nb::sig("def __le__(self, other: DevicePtr | int, /) -> bool"))
        .def("__gt__", ordering([](std::strong_ordering c) { return c > 0; }), "other"_a.none(),
             nb::sig("def __gt__(self, other: DevicePtr | int, /) -> bool"))
        .def("__ge__", ordering([](std::strong_ordering c) { return c >= 0; }), "other"_a.none(),
             nb::sig("def __ge__(self, other: DevicePtr | int, /) -> bool"))
        .def(
            "__add__",
            [](const DevicePtr& p, nb::handle n) -> nb::object {
                nb::object i = as_python_int(n);
                if (!i.is_valid() || nb::isinstance<DevicePtr>(n)) return not_implemented();
                return nb::cast(offset(p, i, /*subtract=*/false));
            },
            "other"_a.none(), nb::sig("def __add__(self, other: typing.SupportsIndex, /) -> DevicePtr"))
        .def(
            "__radd__",
            [](const DevicePtr& p, nb::handle n) -> nb::object {
                nb::object i = as_python_int(n);
                if (!i.is_valid()) return not_implemented();
                return nb::cast(offset(p, i, /*subtract=*/false));
            },
            "other"_a.none(), nb::sig("def __radd__(self, other: typing.SupportsIndex, /) -> DevicePtr"))
        .def(
            "__sub__",
            [](const DevicePtr& p, nb::handle other) -> nb::object {
                if (nb::isinstance<DevicePtr>(other)) return nb::int_(p - nb::cast<const DevicePtr&>(other));
                nb::object i = as_python_int(other);
                if (!i.is_valid()) return not_implemented();
                return nb::cast(offset(p, i, /*subtract=*/true));
            },
            "other"_a.none(),
            nb::sig("def __sub__(self, other: DevicePtr | typing.SupportsIndex, /) -> DevicePtr | int"))
        // No __iadd__/__isub__: `p += 16` rebinds p to a new DevicePtr, as for ints. Mutating in
        // place would corrupt every dict and set holding p (its hash is its address).
        .def(
            "align_up",
            [](const DevicePtr& p, nb::handle a) {
                return p.align_up(size_arg(a.ptr(), "DevicePtr.align_up(): alignment"));
            },
            "alignment"_a.none(), nb::sig("def align_up(self, alignment: typing.SupportsIndex) -> DevicePtr"),
            "The next address at or above that is a multiple of alignment.")
        .def(
            "align_down",
            [](const DevicePtr& p, nb::handle a) {
                return p.align_down(size_arg(a.ptr(), "DevicePtr.align_down(): alignment"));
            },
            "alignment"_a.none(), nb::sig("def align_down(self, alignment: typing.SupportsIndex) -> DevicePtr"),
            "The address rounded down to a multiple of alignment (a power of two), on the same device.")
        .def(
            "is_aligned",
            [](const DevicePtr& p, nb::handle a) {
                return p.is_aligned(size_arg(a.ptr(), "DevicePtr.is_aligned(): alignment"));
            },
            "alignment"_a.none(), nb::sig("def is_aligned(self, alignment: typing.SupportsIndex) -> bool"),
            "True when the address is a multiple of alignment (a power of two).")
        .def("__format__",
             [](const DevicePtr& p, nb::str spec) -> nb::object {
                 if (nb::len(spec) == 0) return nb::str(nb::repr(nb::cast(p)));
                 return nb::steal(PyObject_Format(py_int(p.address()).ptr(), spec.ptr()));
             })
        .def("__repr__", [](const DevicePtr& p) {
            return "DevicePtr(" + hex(p.address()) + ", device=" + p.device().name() + ")";
        });
}

}  // namespace stridex::python
