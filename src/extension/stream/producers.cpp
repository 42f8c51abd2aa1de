// The producer quirk table (see producers.hpp). One row per framework and version range; the
// facts are in docs/protocols.md ("What frameworks really do"). Add a row here, a test in
// tests/python/test_stream_policy.py and a line in docs/import.md.
#include "stream/producers.hpp"

#include "common/limited_api.hpp"
#include "stridex/python/framework_of.hpp"

#include <array>
#include <cstring>

namespace stridex::python {
namespace {

using K = DlpackKeywords;

// Each row names only where its producer departs from the generic row's defaults (producers.hpp).
constexpr std::array kRows{
    ProducerRow{.name = "numpy<2.1",
                .module = "numpy",
                .package = "numpy",
                .until = {2, 1, 0},
                .keywords = K::stream_only,
                .host_only = true,
                .why = "NumPy < 2.1: __dlpack__(stream=None) only; host memory, so stream must be None"},
    ProducerRow{.name = "numpy",
                .module = "numpy",
                .package = "numpy",
                .since = {2, 1, 0},
                .host_only = true,
                .shortcuts = {Shortcut::numpy_struct},
                .why = "NumPy: host memory only and stream must be None (RuntimeError, ValueError in 2.5): no "
                       "__dlpack_device__ call, no stream"},
    ProducerRow{.name = "torch<2.9",
                .module = "torch",
                .package = "torch",
                .until = {2, 9, 0},
                .keywords = K::stream_only,
                .takes_per_thread = false,
                .spell_none = true,
                .refusals_final = true,
                .records_streams = true,
                .why = "torch < 2.9: __dlpack__(stream) only; stream 2 raises BufferError (pytorch#150217), 0 asserts; "
                       "what __dlpack__ refuses (a conjugate view) __cuda_array_interface__ would export wrongly"},
    ProducerRow{.name = "torch",
                .module = "torch",
                .package = "torch",
                .since = {2, 9, 0},
                .takes_per_thread = false,
                .needs_current_device = true,
                .spell_none = true,
                .exchange_skips_refusals = true,
                .refusals_final = true,
                .records_streams = true,
                .shortcuts = {Shortcut::torch_borrowed, Shortcut::torch_getter},
                .why = "torch >= 2.9: stream 2 raises BufferError, 0 asserts; BufferError unless the tensor is on the "
                       "current device; >= 2.10 defaults to stream -1, so None is spelt out; its exchange API exports "
                       "what __dlpack__ refuses (requires_grad, the conjugate bit); those refusals are final "
                       "(__cuda_array_interface__ would export a conjugate view wrongly)"},
    ProducerRow{
        .name = "jax<0.4.27",
        .module = "jax|jaxlib",
        .package = "jax",
        .until = {0, 4, 27},
        .keywords = K::stream_only,
        .takes_no_sync = false,
        .immutable = true,
        .why = "JAX < 0.4.27: stream only; an int stream is a raw CUstream, so -1 fails (CUDA_ERROR_INVALID_HANDLE)"},
    ProducerRow{.name = "jax",
                .module = "jax|jaxlib",
                .package = "jax",
                .since = {0, 4, 27},
                .takes_no_sync = false,
                .immutable = true,
                .shortcuts = {Shortcut::jaxlib_export},
                .why = "JAX: -1 is taken as a CUstream and fails; legacy capsules whatever max_version says; arrays "
                       "are immutable"},
    ProducerRow{.name = "cupy<13.4",
                .module = "cupy",
                .package = "cupy",
                .until = {13, 4, 0},
                .keywords = K::stream_only,
                .why = "CuPy < 13.4: stream only"},
    ProducerRow{.name = "cupy",
                .module = "cupy",
                .package = "cupy",
                .since = {13, 4, 0},
                .repair_negative_strides = true,
                .shortcuts = {Shortcut::cupy_c_api, Shortcut::cupy_layout},
                .why = "CuPy: -1 no sync, other ints an event wait; >= 13.4 exports negative strides divided as "
                       "unsigned (cupy#10172)"},
    ProducerRow{.name = "warp",
                .module = "warp",
                .package = "warp",
                .keywords = K::stream_only,
                .why = "Warp: __dlpack__(stream=None) only, legacy capsules"},
    ProducerRow{.name = "mlx<0.32",
                .module = "mlx",
                .package = "mlx",
                .until = {0, 32, 0},
                .keywords = K::none,
                .ignores_stream = true,
                .why = "MLX <= 0.31: __dlpack__() takes no keywords"},
    ProducerRow{.name = "mlx",
                .module = "mlx",
                .package = "mlx",
                .since = {0, 32, 0},
                .ignores_stream = true,
                .why = "MLX >= 0.32: keywords accepted (and ignored), legacy capsules"},
    ProducerRow{.name = "cuda.core",
                .module = "cuda.core",
                .package = "cuda.core",
                .ignores_stream = true,
                .why = "cuda.core StridedMemoryView: stream ignored"},
    ProducerRow{.name = "nanobind",
                .module = "nanobind",
                .package = "nanobind",
                .ignores_stream = true,
                .why = "nanobind ndarray: stream ignored, legacy capsule unless max_version >= (1, 0)"},
    ProducerRow{.name = "generic",
                .module = "",
                .package = "",
                .why = "array API 2023.12: stream None/-1/1/2/handle on CUDA, None on the host; TypeError retried with "
                       "fewer keywords"},
};

// `module` equals one of the '|'-separated names, or starts with one followed by '.'.
bool module_matches(const char* patterns, const char* module) noexcept {
    if (*patterns == '\0') return true;
    const std::size_t length = std::strlen(module);
    for (const char* p = patterns; *p;) {
        const char* end = std::strchr(p, '|');
        const std::size_t n = end ? static_cast<std::size_t>(end - p) : std::strlen(p);
        if (length >= n && std::strncmp(module, p, n) == 0 && (module[n] == '\0' || module[n] == '.')) return true;
        if (!end) break;
        p = end + 1;
    }
    return false;
}

// The package's __version__, read from sys.modules only: an instance of one of its types exists,
// so the package is imported; importing anything here would be a side effect of a type check.
Version package_version(const char* package) noexcept {
    Version unknown{-1, -1, -1};
    PyObject* modules = PyImport_GetModuleDict();                                   // borrowed
    PyObject* module = modules ? PyDict_GetItemString(modules, package) : nullptr;  // borrowed
    if (!module) return unknown;
    PyObject* text = PyObject_GetAttrString(module, "__version__");
    if (!text) {
        PyErr_Clear();
        return unknown;
    }
    const char* utf8 = PyUnicode_Check(text) ? PyUnicode_AsUTF8(text) : nullptr;
    if (!utf8) PyErr_Clear();
    const Version v = utf8 ? parse_version(utf8) : unknown;
    Py_DECREF(text);
    return v;
}

bool in_range(const ProducerRow& row, Version v) noexcept {
    // An unknown version takes the newest row: behaviour converges on the array API over time.
    if (v.major < 0) return row.until == kNewestVersion;
    return row.since <= v && v < row.until;
}

}  // namespace

std::span<const ProducerRow> producer_rows() noexcept { return kRows; }

Version parse_version(const char* text) noexcept {
    int parts[3] = {0, 0, 0};
    int count = 0;
    const char* p = text;
    while (count < 3) {
        if (*p < '0' || *p > '9') break;
        long value = 0;
        while (*p >= '0' && *p <= '9' && value < (1L << 24)) value = value * 10 + (*p++ - '0');
        parts[count++] = static_cast<int>(value);
        if (*p != '.') break;
        ++p;
    }
    if (count == 0) return {-1, -1, -1};
    return {parts[0], parts[1], parts[2]};
}

const ProducerRow& producer_for(PyTypeObject* type) noexcept {
    // The specific row naming a module (with the package's version), for the nearest class that
    // has one (framework_of.hpp); else the generic row.
    const ProducerRow* found = framework_of(type, [](const char* module) -> const ProducerRow* {
        Version version{-2, -2, -2};  // read lazily: only rows that match the module need it
        for (const ProducerRow& row : kRows) {
            if (*row.module == '\0' || !module_matches(row.module, module)) continue;
            if (version.major == -2) version = package_version(row.package);
            if (in_range(row, version)) return &row;
        }
        return nullptr;
    });
    return found ? *found : kRows.back();
}

const ProducerRow* producer_named(const char* name) noexcept {
    for (const ProducerRow& row : kRows)
        if (std::strcmp(row.name, name) == 0) return &row;
    return nullptr;
}

}  // namespace stridex::python
