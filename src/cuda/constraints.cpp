// Checking Views against typed constraints (include/stridex/cuda/constraints.hpp). In the CUDA layer, not the
// core: arg::may_copy copies through the copy engine (copy_to), which can copy device memory.
#include "stridex/cuda/constraints.hpp"

#include <sstream>

#include "stridex/cuda/copy.hpp"
#include "stridex/error.hpp"

namespace stridex {

namespace {

std::string requirements_text(const Requirements& r) {
    detail::TextWriter count;
    detail::write_requirements(count, r);
    std::string text(count.size, '\0');
    detail::TextWriter w{text.data()};
    detail::write_requirements(w, r);
    return text;
}

void put_ints(std::ostream& out, std::span<const std::int64_t> values) {
    out << '(';
    for (std::size_t i = 0; i < values.size(); ++i) out << (i ? ", " : "") << values[i];
    out << (values.size() == 1 ? ",)" : ")");
}

}  // namespace

std::string view_summary(const View& view) {
    std::ostringstream out;
    out << view.dtype().name() << ", shape=";
    put_ints(out, view.shape());
    out << ", strides=";
    put_ints(out, view.strides());
    out << ", device=" << view.device().name() << (view.readonly() ? ", read-only" : ", writable");
    return out.str();
}

View conform(const Requirements& r, const View& view) {
    if (satisfies(r, view)) return view;
    if (r.may_copy && detail::satisfies_except_order(r, view)) return contiguous_copy(view, r.order);
    fail(ErrorKind::type, "expected ", requirements_text(r), ", found ", view_summary(view));
}

View contiguous_copy(const View& view, Contiguity order) {
    if (order == Contiguity::any) return view;
    // The copy engine queues the copy after the view's pending work (on its stream, else the legacy
    // default stream), so the result is ready where the caller's input was.
    const std::intptr_t stream = view.stream() != kNoStream ? view.stream() : kDefaultStream;
    return copy_to(view, view.device(), order == Contiguity::c ? Order::C : Order::F, stream);
}

}  // namespace stridex
