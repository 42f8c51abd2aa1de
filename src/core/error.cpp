// stridex::Error (error.hpp): the names of the error kinds, and hex, the one spelling of addresses.
#include "stridex/error.hpp"

#include <cstdio>

namespace stridex {

std::string_view to_string(ErrorKind kind) noexcept {
    switch (kind) {
        case ErrorKind::buffer: return "buffer";
        case ErrorKind::type: return "type";
        case ErrorKind::value: return "value";
        case ErrorKind::index: return "index";
        case ErrorKind::cuda: return "cuda";
        case ErrorKind::unsupported: return "unsupported";
        case ErrorKind::memory: return "memory";
    }
    return "unknown";
}

std::string hex(std::uint64_t value) {
    char text[24];
    std::snprintf(text, sizeof text, "0x%llx", static_cast<unsigned long long>(value));
    return text;
}

}  // namespace stridex
