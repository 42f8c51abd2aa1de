// stridex.copy, stridex.empty and View.copy / contiguous / to: the Python face of the copy engine
// (stridex/cuda/copy.hpp, docs/copy.md). The GIL is released while copying.
#include <nanobind/stl/string.h>

#include <vector>

#include "arguments.hpp"
#include "bindings.hpp"
#include "export.hpp"
#include "import.hpp"
#include "stream_policy.hpp"
#include "stridex/cuda/copy.hpp"

namespace nb = nanobind;

namespace stridex::python {
namespace {

// The copy engine's stream: None -> the legacy default stream (array API), NO_SYNC / -1 ->
// complete before returning, else the stream (the same spellings stridex.view takes).
std::intptr_t copy_stream(nb::handle stream) {
    const StreamRequest r = parse_stream(stream.ptr());
    switch (r.kind) {
        case StreamRequest::Kind::by_default: return kDefaultStream;
        case StreamRequest::Kind::no_sync: return kNoStream;
        case StreamRequest::Kind::on_stream: return r.handle;
    }
    return kDefaultStream;
}

char order_argument(const std::string& order) {
    if (order.size() != 1 || (order[0] != 'C' && order[0] != 'F' && order[0] != 'K'))
        fail(ErrorKind::value, "order must be 'C', 'F' or 'K', found '", excerpt(order), "'");
    return order[0];
}

// A View argument as is, or anything stridex.view takes, imported for use on the copy's stream.
nb::object as_view(nb::handle obj, nb::handle stream) {
    if (is_view(obj.ptr())) return nb::borrow(obj);
    PyObject* v = import_object(obj.ptr(), parse_stream(stream.ptr()));
    if (!v) throw nb::python_error();
    return nb::steal(v);
}

nb::object copy_into(nb::handle dst, nb::handle src, nb::handle stream) {
    const std::intptr_t s = copy_stream(stream);
    nb::object d = as_view(dst, stream), o = as_view(src, stream);
    View out = py_view(d.ptr()).view;
    const View in = py_view(o.ptr()).view;
    {
        nb::gil_scoped_release release;
        out.set_stream(copy(out, in, s));
    }
    return wrap_view(std::move(out), py_view(d.ptr()).source);
}

// A fresh View has no Python owner: its memory is stridex's own.
nb::object fresh(View v) { return wrap_view(std::move(v), nb::none()); }

nb::object copy_of(const PyView& self, nb::handle device, const std::string& order, nb::handle stream) {
    const Device target = device.is_none() ? self.view.device() : device_arg(device.ptr(), "View.copy(): device", /*ints_are_cuda_ordinals=*/false);
    const char o = order_argument(order);
    const std::intptr_t s = copy_stream(stream);
    View out;
    {
        nb::gil_scoped_release release;
        out = copy_to(self.view, target, static_cast<Order>(o), s);
    }
    return fresh(std::move(out));
}

}  // namespace

void bind_copy(nb::module_& m) {
    m.def("copy", &copy_into, nb::arg("dst"), nb::arg("src"), nb::kw_only(), nb::arg("stream") = nb::none(),
          nb::sig("def copy(dst: object, src: object, *, stream: object = None) -> View"),
          "Copies src into dst (equal shapes and dtypes; any devices and strides; zero strides only in src). "
          "Device copies are queued on `stream` (None: the legacy default stream; stridex.NO_SYNC or -1: wait for "
          "the copy) after the work pending on both views. Returns dst, recording the stream it is ready on.");
    m.def("empty", [](nb::handle shape, nb::handle dtype, nb::handle device, const std::string& order) {
        const std::vector<std::int64_t> extents = int64_list_arg(shape.ptr(), "empty(): shape");
        const Dtype dt = dtype_arg(dtype.ptr(), "empty(): dtype");
        const char o = order_argument(order);
        return fresh(allocate(extents, dt, device_arg(device.ptr(), "empty(): device", /*ints_are_cuda_ordinals=*/false), o == 'F' ? Order::F : Order::C));
    }, nb::arg("shape"), nb::arg("dtype"), nb::kw_only(), nb::arg("device") = "cpu", nb::arg("order") = "C",
       nb::sig("def empty(shape: typing.SupportsIndex | collections.abc.Sequence[typing.SupportsIndex], dtype: "
               "Dtype | str | numpy.dtype[typing.Any] | type, *, device: Device | str | tuple[int, int] = 'cpu', order: typing.Literal['C', 'F', 'K'] = 'C') "
               "-> View"),
       "A fresh, uninitialised, writable View on cpu, cuda:N, cuda_host (pinned) or cuda_managed memory.");

    nb::handle cls = nb::type<PyView>();
    cls.attr("copy") = nb::cpp_function(
        [](const PyView& self, nb::handle device, const std::string& order, nb::handle stream) {
            return copy_of(self, device, order, stream);
        },
        nb::is_method(), nb::name("copy"), nb::scope(cls), nb::arg("device") = nb::none(), nb::arg("order") = "C",
        nb::kw_only(), nb::arg("stream") = nb::none(),
        nb::sig("def copy(self, device: Device | str | tuple[int, int] | None = None, order: typing.Literal['C', 'F', 'K'] = 'C', *, "
                "stream: object = None) -> View"),
        "A fresh copy on `device` (this view's by default) in element order 'C', 'F' or 'K' (the source's axis "
        "order). Queued on `stream` (None: legacy default stream); the result records the stream it is ready on.");
    cls.attr("contiguous") = nb::cpp_function(
        [](nb::handle self, nb::handle stream) -> nb::object {
            const PyView& v = py_view(self.ptr());
            if (v.view.layout().is_c_contiguous()) return nb::borrow(self);
            return copy_of(v, nb::none(), "C", stream);
        },
        nb::is_method(), nb::name("contiguous"), nb::scope(cls), nb::kw_only(), nb::arg("stream") = nb::none(),
        nb::sig("def contiguous(self, *, stream: object = None) -> View"),
        "This view if it is C-contiguous, else a C-contiguous copy on the same device.");
    cls.attr("to") = nb::cpp_function(
        [](nb::handle self, nb::handle device, nb::handle stream) -> nb::object {
            const PyView& v = py_view(self.ptr());
            if (device_arg(device.ptr(), "View.to(): device", /*ints_are_cuda_ordinals=*/false) == v.view.device()) return nb::borrow(self);
            return copy_of(v, device, "K", stream);
        },
        nb::is_method(), nb::name("to"), nb::scope(cls), nb::arg("device"), nb::kw_only(),
        nb::arg("stream") = nb::none(), nb::sig("def to(self, device: Device | str | tuple[int, int], *, stream: object = None) -> View"),
        "This view if it is on `device` already, else a copy there (keeping the source's axis order).");
}

}  // namespace stridex::python
