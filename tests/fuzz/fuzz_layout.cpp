// Fuzzes layout validation and the layout arithmetic imported views go through: shapes and
// strides (in elements or in bytes, as the interfaces give them), the byte span inside a buffer
// at an offset (the array interface's 'offset'), a View over any address, and chains of
// index/slice/permute/reshape/expand/squeeze. Every accepted view must obey the byte rules.
#include <cstdint>
#include <vector>

#include "fuzz_input.hpp"
#include "stridex/error.hpp"
#include "stridex/view.hpp"

using namespace stridex;

namespace {

__extension__ typedef __int128 i128;

// The byte rules of docs/core.md, recomputed in 128-bit arithmetic.
void check_view(const View& v) {
    const i128 item = v.itemsize();
    i128 lo = 0, hi = 0, size = 1;
    for (int a = 0; a < v.ndim(); ++a) {
        const i128 e = v.shape()[static_cast<std::size_t>(a)], s = v.strides()[static_cast<std::size_t>(a)];
        fuzz::require(e >= 0);
        size *= e;
        const i128 b = s * item;
        fuzz::require(b >= INT64_MIN && b <= INT64_MAX);
        if (e > 1) (b < 0 ? lo : hi) += b * (e - 1);
    }
    fuzz::require(size == v.size());
    if (size == 0) return;
    if (!v.is_packed_subbyte()) {
        fuzz::require(size * item <= INT64_MAX);
        const Span span = v.byte_span();
        fuzz::require(span.lo == lo && span.hi == hi + item);
    }
    const Span span = v.byte_span();
    const i128 first = static_cast<i128>(reinterpret_cast<std::uintptr_t>(v.data())) + v.byte_offset();
    fuzz::require(first + span.lo >= 0 && first + span.hi <= static_cast<i128>(UINTPTR_MAX));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    fuzz::Input in(data, size);
    const int ndim = in.take<std::uint8_t>() % 12;
    std::vector<std::int64_t> shape(static_cast<std::size_t>(ndim)), strides(shape.size());
    for (auto& e : shape) e = in.extent();
    for (auto& s : strides) s = in.stride();
    const std::uint8_t mode = in.take<std::uint8_t>();
    const auto code = static_cast<std::uint8_t>(in.take<std::uint8_t>() % 18);
    const auto bits = in.take<std::uint8_t>();
    try {
        const Dtype dtype = Dtype::from_raw(code, bits, 1);
        dtype.validate();
        Layout layout = mode % 3 == 0   ? Layout(shape, strides)
                        : mode % 3 == 1 ? Layout::from_byte_strides(shape, strides, dtype.itemsize())
                                        : Layout::contiguous(shape);
        // The array interface's bounds check: offset and buffer length are foreign too.
        const Span span = layout.byte_span(dtype.itemsize());
        const std::int64_t offset = in.take<std::int64_t>(), length = in.take<std::int64_t>();
        if (span_within(span, offset, length))
            fuzz::require(static_cast<i128>(offset) + span.lo >= 0 && static_cast<i128>(offset) + span.hi <= length);
        // A view anywhere in the address space: never dereferenced, only checked.
        const auto address = in.take<std::uintptr_t>();
        const std::int64_t byte_offset = in.take<std::int32_t>();
        View v(reinterpret_cast<void*>(address), byte_offset, std::move(layout), dtype, Device::cpu(), false, Owner(),
               in.flag());
        check_view(v);
        for (int step = 0; step < 8 && !in.empty(); ++step) {
            const int axis = static_cast<int>(in.take<std::int8_t>() % 13);
            try {
                switch (in.take<std::uint8_t>() % 8) {
                    case 0: v = v.index(axis, in.extent()); break;
                    case 1: v = v.slice(axis, Slice{in.extent(), in.extent(), in.stride()}); break;
                    case 2: {
                        std::vector<int> axes(static_cast<std::size_t>(v.ndim()));
                        for (auto& a : axes) a = static_cast<int>(in.take<std::int8_t>() % 13);
                        v = v.permute(axes);
                        break;
                    }
                    case 3: {
                        std::vector<std::int64_t> to(in.take<std::uint8_t>() % 6);
                        for (auto& e : to) e = in.take<std::uint8_t>() < 30 ? -1 : in.extent();
                        v = v.reshape(to);
                        break;
                    }
                    case 4: v = v.expand(axis); break;
                    case 5: v = v.squeeze(axis); break;
                    case 6: v = v.transpose(); break;
                    default: (void)v.layout().merged(); break;
                }
            } catch (const Error&) {
                continue;  // a refused operation leaves v as it was
            }
            check_view(v);
        }
    } catch (const Error&) {
    }
    return 0;
}
