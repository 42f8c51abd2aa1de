// Address arithmetic that never wraps: the one home of "an address plus a signed byte offset".
//
// Views, DevicePtr, raw pointers from Python and the driver's allocation ranges all move an
// address by a byte count that comes from foreign input (a capsule's byte_offset, a layout's span,
// a user's `p + n`). A sum outside [0, 2**64) is no address: it is refused, never wrapped.
#pragma once

#include <cstdint>

namespace stridex {

// address - magnitude (negative) or address + magnitude; false when the result leaves [0, 2**64).
// The magnitude form serves offsets of any integer type, INT64_MIN and values beyond INT64_MAX
// included. `*out` is the wrapped value when false: callers use it only for messages.
constexpr bool offset_address(std::uint64_t address, std::uint64_t magnitude, bool negative,
                              std::uint64_t* out) noexcept {
    return negative ? !__builtin_sub_overflow(address, magnitude, out)
                    : !__builtin_add_overflow(address, magnitude, out);
}

// address + offset for a signed offset (exact for INT64_MIN); false when it leaves [0, 2**64).
constexpr bool offset_address(std::uint64_t address, std::int64_t offset, std::uint64_t* out) noexcept {
    const auto bits = static_cast<std::uint64_t>(offset);
    return offset < 0 ? offset_address(address, 0 - bits, true, out) : offset_address(address, bits, false, out);
}

}  // namespace stridex
