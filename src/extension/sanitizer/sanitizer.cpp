// The hand-over race sanitizer (sanitizer.hpp, docs/sanitizer.md): the switch, the four checks,
// the reports and the bindings. The log they read and write is sanitizer_log.hpp. Checks copy what
// they need out of the log and ask the driver (or a test's stand-in) outside its mutex: a Python
// callable or a warning filter may run Python code that hands over again.
#include "sanitizer/sanitizer.hpp"

#include "common/limited_api.hpp"
#include "sanitizer/handover.hpp"

#include <nanobind/stl/string.h>

#include <array>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "common/python_compat.hpp"
#include "sanitizer/sanitizer_log.hpp"
#include "stridex/cuda/capture.hpp"
#include "stridex/cuda/driver.hpp"
#include "stridex/cuda/memory.hpp"
#include "stridex/error.hpp"
#include "stridex/pending.hpp"

namespace nb = nanobind;

namespace stridex::python::sanitizer {
namespace {

using log::describe, log::Entry, log::forget, log::make_entry, log::overlapping, log::owner_alive, log::same_owner,
    log::stream_name;

// ---- the switch -----------------------------------------------------------------------------------
std::mutex g_switch_mutex;  // guards the counts below; g_on follows them
bool g_env_on = false, g_env_raise = false, g_ever_on = false;
int g_contexts = 0, g_raise_contexts = 0;
std::atomic<bool> g_raise{false};

bool g_finished = false;  // at exit: off for good, so that nothing is logged after the log is cleared

void update_switch() {  // with g_switch_mutex held
    const bool on = !g_finished && (g_env_on || g_contexts > 0);
    g_ever_on = g_ever_on || on;
    g_raise.store(g_env_raise || g_raise_contexts > 0, std::memory_order_relaxed);
    detail::g_on.store(on, std::memory_order_relaxed);
}

// The report counts and the last reports (tests and the summary), guarded by g_reports_mutex.
std::mutex g_reports_mutex;
enum Kind : int { kNoSync, kReuse, kRelease, kIpc, kKinds };
const char* const kKindNames[kKinds] = {"no_sync", "reuse_after_release", "release_pending", "ipc_unwaited"};
std::array<std::uint64_t, kKinds> g_counts{};
std::vector<std::pair<int, std::string>> g_recent;  // at most kRecent
constexpr std::size_t kRecent = 256;

// The test seam: a Python callable (stream, device_id) -> bool answering "still pending?" on a
// machine without a GPU. Owned; None when absent.
PyObject* g_pending_override = nullptr;

PyObject* g_warning = nullptr;  // stridex.StreamRaceWarning
PyObject* g_error = nullptr;    // stridex.StreamRaceError

// Whether work queued on `stream` may still be running. A host query, never a wait.
bool stream_pending(std::intptr_t stream, Device device) {
    if (stream == kNoStream || !device.is_cuda_family()) return false;
    if (g_pending_override) {
        nb::object answer = nb::steal(PyObject_CallFunction(g_pending_override, "nn", static_cast<Py_ssize_t>(stream),
                                                            static_cast<Py_ssize_t>(device.id)));
        if (!answer.is_valid()) throw nb::python_error();
        const int truth = PyObject_IsTrue(answer.ptr());
        if (truth < 0) throw nb::python_error();
        return truth == 1;
    }
    cuda::Driver& d = cuda::driver();
    if (!d.usable() || !d.raw().stream_query || device.id >= d.device_count()) return false;
    try {
        const cuda::ContextGuard guard(d, device.id);  // the legacy stream is per context
        // A capturing stream is never queried (the query would end its capture), and what it
        // captures runs only at a replay: nothing of it is pending now.
        if (cuda::capture_of(cuda::StreamRef(stream), device.id).capturing()) return false;
        // Another thread's capture in global mode forbids this thread's queries too; a query
        // joins no capture, so the thread is relaxed for it (and restored).
        constexpr int kRelaxed = 2;  // CU_STREAM_CAPTURE_MODE_RELAXED
        int mode = kRelaxed;
        const auto exchange = d.raw().thread_exchange_stream_capture_mode;
        const bool relaxed = exchange && exchange(&mode) == cuda::result::success;
        const cuda::CUresult r = d.try_call(d.raw().stream_query, cuda::StreamRef(stream).handle());
        if (relaxed) (void)exchange(&mode);
        return r == cuda::result::not_ready;
    } catch (const Error&) {
        return false;  // a stream of a context gone: nothing of it can still run
    }
}

// Whether `stream`, named by an earlier hand-over, may be queried now: a default stream, or one
// whose stream object the log holds (log::hold_stream_object). A stream handle outliving its
// stream is not safe to query.
bool queryable_later(std::intptr_t stream) {
    if (g_pending_override) return true;  // the test seam answers, no driver is asked
    if (stream == cuda::StreamRef::kLegacy || stream == cuda::StreamRef::kPerThread) return true;
    return log::holds_stream_object(stream);
}

// Warns (or raises, in raise mode, where `may_raise`) with the report. Throws nb::python_error when
// the warning became an exception (raise mode, or a warnings filter of "error").
void report(Kind kind, const std::string& text, bool may_raise) {
    const std::string message = std::string("stridex sanitizer: ") + kKindNames[kind] + ": " + text;
    {
        const std::lock_guard lock(g_reports_mutex);
        ++g_counts[kind];
        if (g_recent.size() < kRecent) g_recent.emplace_back(kind, message);
    }
    if (may_raise && g_raise.load(std::memory_order_relaxed)) {
        PyErr_SetString(g_error, message.c_str());
        throw nb::python_error();
    }
    if (PyErr_WarnEx(g_warning, message.c_str(), 1) < 0) throw nb::python_error();
}

// Class 2: an earlier hand-over of overlapping memory whose owner has died, whose consumer's
// stream is another and may still be reading it. An earlier one whose owner died and whose
// consumer's stream is idle now is finished for good (later work on that stream cannot read memory
// it no longer has): it leaves the log, so that it is never blamed for later, unrelated work.
void check_reuse(const Entry& now, PyObject* owner) {
    std::vector<std::uint64_t> finished;
    struct Forget {
        std::vector<std::uint64_t>& done;
        ~Forget() { forget(done); }
    } forget_finished{finished};
    for (const Entry& before : overlapping(now)) {
        if (same_owner(before, owner) || owner_alive(before) || before.pool) continue;
        if (!queryable_later(before.consumer_stream) || !stream_pending(before.consumer_stream, before.device)) {
            finished.push_back(before.seq);
            continue;
        }
        // Reads on the producer's own stream, or on the new consumer's, are ordered before the reuse.
        if (before.consumer_stream == kNoStream || before.consumer_stream == now.consumer_stream ||
            before.consumer_stream == before.producer_stream)
            continue;
        report(kReuse,
               "memory handed over again while the consumer of its released owner may still be reading it on " +
                   stream_name(before.consumer_stream) +
                   " (record the consumer's stream with the producer's "
                   "allocator, e.g. tensor.record_stream(s), or keep the owner alive until that work is done)" +
                   describe("earlier hand-over (owner released)", before) + describe("this hand-over", now),
               true);
        return;  // one report per hand-over
    }
}

// Class 4: only a use with no ordering (NO_SYNC) can skip the producer's event. An IPC View
// carries that event (or, for VMM memory, this process's relay of it) as its Pending until a
// consumer takes it (every ordered door waits for it), so the use races while no stream of this
// process, and not the host, has waited for it.
bool ipc_unwaited(const View& view, std::intptr_t consumer) {
    if (consumer != kNoStream) return false;
    const auto& pending = view.pending();
    return pending && !pending->waited();
}

void check_ipc(const View& view, const Entry& now, std::intptr_t consumer) {
    for (const Entry& before : overlapping(now)) {
        if (!before.ipc) continue;
        if (!ipc_unwaited(view, consumer)) continue;
        report(kIpc,
               "IPC View used before its producer's event was waited for (use it on a stream: stream=... orders "
               "it after the producer's work)" +
                   describe("IPC import", before) + describe("this use", now),
               true);
        return;
    }
}

}  // namespace

namespace {

// Class 1 (NO_SYNC), 2 and, for a View imported again, 4: the producer hands its memory over.
void imported(const Handover& h) {
    const View& view = h.view;
    const bool no_sync = h.flags.has(HandoverFlag::no_sync);
    const bool unordered = no_sync || h.flags.has(HandoverFlag::ignores_stream);
    Entry now = make_entry(view, h.owner, nullptr, h.producer_stream, h.consumer_stream, h.door);
    if (unordered && h.producer_stream != kNoStream && stream_pending(h.producer_stream, view.device()))
        report(kNoSync,
               std::string(no_sync ? "handed over with stream=NO_SYNC"
                                   : "handed over by a producer that ignores the consumer's stream") +
                   " while the producer's " + stream_name(h.producer_stream) +
                   " still has pending work (pass the consumer's stream, or synchronize first)" +
                   describe("this hand-over", now),
               true);
    check_reuse(now, h.owner);
    if (h.flags.has(HandoverFlag::of_view)) check_ipc(view, now, unordered ? kNoStream : view.stream());
    log::add(std::move(now), h.owner);
}

// Class 1 (no ordering) and 4: an existing View handed to a consumer.
void used(const Handover& h) {
    const View& view = h.view;
    Entry now = make_entry(view, h.owner, nullptr, h.producer_stream, h.consumer_stream, h.door);
    if (h.flags.has(HandoverFlag::no_sync) && stream_pending(h.producer_stream, view.device()))
        report(kNoSync,
               std::string("handed over with no ordering (stream=-1) while the View's ") +
                   stream_name(h.producer_stream) + " still has pending work (pass the consumer's stream)" +
                   describe("this hand-over", now),
               true);
    check_ipc(view, now, h.consumer_stream);
    log::add(std::move(now), h.owner);
}

// A View from another process: logged with its event, for class 4's later check.
void from_process(const Handover& h) {
    if (!h.flags.has(HandoverFlag::with_event)) return;
    Entry now = make_entry(h.view, h.owner, "stridex.ipc (another process)", h.producer_stream, h.consumer_stream,
                           h.door);
    now.ipc = true;
    log::add(std::move(now), h.owner);
}

}  // namespace

void observe(const Handover& h) {
    if (!h.view.device().is_cuda_family()) return;  // host memory: no stream, nothing to race
    if (h.flags.has(HandoverFlag::from_process))
        from_process(h);
    else if (h.flags.has(HandoverFlag::imported))
        imported(h);
    else
        used(h);
}

void released(View& view, nb::object& source) noexcept {
    // A View may die while an exception is being raised: that one is kept as it is.
    const nb::error_scope keep_pending_exception;
    try {
        PyObject* owner = source.ptr();
        // An export of this View (a capsule, a consumer's tensor) shares its keep-alive: then the
        // memory outlives it whatever happens to the owner object.
        if (!owner || owner == Py_None || view.owner().use_count() > 1) return;
        // torch's allocator hears of the View's stream at its release (handover.hpp): it reuses
        // the memory only after that stream's work.
        if (allocator_told(view)) return;
        if (view.stream() == kNoStream || !view.device().is_cuda_family()) return;
        if (view.device().type == DeviceType::kCUDA && cuda::in_pool(view.ptr(), view.device().id)) return;
        const Entry probe = make_entry(view, nullptr, nullptr, kNoStream, view.stream(), "View released");
        std::vector<Entry> candidates;
        for (Entry& before : overlapping(probe))
            if (same_owner(before, owner) && before.consumer_stream == view.stream() &&
                before.producer_stream != before.consumer_stream && before.producer_stream != kNoStream)
                candidates.push_back(std::move(before));
        if (candidates.empty()) return;
        // Did the owner die with this View? Release both here and look (a weak reference), or,
        // for objects that take none, whether this View held the only reference.
        bool died = Py_REFCNT(owner) == 1;
        if (type_supports_weakrefs(Py_TYPE(owner))) {
            nb::object weak = nb::steal(PyWeakref_NewRef(owner, nullptr));
            if (weak.is_valid()) {
                source.reset();
                view = View();
                died = !weak_referent(weak.ptr()).is_valid();
            } else {
                PyErr_Clear();
            }
        }
        if (!died || !queryable_later(probe.consumer_stream) || !stream_pending(probe.consumer_stream, probe.device))
            return;
        const Entry& before = candidates.front();
        Entry now = probe;
        now.producer_type = before.producer_type;
        now.producer_label = before.producer_label;
        now.producer_stream = before.producer_stream;
        report(kRelease,
               "View released with the last reference to its owner while work on its " +
                   stream_name(now.consumer_stream) + " may still use the memory; the producer's allocator (on " +
                   stream_name(before.producer_stream) +
                   ") was given no event (keep the View or its owner alive until that work is done, or record "
                   "the stream with the producer, e.g. tensor.record_stream(s))" +
                   describe("hand-over", before) + describe("release", now),
               false);
    } catch (nb::python_error& e) {
        e.restore();
        PyErr_WriteUnraisable(nullptr);
    } catch (...) {
        PyErr_Clear();
    }
}

void stream_object_seen(PyObject* object, std::intptr_t handle) noexcept {
    if (handle == cuda::StreamRef::kLegacy || handle == cuda::StreamRef::kPerThread) return;
    log::hold_stream_object(object, handle);
}

namespace {

void enter(bool raise) {
    const std::lock_guard lock(g_switch_mutex);
    ++g_contexts;
    if (raise) ++g_raise_contexts;
    update_switch();
}

void exit_context(bool raise) {
    const std::lock_guard lock(g_switch_mutex);
    if (g_contexts == 0 || (raise && g_raise_contexts == 0))
        fail(ErrorKind::value, "stridex.sanitize(): exit without a matching enter");
    --g_contexts;
    if (raise) --g_raise_contexts;
    update_switch();
}

// STRIDEX_SANITIZE: "streams" turns it on, "streams,raise" raises too; anything else is refused
// at import with the words it takes (a typo must not silently leave it off).
void read_environment() {
    const char* value = std::getenv("STRIDEX_SANITIZE");
    if (!value || !*value || std::strcmp(value, "0") == 0) return;
    std::string text(value);
    bool streams = false, raise = false;
    std::size_t start = 0;
    while (start <= text.size()) {
        const std::size_t comma = text.find(',', start);
        const std::string word = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        if (word == "streams" || word == "1")
            streams = true;
        else if (word == "raise")
            raise = true;
        else if (!word.empty())
            fail(ErrorKind::value, "STRIDEX_SANITIZE must be 'streams' or 'streams,raise' (or empty/0: off), found '",
                 text, "'");
        if (comma == std::string::npos) break;
        start = comma + 1;
    }
    const std::lock_guard lock(g_switch_mutex);
    g_env_on = streams || raise;
    g_env_raise = raise;
    update_switch();
}

nb::dict summary() {
    nb::dict counts;
    const std::lock_guard lock(g_reports_mutex);
    for (int k = 0; k < kKinds; ++k) counts[kKindNames[k]] = g_counts[k];
    return counts;
}

}  // namespace

void bind_sanitizer(nb::module_& m) {
    g_warning = PyErr_NewExceptionWithDoc(
        "stridex._stridex.StreamRaceWarning",
        "A stream race at a hand-over stridex mediated, found by the sanitizer (stridex.sanitize, "
        "STRIDEX_SANITIZE=streams).",
        PyExc_RuntimeWarning, nullptr);
    if (!g_warning) throw nb::python_error();
    g_error =
        PyErr_NewExceptionWithDoc("stridex._stridex.StreamRaceError",
                                  "A stream race found by the sanitizer in raise mode (stridex.sanitize(raise_=True), "
                                  "STRIDEX_SANITIZE=streams,raise).",
                                  PyExc_RuntimeError, nullptr);
    if (!g_error) throw nb::python_error();
    m.attr("StreamRaceWarning") = nb::borrow(g_warning);
    m.attr("StreamRaceError") = nb::borrow(g_error);
    read_environment();

    m.def("_sanitizer_enter", &enter, nb::arg("raise_"), "stridex.sanitize()'s entry: one more active context.");
    m.def("_sanitizer_exit", &exit_context, nb::arg("raise_"), "stridex.sanitize()'s exit.");
    m.def(
        "_sanitizer_state",
        [] {
            const std::lock_guard lock(g_switch_mutex);
            return nb::make_tuple(on(), g_raise.load(), g_ever_on);
        },
        "(on, raise mode, ever on) of the sanitizer.");
    m.def("_sanitizer_counts", &summary, "Reports made so far, per class.");
    m.def(
        "_sanitizer_reports",
        [] {
            nb::list out;
            const std::lock_guard lock(g_reports_mutex);
            for (const auto& [kind, text] : g_recent) out.append(nb::make_tuple(kKindNames[kind], text));
            return out;
        },
        "The first reports made (class, message), at most 256.");
    m.def(
        "_sanitizer_reset",
        [] {
            log::clear();
            const std::lock_guard lock(g_reports_mutex);
            g_counts = {};
            g_recent.clear();
        },
        "Forgets the log, the stream objects it held and the reports (tests).");
    m.def("_sanitizer_log", &log::snapshot,
          "The log, read-only (tests): (device, lo, hi, door, producer stream, consumer stream, owner alive, ipc).");
    m.def(
        "_sanitizer_set_cap",
        [](std::size_t cap) {
            if (cap < 4) fail(ErrorKind::value, "the sanitizer's log cap must be at least 4, found ", cap);
            return log::set_cap(cap);
        },
        nb::arg("cap"), "Sets the log's entry cap (LRU beyond it); returns the previous one.");
    m.def(
        "_sanitizer_pending_override",
        [](nb::object fn) {
            Py_XDECREF(g_pending_override);
            g_pending_override = fn.is_none() ? nullptr : fn.release().ptr();
        },
        nb::arg("fn").none(),
        "Test seam: fn(stream, device_id) -> bool answers 'may work on this stream still be running?' instead "
        "of the driver (None: the driver again).");
    // The summary at exit, while the interpreter is whole; nothing when no report was made.
    nb::module_::import_("atexit").attr("register")(nb::cpp_function([] {
        bool ever = false;
        {
            const std::lock_guard lock(g_switch_mutex);
            ever = g_ever_on;
            g_finished = true;  // Views released during teardown are not logged (nor reported)
            update_switch();
        }
        Py_CLEAR(g_pending_override);
        log::clear();  // weak references, stream objects and code objects go while Python can take them
        std::uint64_t total = 0;
        for (int k = 0; k < kKinds; ++k) total += g_counts[k];
        // Only where there is something to say: a clean run's processes (subprocesses that inherit
        // STRIDEX_SANITIZE included) keep their stderr as it was.
        if (!ever || total == 0) return;
        std::string line = "stridex sanitizer: ";
        line += std::to_string(total) + " report(s)";
        for (int k = 0; k < kKinds; ++k) line += std::string(", ") + kKindNames[k] + " " + std::to_string(g_counts[k]);
        line += "\n";
        PySys_FormatStderr("%s", line.c_str());
    }));
}

}  // namespace stridex::python::sanitizer
