// take(a): an nb::ndarray<> argument (any dtype, shape, device, strides), its data pointer returned.
// nanobind imports the argument as nb_peer's callers would: __dlpack__(max_version=...) without a
// stream, then the buffer protocol, then a raw capsule.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cstdint>

namespace nb = nanobind;

NB_MODULE(nb_peer, m) {
    m.def("take", [](nb::ndarray<> a) { return reinterpret_cast<std::uintptr_t>(a.data()); }, nb::arg("a"));
}
