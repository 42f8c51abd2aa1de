// A set of an enum's values, one bit each: the framework shortcuts a type takes (ShortcutSet), what
// a hand-over is (HandoverFlags). One type, so that such sets read alike and are never a row of
// positional bools.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <type_traits>

namespace stridex::python {

// `E` is an enum class whose values are 0, 1, 2 ...; `Bits` an unsigned type wide enough for them.
template <class E, class Bits = std::uint32_t>
class EnumSet {
    static_assert(std::is_enum_v<E> && std::is_unsigned_v<Bits>);

public:
    constexpr EnumSet() noexcept = default;
    constexpr EnumSet(std::initializer_list<E> values) noexcept {
        for (E v : values) bits_ |= bit(v);
    }
    constexpr bool has(E v) const noexcept { return (bits_ & bit(v)) != 0; }
    constexpr void add(E v) noexcept { bits_ |= bit(v); }
    // Adds `v` where `on`: a flag from a condition, without a branch at the call site.
    constexpr EnumSet with(E v, bool on = true) const noexcept {
        EnumSet out = *this;
        if (on) out.add(v);
        return out;
    }
    static constexpr Bits bit(E v) noexcept { return static_cast<Bits>(Bits{1} << static_cast<unsigned>(v)); }

private:
    Bits bits_ = 0;
};

}  // namespace stridex::python
