// The host copy paths' settings (copy_internal.hpp's HostTuning): the measured defaults, which the
// environment variable STRIDEX_HOST_COPY may override for benchmarking, read at every staged copy
// (so one process can compare settings; reading it costs far less than the copy).
#include <charconv>
#include <cstdlib>
#include <string>
#include <string_view>

#include "copy_internal.hpp"

namespace stridex::cuda::copy_engine {
namespace {

constexpr const char* kVariable = "STRIDEX_HOST_COPY";

[[noreturn]] void bad(std::string_view item, const char* expected) {
    fail(ErrorKind::value, kVariable, ": ", expected, ", found '", std::string(item), "'");
}

std::int64_t number(std::string_view item, std::string_view value, std::int64_t lo, std::int64_t hi,
                    const char* expected) {
    std::int64_t n = 0;
    const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
    if (ec != std::errc{} || end != value.data() + value.size() || n < lo || n > hi) bad(item, expected);
    return n;
}

}  // namespace

HostTuning host_tuning() {
    HostTuning t;
    const char* text = std::getenv(kVariable);
    if (!text) return t;
    std::string_view rest(text);
    while (!rest.empty()) {
        const std::size_t comma = rest.find(',');
        const std::string_view item = rest.substr(0, comma);
        rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
        if (item.empty()) continue;
        const std::size_t eq = item.find('=');
        if (eq == std::string_view::npos) bad(item, "expected key=value items separated by commas");
        const std::string_view key = item.substr(0, eq), value = item.substr(eq + 1);
        if (key == "stage_mib") {
            t.stage_bytes = number(item, value, 1, 256, "stage_mib is 1 to 256") << 20;
        } else if (key == "stages") {
            t.stages = static_cast<std::size_t>(number(item, value, 2, 16, "stages is 2 to 16"));
        } else if (key == "threads") {
            t.threads = static_cast<int>(number(item, value, 1, 64, "threads is 1 to 64"));
        } else if (key == "streaming") {
            t.streaming = number(item, value, 0, 1, "streaming is 0 or 1") == 1;
        } else if (key == "pack_streaming") {
            t.pack_streaming = number(item, value, 0, 1, "pack_streaming is 0 or 1") == 1;
        } else if (key == "register") {
            if (value == "first")
                t.register_policy = detail::HostRegister::first_use;
            else if (value == "reuse")
                t.register_policy = detail::HostRegister::on_reuse;
            else if (value == "never")
                t.register_policy = detail::HostRegister::never;
            else
                bad(item, "register is first, reuse or never");
        } else {
            bad(item, "expected stage_mib, stages, threads, streaming, pack_streaming or register");
        }
    }
    return t;
}

detail::HostRegister host_register() { return host_tuning().register_policy; }

}  // namespace stridex::cuda::copy_engine
