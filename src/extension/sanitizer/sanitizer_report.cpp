// The sanitizer's reports (sanitizer_report.hpp): their words and where they go.
#include "sanitizer/sanitizer_report.hpp"

#include "common/limited_api.hpp"

#include <nanobind/stl/string.h>

#include <array>
#include <atomic>
#include <cstring>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "stridex/cuda/stream.hpp"
#include "stridex/error.hpp"

namespace nb = nanobind;

namespace stridex::python::sanitizer::report {
namespace {

using log::Entry;
using log::Stack;

const char* const kKindNames[kKinds] = {"no_sync", "reuse_after_release", "release_pending", "ipc_unwaited"};

// The report counts and the first reports (tests and the summary), guarded by g_mutex.
std::mutex g_mutex;
std::array<std::uint64_t, kKinds> g_counts{};
std::vector<std::pair<int, std::string>> g_recent;  // at most kRecent
constexpr std::size_t kRecent = 256;

std::atomic<bool> g_raise{false};
PyObject* g_warning = nullptr;  // stridex.StreamRaceWarning
PyObject* g_error = nullptr;    // stridex.StreamRaceError

std::string package_dir() {  // stridex's own frames are not the user's hand-over
    static std::string dir = [] {
        nb::object mod = nb::steal(PyImport_ImportModule("stridex"));
        if (!mod.is_valid()) {
            PyErr_Clear();
            return std::string();
        }
        nb::object file = nb::steal(PyObject_GetAttrString(mod.ptr(), "__file__"));
        if (!file.is_valid() || !PyUnicode_Check(file.ptr())) {
            PyErr_Clear();
            return std::string();
        }
        std::string path = PyUnicode_AsUTF8(file.ptr());
        return path.substr(0, path.rfind('/') + 1);
    }();
    return dir;
}

std::string format_stack(const Stack& s) {
    const std::string own = package_dir();
    std::string out;
    int shown = 0;
    for (int i = 0; i < s.size && shown < 4; ++i) {
#ifdef Py_LIMITED_API
        const nb::object file_attr = nb::steal(PyObject_GetAttrString(s.frames[i].code.ptr(), "co_filename"));
        const nb::object name_attr = nb::steal(PyObject_GetAttrString(s.frames[i].code.ptr(), "co_name"));
        const char* file = file_attr.is_valid() ? PyUnicode_AsUTF8(file_attr.ptr()) : nullptr;
        const char* name = name_attr.is_valid() ? PyUnicode_AsUTF8(name_attr.ptr()) : nullptr;
#else
        auto* code = reinterpret_cast<PyCodeObject*>(s.frames[i].code.ptr());
        const char* file = PyUnicode_AsUTF8(code->co_filename);
        const char* name = PyUnicode_AsUTF8(code->co_name);
#endif
        if (!file || !name) {
            PyErr_Clear();
            continue;
        }
        if (!own.empty() && std::strncmp(file, own.c_str(), own.size()) == 0 && i + 1 < s.size) continue;
        out += "\n      ";
        out += file;
#if PY_VERSION_HEX >= 0x030B0000 && !defined(Py_LIMITED_API)
        const int line = PyCode_Addr2Line(code, s.frames[i].line);
#else
        const int line = s.frames[i].line;
#endif
        out += ":" + std::to_string(line) + " in " + name;
        ++shown;
    }
    if (shown == 0) out = "\n      (no Python frames: called from native code)";
    return out;
}

std::string range_name(const Entry& e) {
    return "[" + hex(e.lo) + ", " + hex(e.hi) + ") (" + std::to_string(e.hi - e.lo) + " bytes)";
}

// "torch.Tensor": the top-level package of the type's module, and the type's name.
std::string type_name_of(PyObject* type) {
    auto* t = reinterpret_cast<PyTypeObject*>(type);
    nb::object module = nb::steal(PyObject_GetAttrString(type, "__module__"));
    std::string out;
    if (module.is_valid() && PyUnicode_Check(module.ptr())) {
        out = PyUnicode_AsUTF8(module.ptr());
        out = out.substr(0, out.find('.')) + ".";
    } else {
        PyErr_Clear();
    }
    const char* tp_name = type_tp_name(t);
    const char* name = std::strrchr(tp_name, '.');
    return out + (name ? name + 1 : tp_name);
}

std::string producer_name(const Entry& e) {
    if (e.producer_label) return e.producer_label;
    if (!e.producer_type.is_valid()) return "stridex (no owner object)";
    return type_name_of(e.producer_type.ptr());
}

// "legacy default stream", "stream 0x...", "none".
std::string stream_name(std::intptr_t s) {
    if (s == kNoStream) return "none";
    if (s == cuda::StreamRef::kLegacy) return "legacy default stream";
    if (s == cuda::StreamRef::kPerThread) return "per-thread default stream";
    return "stream " + hex(static_cast<std::uint64_t>(s));
}

// "\n  label: door, producer P on S, consumer on C, device [lo, hi) (n bytes)" and the stack.
std::string describe(const char* label, const Entry& e) {
    return std::string("\n  ") + label + ": " + e.door + ", producer " + producer_name(e) + " on " +
           stream_name(e.producer_stream) + ", consumer on " + stream_name(e.consumer_stream) + ", " + e.device.name() +
           " " + range_name(e) + format_stack(e.stack);
}

// The report's words, from what the check found.
std::string text(const Finding& f) {
    const Entry& now = f.now;
    switch (f.kind) {
        case kNoSync:
            if (f.how == Unordered::view_used)
                return "handed over with no ordering (stream=-1) while the View's " + stream_name(now.producer_stream) +
                       " still has pending work (pass the consumer's stream)" + describe("this hand-over", now);
            return std::string(f.how == Unordered::no_sync
                                   ? "handed over with stream=NO_SYNC"
                                   : "handed over by a producer that ignores the consumer's stream") +
                   " while the producer's " + stream_name(now.producer_stream) +
                   " still has pending work (pass the consumer's stream, or synchronize first)" +
                   describe("this hand-over", now);
        case kReuse:
            return "memory handed over again while the consumer of its released owner may still be reading it on " +
                   stream_name(f.before->consumer_stream) +
                   " (record the consumer's stream with the producer's "
                   "allocator, e.g. tensor.record_stream(s), or keep the owner alive until that work is done)" +
                   describe("earlier hand-over (owner released)", *f.before) + describe("this hand-over", now);
        case kRelease:
            return "View released with the last reference to its owner while work on its " +
                   stream_name(now.consumer_stream) + " may still use the memory; the producer's allocator (on " +
                   stream_name(f.before->producer_stream) +
                   ") was given no event (keep the View or its owner alive until that work is done, or record "
                   "the stream with the producer, e.g. tensor.record_stream(s))" +
                   describe("hand-over", *f.before) + describe("release", now);
        case kIpc:
        case kKinds: break;
    }
    return "IPC View used before its producer's event was waited for (use it on a stream: stream=... orders "
           "it after the producer's work)" +
           describe("IPC import", *f.before) + describe("this use", now);
}

}  // namespace

void make(const Finding& f) {
    const std::string message = std::string("stridex sanitizer: ") + kKindNames[f.kind] + ": " + text(f);
    {
        const std::lock_guard lock(g_mutex);
        ++g_counts[f.kind];
        if (g_recent.size() < kRecent) g_recent.emplace_back(f.kind, message);
    }
    if (f.may_raise && g_raise.load(std::memory_order_relaxed)) {
        PyErr_SetString(g_error, message.c_str());
        throw nb::python_error();
    }
    if (PyErr_WarnEx(g_warning, message.c_str(), 1) < 0) throw nb::python_error();
}

void set_types(PyObject* warning, PyObject* error) noexcept {
    g_warning = warning;
    g_error = error;
}

void set_raise_mode(bool raise) noexcept { g_raise.store(raise, std::memory_order_relaxed); }
bool raise_mode() noexcept { return g_raise.load(std::memory_order_relaxed); }

nb::dict counts() {
    nb::dict out;
    const std::lock_guard lock(g_mutex);
    for (int k = 0; k < kKinds; ++k) out[kKindNames[k]] = g_counts[k];
    return out;
}

nb::list recent() {
    nb::list out;
    const std::lock_guard lock(g_mutex);
    for (const auto& [kind, message] : g_recent) out.append(nb::make_tuple(kKindNames[kind], message));
    return out;
}

void forget() {
    const std::lock_guard lock(g_mutex);
    g_counts = {};
    g_recent.clear();
}

std::string summary() {
    const std::lock_guard lock(g_mutex);
    std::uint64_t total = 0;
    for (int k = 0; k < kKinds; ++k) total += g_counts[k];
    if (total == 0) return {};
    std::string line = "stridex sanitizer: " + std::to_string(total) + " report(s)";
    for (int k = 0; k < kKinds; ++k) line += std::string(", ") + kKindNames[k] + " " + std::to_string(g_counts[k]);
    return line + "\n";
}

}  // namespace stridex::python::sanitizer::report
