// View -> mdspan with layout_stride: cuda::std::mdspan when the CCCL headers are on the include
// path (the CUDA toolkit ships them under include/cccl), std::mdspan where the standard library
// has it. Both are header-only, so this header adds no link dependency.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <utility>

#include "stridex/view.hpp"

#if __has_include(<mdspan>)
#include <mdspan>
#endif
#if __has_include(<cuda/std/mdspan>)
#include <cuda/std/mdspan>
#define STRIDEX_HAS_CUDA_STD_MDSPAN 1
#endif

namespace stridex {

namespace detail {
// layout_stride requires every stride to be positive; broadcast (0) and reversed (<0) axes have no
// mdspan equivalent, so they are refused rather than silently copied.
void check_mdspan_strides(const View& view);

template <class Mdspan, class Extents, class Mapping, class T, std::size_t... Axis>
Mdspan make_mdspan(const View& view, std::index_sequence<Axis...>) {
    constexpr std::size_t rank = sizeof...(Axis);
    auto typed = view.as<T, rank>();
    check_mdspan_strides(view);
    // The mapping's own array type, so that std:: and cuda::std:: each get theirs.
    using Strides = decltype(std::declval<Mapping>().strides());
    const Extents extents(view.shape()[Axis]...);
    return Mdspan(typed.data(), Mapping(extents, Strides{view.strides()[Axis]...}));
}
}  // namespace detail

#if defined(__cpp_lib_mdspan)
template <class T, std::size_t Rank>
using std_mdspan = std::mdspan<T, std::dextents<std::int64_t, Rank>, std::layout_stride>;

template <class T, std::size_t Rank>
std_mdspan<T, Rank> to_std_mdspan(const View& view) {
    using Extents = std::dextents<std::int64_t, Rank>;
    return detail::make_mdspan<std_mdspan<T, Rank>, Extents, std::layout_stride::mapping<Extents>, T>(
        view, std::make_index_sequence<Rank>());
}
#endif

#if defined(STRIDEX_HAS_CUDA_STD_MDSPAN)
template <class T, std::size_t Rank>
using cuda_mdspan = cuda::std::mdspan<T, cuda::std::dextents<std::int64_t, Rank>, cuda::std::layout_stride>;

template <class T, std::size_t Rank>
cuda_mdspan<T, Rank> to_cuda_mdspan(const View& view) {
    using Extents = cuda::std::dextents<std::int64_t, Rank>;
    return detail::make_mdspan<cuda_mdspan<T, Rank>, Extents, cuda::std::layout_stride::mapping<Extents>, T>(
        view, std::make_index_sequence<Rank>());
}
#endif

}  // namespace stridex
