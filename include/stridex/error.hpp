// stridex::Error: the one exception type of the library.
//
// Every failure carries a kind that the Python layer maps to a built-in exception (see kind
// comments) and a message that says what was expected and what was found. Errors never cross a
// C ABI boundary (DLPack deleters, the exchange API): those entry points catch and translate.
#pragma once

#include <cstdint>
#include <exception>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>

namespace stridex {

enum class ErrorKind : unsigned char {
    buffer,       // a protocol-level refusal of this particular exchange -> BufferError
    type,         // wrong kind of object or dtype                       -> TypeError
    value,        // a malformed value (bad shape, bad interface dict)   -> ValueError
    index,        // an index out of range                               -> IndexError
    cuda,         // a CUDA driver failure or CUDA unavailable           -> RuntimeError
    unsupported,  // valid by the specification, not handled by stridex  -> BufferError
    memory,       // an allocation failed (device or pinned memory)       -> MemoryError
};

std::string_view to_string(ErrorKind kind) noexcept;

class Error : public std::exception {
public:
    Error(ErrorKind kind, std::string message) : kind_(kind), message_(std::move(message)) {}
    ErrorKind kind() const noexcept { return kind_; }
    const char* what() const noexcept override { return message_.c_str(); }
    const std::string& message() const noexcept { return message_; }

private:
    ErrorKind kind_;
    std::string message_;
};

// "0x7f2a00000000": how every message and repr spells an address (lower-case hex, 0x prefix).
std::string hex(std::uint64_t value);

// Foreign text in a message (a typestr, a dtype name, a device string), cut to kLimit characters:
// messages stay short whatever the input's size. `out << excerpt(text)`.
struct Excerpt {
    static constexpr std::size_t kLimit = 64;
    std::string_view text;
    friend std::ostream& operator<<(std::ostream& out, Excerpt e) {
        if (e.text.size() <= kLimit) return out << e.text;
        return out << e.text.substr(0, kLimit) << "... (" << e.text.size() << " characters)";
    }
};
inline Excerpt excerpt(std::string_view text) noexcept { return {text}; }
// The excerpt as its own string (for C-style formatting, e.g. PyErr_Format's %s).
inline std::string to_string(Excerpt e) {
    std::ostringstream out;
    out << e;
    return out.str();
}

// fail(kind, "expected ", a, ", found ", b): builds the message from its parts and throws.
// Kept out of line of hot code by [[gnu::cold]]; callers test first, then call fail.
template <class... Parts>
[[noreturn, gnu::cold, gnu::noinline]] void fail(ErrorKind kind, const Parts&... parts) {
    std::ostringstream out;
    (out << ... << parts);
    throw Error(kind, out.str());
}

}  // namespace stridex
