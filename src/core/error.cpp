#include "stridex/error.hpp"

namespace stridex {

std::string_view to_string(ErrorKind kind) noexcept {
    switch (kind) {
        case ErrorKind::buffer: return "buffer";
        case ErrorKind::type: return "type";
        case ErrorKind::value: return "value";
        case ErrorKind::index: return "index";
        case ErrorKind::cuda: return "cuda";
        case ErrorKind::unsupported: return "unsupported";
    }
    return "unknown";
}

}  // namespace stridex
