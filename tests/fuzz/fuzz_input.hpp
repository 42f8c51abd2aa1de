// Reads typed values off a fuzzer's input, front to back; past the end every read is 0, so each
// input is a complete test case however short.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <type_traits>

namespace stridex::fuzz {

class Input {
public:
    Input(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}

    template <class T>
    T take() {
        static_assert(!std::is_same_v<T, bool>, "use flag(): not every byte is a valid bool");
        T out{};
        const std::size_t n = size_ - pos_ < sizeof(T) ? size_ - pos_ : sizeof(T);
        if (n) std::memcpy(&out, data_ + pos_, n);
        pos_ += n;
        return out;
    }
    bool flag() { return (take<std::uint8_t>() & 1) != 0; }
    // A string of up to max_length bytes (its length is the next byte).
    std::string_view text(std::size_t max_length = 64) {
        std::size_t n = take<std::uint8_t>() % (max_length + 1);
        if (n > size_ - pos_) n = size_ - pos_;
        std::string_view out(reinterpret_cast<const char*>(data_ + pos_), n);
        pos_ += n;
        return out;
    }
    // Mostly small values (what real arrays have), sometimes any int64 (what attacks use).
    std::int64_t extent() {
        const auto pick = take<std::uint8_t>();
        if (pick < 200) return pick % 9;
        if (pick < 230) return take<std::int16_t>();
        return take<std::int64_t>();
    }
    std::int64_t stride() {
        const auto pick = take<std::uint8_t>();
        if (pick < 180) return static_cast<std::int64_t>(pick % 17) - 8;
        if (pick < 220) return take<std::int32_t>();
        return take<std::int64_t>();
    }
    bool empty() const { return pos_ >= size_; }

private:
    const std::uint8_t* data_;
    std::size_t size_;
    std::size_t pos_ = 0;
};

// Stops the fuzzer with a crash report when an invariant fails (sanitizers print the stack).
[[noreturn]] inline void violated() { __builtin_trap(); }
inline void require(bool ok) {
    if (!ok) violated();
}

}  // namespace stridex::fuzz
