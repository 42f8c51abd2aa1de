// Loading libcuda at run time and filling the DriverTable.
//
// Symbols are resolved through cuGetProcAddress with an explicit API version rather than dlsym:
// the exported names of several functions are versioned (cuMemGetAddressRange_v2,
// cuStreamDestroy_v2, ...) and cuda.h hides that with macros we do not have. Asking the driver for
// "cuMemcpyDtoH" as of CUDA 12.0 returns the variant with 12.0's ABI, whatever the driver's age.
#include <dlfcn.h>

#include <string>

#include "stridex/cuda/driver.hpp"

namespace stridex::cuda::detail {
namespace {

// The ABI every table entry is declared with (DriverTable). Newer drivers keep serving it.
constexpr int kRequestedApiVersion = 12000;
// CU_GET_PROC_ADDRESS_LEGACY_STREAM: the stream-taking functions with legacy default-stream
// semantics, whatever the process was compiled with; stridex passes explicit streams anyway.
constexpr unsigned long long kProcAddressLegacyStream = 1;

using GetProcAddressV2 = CUresult (*)(const char*, void**, int, unsigned long long, int* status);
using GetProcAddressV1 = CUresult (*)(const char*, void**, int, unsigned long long);

class Resolver {
public:
    explicit Resolver(void* library) : library_(library) {
        v2_ = reinterpret_cast<GetProcAddressV2>(dlsym(library, "cuGetProcAddress_v2"));  // CUDA 12.0+
        v1_ = reinterpret_cast<GetProcAddressV1>(dlsym(library, "cuGetProcAddress"));     // CUDA 11.3+
        if (auto get_version = reinterpret_cast<CUresult (*)(int*)>(dlsym(library, "cuDriverGetVersion"))) {
            int version = 0;
            // Never ask for a version newer than the driver: old drivers answer "not found".
            if (get_version(&version) == result::success && version > 0 && version < kRequestedApiVersion)
                version_ = version;
        }
    }

    // `name` is the base name ("cuMemcpyDtoH"); `exported` the symbol to dlsym when the driver is
    // too old for cuGetProcAddress ("cuMemcpyDtoH_v2").
    template <class Fn>
    void bind(Fn& slot, const char* name, const char* exported) const {
        slot = reinterpret_cast<Fn>(lookup(name, exported));
    }

private:
    void* lookup(const char* name, const char* exported) const {
        void* fn = nullptr;
        int status = 0;
        if (v2_ && v2_(name, &fn, version_, kProcAddressLegacyStream, &status) == result::success && fn) return fn;
        fn = nullptr;
        if (v1_ && v1_(name, &fn, version_, kProcAddressLegacyStream) == result::success && fn) return fn;
        return dlsym(library_, exported);
    }

    void* library_;
    GetProcAddressV2 v2_ = nullptr;
    GetProcAddressV1 v1_ = nullptr;
    int version_ = kRequestedApiVersion;
};

}  // namespace

std::unique_ptr<Driver> load_driver(const char* library) {
    dlerror();  // clear a stale message so the one we quote is ours
    // RTLD_LOCAL: the driver's symbols stay out of the global namespace of the process.
    void* handle = dlopen(library, RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
        const char* why = dlerror();
        return Driver::unavailable(std::string("CUDA driver ") + library +
                                   " not found: " + (why ? why : "dlopen failed"));
    }
    // Never dlclosed: see Driver (teardown at exit may still call into it).
    const Resolver r(handle);
    DriverTable t{};
#define STRIDEX_BIND(member, name, exported, parameters) r.bind(t.member, name, exported);
    STRIDEX_DRIVER_FUNCTIONS(STRIDEX_BIND)
#undef STRIDEX_BIND
    if (!t.init)
        return Driver::unavailable(std::string("CUDA driver ") + library + " has no cuInit: not a CUDA driver");
    return std::make_unique<Driver>(t, library);
}

}  // namespace stridex::cuda::detail
