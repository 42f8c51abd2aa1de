// The Driver: error text, per-device caches (CUdevice, primary context, event pool), the active
// driver and its test override, and ContextGuard.
#include "stridex/cuda/driver.hpp"
#include "side_stream.hpp"
#include "stridex/cuda/memory.hpp"

#include <atomic>
#include <string>

namespace stridex::cuda {

namespace {
constexpr CUresult kStubLibrary = 34;  // CUDA_ERROR_STUB_LIBRARY
}  // namespace

Driver::Driver(const DriverTable& table, std::string library) : table_(table) {
    if (!table_.init) {
        reason_ = "CUDA driver " + library + " has no cuInit";
        return;
    }
    const CUresult r = table_.init(0);
    if (r != result::success) {
        // Typically CUDA_ERROR_NO_DEVICE: a driver is installed but no GPU is visible.
        reason_ = "CUDA driver " + library + ": cuInit: " + describe(r);
        return;
    }
    usable_ = true;
    if (table_.driver_get_version) table_.driver_get_version(&version_);
    int count = 0;
    if (table_.device_get_count && table_.device_get_count(&count) == result::success && count > 0)
        device_count_ = count;
    // Sized once: the device count cannot change after cuInit (CUDA_VISIBLE_DEVICES is read then).
    devices_.assign(static_cast<std::size_t>(device_count_), -1);
    contexts_.assign(static_cast<std::size_t>(device_count_), nullptr);
    events_.resize(static_cast<std::size_t>(device_count_));
}

std::unique_ptr<Driver> Driver::unavailable(std::string reason) {
    std::unique_ptr<Driver> d(new Driver());
    d->reason_ = std::move(reason);
    return d;
}

Driver::~Driver() {
    detail::forget_pools(*this);  // memory.hpp: a later Driver at this address must not see them
    forget_side_streams(*this);   // side_stream.hpp: likewise
    if (!usable_) return;
    for (auto& pool : events_)
        for (CUevent e : pool) try_call(table_.event_destroy, e);
    for (std::size_t i = 0; i < contexts_.size(); ++i)
        if (contexts_[i]) try_call(table_.device_primary_ctx_release, devices_[i]);
}

// Every CUDA entry point ends here without a driver: the reason, and what still works, since the
// caller (memory_stats() on a laptop, a device= left at a CUDA default) may not know it asked for
// CUDA at all.
void Driver::fail_unusable() const {
    throw Error(ErrorKind::cuda, reason_ + "; without a usable CUDA driver only host memory works (device='cpu')");
}

void Driver::fail_missing(const char* name) {
    fail(ErrorKind::cuda, name, " is not provided by the loaded CUDA driver (is it older than CUDA 12?)");
}

std::string Driver::describe(CUresult r) const {
    const char* name = nullptr;
    const char* text = nullptr;
    // Unknown codes make both calls fail (CUDA_ERROR_INVALID_VALUE) and leave the strings unset.
    if (table_.get_error_name && table_.get_error_name(r, &name) != result::success) name = nullptr;
    if (table_.get_error_string && table_.get_error_string(r, &text) != result::success) text = nullptr;
    if (!name && r == kStubLibrary) {
        // The link stub answers every call with this code and cannot name it: say what it means.
        return "CUDA_ERROR_STUB_LIBRARY (the loaded libcuda is the CUDA toolkit's link stub, not a driver: "
               "check LD_LIBRARY_PATH)";
    }
    std::string out = name ? name : "CUDA error " + std::to_string(r);
    out += " (";
    out += text ? text : "no description from the driver";
    out += ')';
    return out;
}

void Driver::fail_call(const char* name, CUresult r) const {
    std::string what = std::string(name) + ": " + describe(r);
    // cuInit succeeded in this process's image, so "not initialised" now means a fork inherited it.
    if (r == result::not_initialized)
        what += "; a process forked after CUDA was initialised cannot use CUDA (start it with 'spawn')";
    throw DriverError(std::move(what), r);
}

void Driver::check_ordinal(int ordinal) const {
    if (!usable_) fail_unusable();
    if (ordinal < 0 || ordinal >= device_count_)
        fail(ErrorKind::value, "CUDA device ", ordinal, " does not exist (the driver sees ", device_count_,
             device_count_ == 1 ? " device)" : " devices)");
}

CUdevice Driver::device(int ordinal) {
    check_ordinal(ordinal);
    const std::lock_guard lock(mutex_);
    CUdevice& dev = devices_[static_cast<std::size_t>(ordinal)];
    if (dev < 0) {
        CUdevice found = -1;
        call("cuDeviceGet", table_.device_get, &found, ordinal);
        dev = found;
    }
    return dev;
}

CUcontext Driver::primary_context(int ordinal) {
    const CUdevice dev = device(ordinal);
    const std::lock_guard lock(mutex_);
    CUcontext& ctx = contexts_[static_cast<std::size_t>(ordinal)];
    // Retained once per device for the life of the process: retaining per call would cost a
    // driver round trip each time, and releasing the last reference would destroy the context
    // (and every allocation in it) under torch's or CuPy's feet.
    if (!ctx) call("cuDevicePrimaryCtxRetain", table_.device_primary_ctx_retain, &ctx, dev);
    return ctx;
}

CUevent Driver::acquire_event(int ordinal) {
    check_ordinal(ordinal);
    {
        const std::lock_guard lock(mutex_);
        auto& pool = events_[static_cast<std::size_t>(ordinal)];
        if (!pool.empty()) {
            CUevent e = pool.back();
            pool.pop_back();
            return e;
        }
    }
    CUevent e = nullptr;
    // Timing off: timing events cost more to record and we never read a time.
    call("cuEventCreate", table_.event_create, &e, cu::kEventDisableTiming);
    return e;
}

void Driver::release_event(int ordinal, CUevent event) noexcept {
    if (!event || ordinal < 0 || ordinal >= device_count_) return;
    const std::lock_guard lock(mutex_);
    try {
        events_[static_cast<std::size_t>(ordinal)].push_back(event);
    } catch (...) {
        try_call(table_.event_destroy, event);  // out of memory for the pool: just drop the event
    }
}

// ---- The active driver --------------------------------------------------------------------------

namespace {
std::atomic<Driver*> g_override{nullptr};

Driver& process_driver() {
    // A function-local static: loaded once, thread-safely, on first use. Leaked on purpose.
    static Driver* const loaded = detail::load_driver("libcuda.so.1").release();
    return *loaded;
}
}  // namespace

Driver& driver() {
    if (Driver* d = g_override.load(std::memory_order_acquire)) return *d;
    return process_driver();
}

bool cuda_available() noexcept { return device_count() > 0; }

int device_count() noexcept {
    try {
        const Driver& d = driver();
        return d.usable() ? d.device_count() : 0;
    } catch (...) {  // only allocation failure can get here
        return 0;
    }
}

DriverOverride::DriverOverride(const DriverTable& table)
    : driver_(std::make_unique<Driver>(table, "test driver")),
      previous_(g_override.exchange(driver_.get(), std::memory_order_acq_rel)) {}

DriverOverride::DriverOverride(const char* library)
    : driver_(detail::load_driver(library)), previous_(g_override.exchange(driver_.get(), std::memory_order_acq_rel)) {}

DriverOverride::~DriverOverride() { g_override.store(previous_, std::memory_order_release); }

// ---- ContextGuard -------------------------------------------------------------------------------

ContextGuard::ContextGuard(Driver& driver, int ordinal) : driver_(driver) {
    context_ = driver.primary_context(ordinal);
    const DriverTable& api = driver.api();
    driver.call("cuCtxGetCurrent", api.ctx_get_current, &previous_);
    if (previous_ != context_) {
        driver.call("cuCtxSetCurrent", api.ctx_set_current, context_);
        switched_ = true;
    }
}

ContextGuard::~ContextGuard() {
    // Restores exactly what the caller had, including "no context" (nullptr).
    if (switched_) driver_.try_call(driver_.raw().ctx_set_current, previous_);
}

}  // namespace stridex::cuda
