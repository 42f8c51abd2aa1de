// stridex.copy, stridex.empty, View.copy / contiguous / to and copy.copy / copy.deepcopy of a View:
// the Python face of the copy engine (stridex/cuda/copy.hpp, docs/copy.md). The GIL is released
// while copying.
#include <nanobind/stl/string.h>

#include <optional>
#include <vector>

#include "bind/bind_sharded.hpp"
#include "common/arguments.hpp"
#include "common/bindings.hpp"
#include "export/allocator.hpp"
#include "export/export.hpp"
#include "import/import.hpp"
#include "sanitizer/handover.hpp"
#include "sanitizer/sanitizer.hpp"
#include "stream/stream_policy.hpp"
#include "stridex/cuda/capture.hpp"
#include "stridex/cuda/copy.hpp"

namespace nb = nanobind;

namespace stridex::python {
namespace {

// The copy engine's stream for the caller's request (parsed once per call: a stream object's
// __cuda_stream__ is asked once): None -> the legacy default stream (array API), NO_SYNC / -1 ->
// complete before returning, else the stream (the same spellings stridex.view takes).
std::intptr_t engine_stream(const StreamRequest& r) noexcept {
    switch (r.kind) {
        case StreamRequest::Kind::by_default: return kDefaultStream;
        case StreamRequest::Kind::no_sync: return kNoStream;
        case StreamRequest::Kind::on_stream: return r.handle;
    }
    return kDefaultStream;
}

// The default request inside a capture (docs/graphs.md): the legacy default stream cannot take part
// in one, so when dst's or src's data is ready on a stream that is capturing (a View imported with
// the default request while the producer's current stream captured records that stream), the
// copy runs on that stream. Otherwise `fallback`.
std::intptr_t capturing_stream_or(std::intptr_t fallback, const View& dst, const View& src) {
    for (const View* v : {&dst, &src}) {
        const std::intptr_t s = v->stream();
        const Device device = v->device();
        // Host memory's stream is only ever waited for by the host (and may be a made-up value).
        if (!device.is_cuda_family() || device.type == DeviceType::kCUDAHost) continue;
        if (s == kNoStream || s == cuda::StreamRef::kLegacy || s == cuda::StreamRef::kPerThread) continue;
        if (cuda::capture_of(cuda::StreamRef(s), device.type == DeviceType::kCUDA ? device.id : 0).active()) return s;
    }
    return fallback;
}

// A View argument as is, or anything stridex.view takes, imported for use on the copy's stream.
nb::object as_view(nb::handle obj, const StreamRequest& request) {
    if (is_view(obj.ptr())) return nb::borrow(obj);
    PyObject* v = import_object(obj.ptr(), request);
    if (!v) throw nb::python_error();
    return nb::steal(v);
}

// stridex.copy: returns `dst` itself. A View records the stream its data is ready on (set in place,
// so code that ignores the return value orders its next work right); any other array is returned
// as it is, its data ready on `stream` (docs/copy.md).
nb::object copy_into(nb::handle dst, nb::handle src, nb::handle stream) {
    if (nb::object sharded = copy_sharded(dst, src, stream); sharded.is_valid()) return sharded;  // docs/sharded.md
    const StreamRequest request = parse_stream(stream.ptr());
    std::intptr_t s = engine_stream(request);
    nb::object d = as_view(dst, request), o = as_view(src, request);
    PyView& target = py_view(d.ptr());
    const View out = target.view, in = py_view(o.ptr()).view;
    if (request.kind == StreamRequest::Kind::by_default) s = capturing_stream_or(s, out, in);
    const Handover source{
        in, py_view(o.ptr()).source.ptr(), in.stream(), s, "stridex.copy (source)", {}, request.object};
    if (sanitizer::on()) sanitizer::observe(source);
    // Both are used on `s`: their allocators hear of it (the copy engine notes stridex's pools too).
    handed_to_stream(source);
    handed_to_stream(out, request.object, s);
    std::intptr_t ready;
    {
        nb::gil_scoped_release release;
        ready = copy(out, in, s);
    }
    target.view.set_stream(ready);
    return nb::borrow(dst);
}

// A fresh View has no Python owner: its memory is stridex's own.
nb::object fresh(View v) { return wrap_view(std::move(v), nb::none()); }

// The memory comes from the call's allocator (allocator.hpp): stridex's pools unless
// allocator=, like= or the process default names another.
nb::object copy_of(const PyView& self, Device target, Order order, nb::handle stream, nb::handle allocator,
                   nb::handle like) {
    const StreamRequest request = parse_stream(stream.ptr());
    const std::intptr_t s = engine_stream(request);
    std::optional<PyAllocator> holder;
    const Allocator* a = choose_allocator(allocator, like, holder);
    View out;
    const Handover handover{self.view, self.source.ptr(), self.view.stream(), s, "View.copy", {}, request.object};
    if (sanitizer::on()) sanitizer::observe(handover);
    handed_to_stream(handover);
    {
        nb::gil_scoped_release release;
        out = copy_to(self.view, target, order, s, a);
    }
    return fresh(std::move(out));
}

nb::object copy_of(const PyView& self, nb::handle device, const std::string& order, nb::handle stream,
                   nb::handle allocator, nb::handle like) {
    const Device target = device.is_none()
                              ? self.view.device()
                              : device_arg(device.ptr(), "View.copy(): device", /*ints_are_cuda_ordinals=*/false);
    return copy_of(self, target, parse_order(order), stream, allocator, like);
}

}  // namespace

void bind_copy(nb::module_& m) {
    m.def("copy", &copy_into, nb::arg("dst"), nb::arg("src"), nb::kw_only(), nb::arg("stream") = nb::none(),
          nb::sig(
              "def copy(dst: stridex.typing.ArrayT, src: object, *, stream: object = None) -> stridex.typing.ArrayT"),
          "Copies src into dst (equal shapes and dtypes; any devices and strides; zero strides only in src). "
          "Device copies are queued on `stream` (None: the legacy default stream; stridex.NO_SYNC or -1: wait for "
          "the copy) after the work pending on both. Returns dst itself: a stridex.View records the stream its data "
          "is ready on (dst.stream, None when the copy completed); any other array's data is ready on `stream`.");
    m.def(
        "empty",
        [](nb::handle shape, nb::handle dtype, nb::handle device, const std::string& order, nb::handle stream,
           nb::handle allocator, nb::handle like) {
            const std::vector<std::int64_t> extents = int64_list_arg(shape.ptr(), "empty(): shape");
            // NumPy defaults to float64; stridex has no default dtype (a GPU buffer of the wrong width
            // is a silent bug), so a missing dtype is said in these words, not an overload error.
            if (dtype.is_none())
                fail(ErrorKind::type, "empty(): a dtype is required (stridex has no default dtype), as in ",
                     "stridex.empty((2, 3), 'float32')");
            const Dtype dt = dtype_arg(dtype.ptr(), "empty(): dtype");
            // 'K' (the source's axis order) has no source here: C, as NumPy's empty_like without one.
            const Order o = parse_order(order) == Order::F ? Order::F : Order::C;
            const Device where = device_arg(device.ptr(), "empty(): device", /*ints_are_cuda_ordinals=*/false);
            const std::intptr_t s = engine_stream(parse_stream(stream.ptr()));
            std::optional<PyAllocator> holder;
            const Allocator* a = choose_allocator(allocator, like, holder);
            View v = allocate(extents, dt, where, o, /*subbyte_padded=*/false, s, a);
            // Device memory is ready on its allocation stream (nothing to wait for on the host).
            if (where.type == DeviceType::kCUDA) v.set_stream(s == kNoStream ? kDefaultStream : s);
            return fresh(std::move(v));
        },
        nb::arg("shape"), nb::arg("dtype").none() = nb::none(), nb::kw_only(), nb::arg("device") = "cpu",
        nb::arg("order") = "C", nb::arg("stream") = nb::none(), nb::arg("allocator") = nb::none(),
        nb::arg("like") = nb::none(),
        nb::sig("def empty(shape: typing.SupportsIndex | collections.abc.Sequence[typing.SupportsIndex], dtype: "
                "stridex.typing.DtypeLike, *, device: stridex.typing.DeviceLike = 'cpu', order: typing.Literal['C', "
                "'F', 'K'] = 'C', "
                "stream: object = None, allocator: object = None, like: object = None) -> View"),
        "A fresh, uninitialised, writable View on cpu, cuda:N, cuda_host (pinned) or cuda_managed memory. Device "
        "memory comes from stridex's pool of the GPU, allocated on `stream` (None: the legacy default stream), "
        "unless `allocator` ('stridex', 'torch', 'cupy', 'rmm' or an allocator object), `like` (an array whose "
        "framework allocates) or stridex.set_allocator names another (docs/memory.md).");

    nb::handle cls = nb::type<PyView>();
    cls.attr("copy") = nb::cpp_function(
        [](const PyView& self, nb::handle device, const std::string& order, nb::handle stream, nb::handle allocator,
           nb::handle like) { return copy_of(self, device, order, stream, allocator, like); },
        nb::is_method(), nb::name("copy"), nb::scope(cls), nb::arg("device") = nb::none(), nb::arg("order") = "C",
        nb::kw_only(), nb::arg("stream") = nb::none(), nb::arg("allocator") = nb::none(), nb::arg("like") = nb::none(),
        nb::sig("def copy(self, device: stridex.typing.DeviceLike | None = None, order: typing.Literal['C', 'F', 'K'] "
                "= 'C', *, "
                "stream: object = None, allocator: object = None, like: object = None) -> View"),
        "A fresh copy on `device` (this view's by default) in element order 'C', 'F' or 'K' (the source's axis "
        "order). Queued on `stream` (None: legacy default stream), its memory allocated on that stream (by "
        "`allocator` or `like`'s framework when given, see stridex.empty); the result records the stream it is "
        "ready on.");
    cls.attr("contiguous") = nb::cpp_function(
        [](nb::handle self, nb::handle stream, nb::handle allocator, nb::handle like) -> nb::object {
            const PyView& v = py_view(self.ptr());
            if (v.view.layout().is_c_contiguous()) return nb::borrow(self);
            return copy_of(v, v.view.device(), Order::C, stream, allocator, like);
        },
        nb::is_method(), nb::name("contiguous"), nb::scope(cls), nb::kw_only(), nb::arg("stream") = nb::none(),
        nb::arg("allocator") = nb::none(), nb::arg("like") = nb::none(),
        nb::sig("def contiguous(self, *, stream: object = None, allocator: object = None, like: object = None) -> "
                "View"),
        "This view if it is C-contiguous, else a C-contiguous copy on the same device.");
    cls.attr("to") = nb::cpp_function(
        [](nb::handle self, nb::handle device, nb::handle stream, nb::handle allocator, nb::handle like) -> nb::object {
            const PyView& v = py_view(self.ptr());
            const Device target = device_arg(device.ptr(), "View.to(): device", /*ints_are_cuda_ordinals=*/false);
            if (target == v.view.device()) return nb::borrow(self);
            return copy_of(v, target, Order::K, stream, allocator, like);
        },
        nb::is_method(), nb::name("to"), nb::scope(cls), nb::arg("device"), nb::kw_only(),
        nb::arg("stream") = nb::none(), nb::arg("allocator") = nb::none(), nb::arg("like") = nb::none(),
        nb::sig("def to(self, device: stridex.typing.DeviceLike, *, stream: object = None, allocator: object = None, "
                "like: object "
                "= None) -> View"),
        "This view if it is on `device` already, else a copy there (keeping the source's axis order).");

    // The copy module's protocol. Without these, copy.copy and copy.deepcopy fall back to
    // __reduce__, which shares the memory with another process (stridex.ipc): an alias for shared
    // memory, a BufferError for private memory, though no process is involved.
    cls.attr("__copy__") = nb::cpp_function(
        [](const PyView& self) { return wrap_view(self.view, self.source, self.element); }, nb::is_method(),
        nb::name("__copy__"), nb::scope(cls), nb::sig("def __copy__(self) -> View"),
        "copy.copy(view): a new View of the same memory (same dtype, shape, strides, device, read-only flag and "
        "stream), keeping the memory's owner alive. No data is copied.");
    cls.attr("__deepcopy__") = nb::cpp_function(
        [](const PyView& self, nb::handle) {
            return copy_of(self, self.view.device(), Order::K, nb::none(), nb::none(), nb::none());
        },
        nb::is_method(), nb::name("__deepcopy__"), nb::scope(cls), nb::arg("memo"),
        nb::sig("def __deepcopy__(self, memo: dict[int, typing.Any], /) -> View"),
        "copy.deepcopy(view): a copy of the data on the same device, as view.copy(order='K'): fresh writable memory, "
        "queued on the legacy default stream after the view's pending work (the result records the stream), its "
        "memory from the default allocator (stridex.set_allocator).");
}

}  // namespace stridex::python
