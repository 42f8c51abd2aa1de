// take(a): an nb::ndarray<> argument (any dtype, shape, device, strides), its data pointer returned.
// nanobind imports the argument as nb_peer's callers would: __dlpack__(max_version=...) without a
// stream, then the buffer protocol, then a raw capsule.
//
// The floors of bench_import.py --breakdown, which no importer can go below:
//   noop(a)                  the Python call of a nanobind function taking one object
//   exchange(a, api, step)   the producer's DLPack exchange API alone (api: the type's
//                            __dlpack_c_exchange_api__ capsule): step 0 borrows the DLTensor, 1 also
//                            asks for the current work stream, 2 makes and frees a managed tensor
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cstdint>
#include <stdexcept>

#include "stridex/dlpack.hpp"  // the exchange API's struct, for the floors only

namespace nb = nanobind;
namespace dl = stridex::dlpack;

namespace {

void exchange(nb::handle a, nb::capsule capsule, int step) {
    auto* api = static_cast<const dl::DLPackExchangeAPI*>(PyCapsule_GetPointer(capsule.ptr(), dl::kExchangeApiCapsule));
    if (api == nullptr) throw nb::python_error();
    if (step == 2) {
        dl::DLManagedTensorVersioned* tensor = nullptr;
        if (api->managed_tensor_from_py_object_no_sync(a.ptr(), &tensor) != 0) throw nb::python_error();
        if (tensor->deleter) tensor->deleter(tensor);
        return;
    }
    if (api->dltensor_from_py_object_no_sync == nullptr) throw std::runtime_error("no dltensor_from_py_object_no_sync");
    dl::DLTensor t{};
    if (api->dltensor_from_py_object_no_sync(a.ptr(), &t) != 0) throw nb::python_error();
    void* stream = nullptr;
    if (step == 1 && api->current_work_stream(t.device.device_type, t.device.device_id, &stream) != 0)
        throw nb::python_error();
}

}  // namespace

NB_MODULE(nb_peer, m) {
    m.def(
        "take", [](nb::ndarray<> a) { return reinterpret_cast<std::uintptr_t>(a.data()); }, nb::arg("a"));
    m.def("noop", [](nb::handle) {});
    m.def("exchange", &exchange);
}
