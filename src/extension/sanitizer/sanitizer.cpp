// The hand-over race sanitizer (sanitizer.hpp, docs/sanitizer.md): the switch, the four checks and
// the bindings. A hand-over is observed in one pass: its entry and the earlier ones it overlaps are
// read from the log (sanitizer_log.hpp) once, the checks decide, the log is written once, and what
// they found is reported last (sanitizer_report.hpp). Checks ask the driver (or a test's stand-in)
// outside the log's mutex: a Python callable or a warning filter may run Python code that hands
// over again.
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
#include "sanitizer/sanitizer_report.hpp"
#include "stridex/cuda/capture.hpp"
#include "stridex/cuda/driver.hpp"
#include "stridex/cuda/memory.hpp"
#include "stridex/error.hpp"
#include "stridex/pending.hpp"

namespace nb = nanobind;

namespace stridex::python::sanitizer {
namespace {

using log::Earlier, log::Entry, log::make_entry, log::overlapping;
using report::Finding, report::Unordered;

// ---- the switch -----------------------------------------------------------------------------------
std::mutex g_switch_mutex;  // guards the counts below; g_on follows them
bool g_env_on = false, g_env_raise = false, g_ever_on = false;
int g_contexts = 0, g_raise_contexts = 0;

bool g_finished = false;  // at exit: off for good, so that nothing is logged after the log is cleared

void update_switch() {  // with g_switch_mutex held
    const bool on = !g_finished && (g_env_on || g_contexts > 0);
    g_ever_on = g_ever_on || on;
    report::set_raise_mode(g_env_raise || g_raise_contexts > 0);
    detail::g_on.store(on, std::memory_order_relaxed);
}

// The test seam: a Python callable (stream, device_id) -> bool answering "still pending?" on a
// machine without a GPU. Owned; None when absent.
PyObject* g_pending_override = nullptr;

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

// Whether the consumer's stream of an earlier hand-over may be queried now: a default stream, or
// one whose stream object the log holds (log::hold_stream_object). A stream handle outliving its
// stream is not safe to query.
bool queryable_later(const Earlier& before) {
    if (g_pending_override) return true;  // the test seam answers, no driver is asked
    const std::intptr_t stream = before.entry.consumer_stream;
    if (stream == cuda::StreamRef::kLegacy || stream == cuda::StreamRef::kPerThread) return true;
    return before.consumer_held;
}

// What one hand-over's checks found, and the earlier hand-overs they proved finished.
struct Verdict {
    std::vector<Finding> findings;
    std::vector<std::uint64_t> finished;
};

// Class 2: an earlier hand-over of overlapping memory whose owner has died, whose consumer's
// stream is another and may still be reading it. An earlier one whose owner died and whose
// consumer's stream is idle now is finished for good (later work on that stream cannot read memory
// it no longer has): it leaves the log, so that it is never blamed for later, unrelated work.
void check_reuse(const Entry& now, const std::vector<Earlier>& earlier, Verdict& v) {
    for (const Earlier& e : earlier) {
        const Entry& before = e.entry;
        if (e.same_owner || e.owner_alive || before.pool) continue;
        if (!queryable_later(e) || !stream_pending(before.consumer_stream, before.device)) {
            v.finished.push_back(before.seq);
            continue;
        }
        // Reads on the producer's own stream, or on the new consumer's, are ordered before the reuse.
        if (before.consumer_stream == kNoStream || before.consumer_stream == now.consumer_stream ||
            before.consumer_stream == before.producer_stream)
            continue;
        v.findings.push_back({report::kReuse, now, before});
        return;  // one report per hand-over
    }
}

// Class 4: only a use with no ordering (NO_SYNC) can skip the producer's event. An IPC View
// carries that event (or, for VMM memory, this process's relay of it) as its Pending until a
// consumer takes it (every ordered door waits for it), so the use races while no stream of this
// process, and not the host, has waited for it.
void check_ipc(const View& view, const Entry& now, const std::vector<Earlier>& earlier, std::intptr_t consumer,
               Verdict& v) {
    if (consumer != kNoStream) return;
    const auto& pending = view.pending();
    if (!pending || pending->waited()) return;
    for (const Earlier& e : earlier)
        if (e.entry.ipc) {
            v.findings.push_back({report::kIpc, now, e.entry});
            return;
        }
}

// Class 1 (NO_SYNC), 2 and, for a View imported again, 4: the producer hands its memory over.
Verdict imported(const Handover& h, const Entry& now, const std::vector<Earlier>& earlier) {
    Verdict v;
    const bool no_sync = h.flags.has(HandoverFlag::no_sync);
    const bool unordered = no_sync || h.flags.has(HandoverFlag::ignores_stream);
    if (unordered && h.producer_stream != kNoStream && stream_pending(h.producer_stream, h.view.device()))
        v.findings.push_back(
            {report::kNoSync, now, std::nullopt, no_sync ? Unordered::no_sync : Unordered::ignores_stream});
    check_reuse(now, earlier, v);
    if (h.flags.has(HandoverFlag::of_view)) check_ipc(h.view, now, earlier, unordered ? kNoStream : h.view.stream(), v);
    return v;
}

// Class 1 (no ordering) and 4: an existing View handed to a consumer.
Verdict used(const Handover& h, const Entry& now, const std::vector<Earlier>& earlier) {
    Verdict v;
    if (h.flags.has(HandoverFlag::no_sync) && stream_pending(h.producer_stream, h.view.device()))
        v.findings.push_back({report::kNoSync, now, std::nullopt, Unordered::view_used});
    check_ipc(h.view, now, earlier, h.consumer_stream, v);
    return v;
}

}  // namespace

// The log is read once and written once; what the checks found is reported last. A View from
// another process is only logged, with its event, for class 4's later check.
void observe(const Handover& h) {
    if (!h.view.device().is_cuda_family()) return;  // host memory: no stream, nothing to race
    const bool from_process = h.flags.has(HandoverFlag::from_process);
    if (from_process && !h.flags.has(HandoverFlag::with_event)) return;
    Entry now = make_entry(h.view, h.owner, from_process ? "stridex.ipc (another process)" : nullptr, h.producer_stream,
                           h.consumer_stream, h.door);
    Verdict v;
    if (from_process) {
        now.ipc = true;
    } else {
        const std::vector<Earlier> earlier = overlapping(now, h.owner);
        v = h.flags.has(HandoverFlag::imported) ? imported(h, now, earlier) : used(h, now, earlier);
    }
    log::record(std::move(now), h.owner, v.finished);
    for (const Finding& f : v.findings) report::make(f);
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
        Entry now = make_entry(view, nullptr, nullptr, kNoStream, view.stream(), "View released");
        std::vector<Earlier> candidates;
        for (Earlier& before : overlapping(now, owner))
            if (before.same_owner && before.entry.consumer_stream == view.stream() &&
                before.entry.producer_stream != before.entry.consumer_stream &&
                before.entry.producer_stream != kNoStream)
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
        const Earlier& first = candidates.front();  // its consumer's stream is this View's
        if (!died || !queryable_later(first) || !stream_pending(now.consumer_stream, now.device)) return;
        now.producer_type = first.entry.producer_type;
        now.producer_label = first.entry.producer_label;
        now.producer_stream = first.entry.producer_stream;
        report::make({report::kRelease, now, first.entry, Unordered::no_sync, false});
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

}  // namespace

void bind_sanitizer(nb::module_& m) {
    PyObject* warning = PyErr_NewExceptionWithDoc(
        "stridex._stridex.StreamRaceWarning",
        "A stream race at a hand-over stridex mediated, found by the sanitizer (stridex.sanitize, "
        "STRIDEX_SANITIZE=streams).",
        PyExc_RuntimeWarning, nullptr);
    if (!warning) throw nb::python_error();
    PyObject* error =
        PyErr_NewExceptionWithDoc("stridex._stridex.StreamRaceError",
                                  "A stream race found by the sanitizer in raise mode (stridex.sanitize(raise_=True), "
                                  "STRIDEX_SANITIZE=streams,raise).",
                                  PyExc_RuntimeError, nullptr);
    if (!error) throw nb::python_error();
    report::set_types(warning, error);
    m.attr("StreamRaceWarning") = nb::borrow(warning);
    m.attr("StreamRaceError") = nb::borrow(error);
    read_environment();

    m.def("_sanitizer_enter", &enter, nb::arg("raise_"), "stridex.sanitize()'s entry: one more active context.");
    m.def("_sanitizer_exit", &exit_context, nb::arg("raise_"), "stridex.sanitize()'s exit.");
    m.def(
        "_sanitizer_state",
        [] {
            const std::lock_guard lock(g_switch_mutex);
            return nb::make_tuple(on(), report::raise_mode(), g_ever_on);
        },
        "(on, raise mode, ever on) of the sanitizer.");
    m.def("_sanitizer_counts", &report::counts, "Reports made so far, per class.");
    m.def("_sanitizer_reports", &report::recent, "The first reports made (class, message), at most 256.");
    m.def(
        "_sanitizer_reset",
        [] {
            log::clear();
            report::forget();
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
        // Only where there is something to say: a clean run's processes (subprocesses that inherit
        // STRIDEX_SANITIZE included) keep their stderr as it was.
        const std::string line = report::summary();
        if (!ever || line.empty()) return;
        PySys_FormatStderr("%s", line.c_str());
    }));
}

}  // namespace stridex::python::sanitizer
