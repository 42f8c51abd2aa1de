// stridex.from_pointer(ptr, shape, dtype, device=None, owner=None, strides=None, readonly=False):
// a View of raw memory, its device taken from the pointer's attributes (cuda::view_of_pointer).
#include <optional>
#include <vector>

#include "common/arguments.hpp"
#include "common/bindings.hpp"
#include "export/export.hpp"
#include "stridex/cuda/from_pointer.hpp"

namespace nb = nanobind;

namespace stridex::python {
namespace {

nb::object from_pointer(nb::handle ptr, nb::handle shape, nb::handle dtype, nb::handle device, nb::handle owner,
                        nb::handle strides, bool readonly) {
    const std::uintptr_t address = address_arg(ptr.ptr(), "from_pointer(): ptr");
    const std::vector<std::int64_t> extents = int64_list_arg(shape.ptr(), "from_pointer(): shape");
    const Dtype dt = dtype_arg(dtype.ptr(), "from_pointer(): dtype");
    Layout layout = strides.is_none() ? Layout::contiguous(extents)
                                      : Layout(extents, int64_list_arg(strides.ptr(), "from_pointer(): strides"));
    std::optional<Device> claimed;
    if (!device.is_none())
        claimed = device_arg(device.ptr(), "from_pointer(): device", /*ints_are_cuda_ordinals=*/false);
    Owner keep = owner.is_none() ? Owner() : owner_of(owner);
    View view = cuda::view_of_pointer(reinterpret_cast<void*>(address), std::move(layout), dt, claimed, std::move(keep),
                                      readonly);
    return wrap_view(std::move(view), nb::borrow(owner));
}

}  // namespace

void bind_from_pointer(nb::module_& m) {
    m.def("from_pointer", &from_pointer, nb::arg("ptr"), nb::arg("shape"), nb::arg("dtype").none(),
          nb::arg("device") = nb::none(), nb::arg("owner") = nb::none(), nb::arg("strides") = nb::none(),
          nb::arg("readonly") = false,
          nb::sig("def from_pointer(ptr: typing.SupportsIndex | typing.SupportsInt, shape: typing.SupportsIndex | "
                  "collections.abc.Sequence[typing.SupportsIndex], dtype: stridex.typing.DtypeLike, "
                  "device: stridex.typing.DeviceLike | None = None, owner: object = None, strides: "
                  "collections.abc.Sequence[typing.SupportsIndex] | None = None, readonly: bool = False) -> View"),
          "A View of raw memory at address `ptr` (element 0), with `shape` and `strides` in elements (C order "
          "when None). The device is taken from the pointer's CUDA attributes: `device` is optional and only "
          "checked (ValueError when it contradicts the memory). Without a CUDA GPU the memory is cpu memory. "
          "`owner` is kept alive as long as any view or export of this memory.");
}

}  // namespace stridex::python
