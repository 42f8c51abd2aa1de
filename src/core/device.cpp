// stridex::Device (device.hpp): the table of DLPack device types, names and parsing.
#include "stridex/device.hpp"

#include <array>
#include <charconv>

#include "stridex/error.hpp"

namespace stridex {
namespace {

// One row per DLPack device type: the facts every query below reads.
struct TypeInfo {
    DeviceType type;
    std::string_view name;
    bool host_accessible;  // the CPU can dereference it
    bool single_instance;  // one memory space per host, so the name omits the usual ordinal 0
};

constexpr std::array<TypeInfo, 19> kTypes{{
    // type                    name             host   single instance
    {DeviceType::kCPU, "cpu", true, true},
    {DeviceType::kCUDA, "cuda", false, false},
    {DeviceType::kCUDAHost, "cuda_host", true, true},
    {DeviceType::kOpenCL, "opencl", false, false},
    {DeviceType::kVulkan, "vulkan", false, false},
    {DeviceType::kMetal, "metal", false, false},
    {DeviceType::kVPI, "vpi", false, false},
    {DeviceType::kROCM, "rocm", false, false},
    {DeviceType::kROCMHost, "rocm_host", true, true},
    {DeviceType::kExtDev, "ext_dev", false, false},
    {DeviceType::kCUDAManaged, "cuda_managed", true, true},
    {DeviceType::kOneAPI, "oneapi", false, false},
    {DeviceType::kWebGPU, "webgpu", false, false},
    {DeviceType::kHexagon, "hexagon", false, false},
    {DeviceType::kMAIA, "maia", false, false},
    {DeviceType::kTrn, "trn", false, false},
    {DeviceType::kTPU, "tpu", false, false},
    {DeviceType::kTPUHost, "tpu_host", true, true},
    {DeviceType::kAscend, "ascend", false, false},
}};

constexpr bool in_value_order() {
    for (std::size_t i = 0; i < kTypes.size(); ++i) {
        const auto value = static_cast<std::int32_t>(kTypes[i].type);
        if (static_cast<std::int32_t>(i) != (value <= 4 ? value - 1 : value - 3)) return false;
    }
    return true;
}
static_assert(in_value_order(), "kTypes must list device types by value, 1-4 then 7 on");

// The row of a type, found by its value (the table is in value order, and only 5 and 6 are
// missing): every View import asks, so this is a lookup, not a search.
const TypeInfo* info_of(DeviceType type) noexcept {
    const auto value = static_cast<std::int32_t>(type);
    if (value < 1) return nullptr;
    const std::int32_t row = value <= 4 ? value - 1 : value - 3;
    if (row < 0 || row >= static_cast<std::int32_t>(kTypes.size())) return nullptr;
    const TypeInfo& t = kTypes[static_cast<std::size_t>(row)];
    return t.type == type ? &t : nullptr;  // 5 and 6 land on another row
}

[[noreturn]] void bad_device_text(std::string_view text) {
    fail(ErrorKind::value, "invalid device '", excerpt(text),
         "' (expected a type name with an optional non-negative ordinal, such as cpu, cuda, cuda:1, cuda_host or "
         "rocm:0)");
}

// A single-instance type has one memory space per host, so an ordinal other than 0 names nothing:
// "cpu:1" would label host memory as a device that does not exist (and print as a different one).
void check_single_instance(const TypeInfo& t, std::int32_t id, std::string_view text) {
    if (t.single_instance && id != 0)
        fail(ErrorKind::value, "invalid device ", text, ": ", t.name,
             " has one memory space, so its only ordinal is 0 (", t.name, " or ", t.name, ":0)");
}

}  // namespace

std::string_view device_type_name(DeviceType type) noexcept {
    const TypeInfo* t = info_of(type);
    return t ? t->name : "unknown";
}

Device Device::from_raw(std::int32_t type, std::int32_t id) {
    const Device d{static_cast<DeviceType>(type), id};
    if (info_of(d.type) == nullptr)
        fail(ErrorKind::unsupported, "unsupported DLPack device type ", type, " (stridex knows 1 to 4 and 7 to 21)");
    if (id < 0) fail(ErrorKind::value, "device id must be >= 0, found ", id, " for ", device_type_name(d.type));
    return d;
}

Device Device::from_pair(std::int32_t type, std::int32_t id) {
    const Device d = from_raw(type, id);
    check_single_instance(*info_of(d.type), id, "(" + std::to_string(type) + ", " + std::to_string(id) + ")");
    return d;
}

std::string Device::name() const {
    const TypeInfo* t = info_of(type);
    // Not parsable, but a name is needed for error messages about exactly such devices.
    if (t == nullptr)
        return "device(type=" + std::to_string(static_cast<std::int32_t>(type)) + ", id=" + std::to_string(id) + ")";
    if (t->single_instance && id == 0) return std::string(t->name);
    return std::string(t->name) + ":" + std::to_string(id);
}

Device Device::parse(std::string_view text) {
    const auto colon = text.find(':');
    const std::string_view type_name = text.substr(0, colon);
    std::int32_t id = 0;
    if (colon != std::string_view::npos) {
        const std::string_view digits = text.substr(colon + 1);
        const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), id);
        // from_chars takes '-' but not '+', so a sign test catches "cuda:-1"; empty digits fail ec.
        if (ec != std::errc{} || end != digits.data() + digits.size() || id < 0) bad_device_text(text);
    }
    for (const TypeInfo& t : kTypes)
        if (t.name == type_name) {
            check_single_instance(t, id, "'" + std::string(text) + "'");
            return Device{t.type, id};
        }
    bad_device_text(text);
}

bool Device::host_accessible() const noexcept {
    const TypeInfo* t = info_of(type);
    return t != nullptr && t->host_accessible;
}

}  // namespace stridex
