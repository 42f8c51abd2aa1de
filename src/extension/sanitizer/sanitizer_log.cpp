// The sanitizer's log (sanitizer_log.hpp): the store of entries and the stream objects they name.
#include "sanitizer/sanitizer_log.hpp"

#include "common/limited_api.hpp"
#include "stridex/cuda/memory.hpp"

#include <nanobind/stl/string.h>  // snapshot()'s device names

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>

#include "common/python_compat.hpp"
#include "stridex/cuda/stream.hpp"
#include "stridex/error.hpp"

namespace nb = nanobind;

namespace stridex::python::sanitizer::log {
namespace {

using Key = std::tuple<int, int, std::uintptr_t>;  // device type, device id, lo
std::mutex g_mutex;
std::multimap<Key, Entry> g_log;
std::uint64_t g_seq = 0;
std::uintptr_t g_max_span = 0;  // the longest range logged: how far below `lo` an overlap can start
std::size_t g_cap = 4096;

// Stream handles that may be queried after the hand-over that named them: the default streams, and
// handles of the stream objects callers passed, held here (strong references) while an entry of
// the log names their handle, so that the stream cannot be destroyed and its handle reused while
// it may still be queried. Not weak references: torch.cuda.Stream and torch.cuda.Event of torch
// 2.9 to 2.11 claim weak reference support but never clear their weak references when they die
// (pytorch/pytorch#183403), so a weak reference to one dangles and crashes when released.
// Guarded by g_mutex; references are dropped outside it (a stream's finalizer may run Python
// code that hands over again).
std::map<std::intptr_t, nb::object> g_stream_objects;
std::size_t g_stream_objects_prune_at = 64;  // doubles with what a prune has to keep

// Moves the stream objects no log entry names any more into `dropped` (released by the caller,
// outside the mutex), except `keep`'s: its hand-over is under way and logs its entry after this.
// Called with the mutex held.
void prune_stream_objects_locked(std::intptr_t keep, std::vector<nb::object>& dropped) {
    std::vector<std::intptr_t> named;
    named.reserve(g_log.size() * 2);
    for (const auto& [key, e] : g_log) {
        named.push_back(e.consumer_stream);
        named.push_back(e.producer_stream);
    }
    std::sort(named.begin(), named.end());
    for (auto it = g_stream_objects.begin(); it != g_stream_objects.end();)
        if (it->first == keep || std::binary_search(named.begin(), named.end(), it->first)) {
            ++it;
        } else {
            dropped.push_back(std::move(it->second));
            it = g_stream_objects.erase(it);
        }
    g_stream_objects_prune_at = std::max<std::size_t>(64, g_stream_objects.size() * 2);
}

Stack capture_stack() {
    Stack s;
    PyFrameObject* f = PyEval_GetFrame();  // borrowed; null from a thread without Python frames
    Py_XINCREF(reinterpret_cast<PyObject*>(f));
    while (f && s.size < kFrames) {
        s.frames[s.size].code = nb::steal(reinterpret_cast<PyObject*>(PyFrame_GetCode(f)));
#ifdef Py_LIMITED_API
        // No instruction offsets nor PyFrame_GetBack there: the line now, and frame.f_back.
        s.frames[s.size].line = PyFrame_GetLineNumber(f);
        ++s.size;
        PyObject* up = PyObject_GetAttrString(reinterpret_cast<PyObject*>(f), "f_back");
        if (!up) PyErr_Clear();
        if (up == Py_None) Py_CLEAR(up);
        auto* back = reinterpret_cast<PyFrameObject*>(up);
#else
#if PY_VERSION_HEX >= 0x030B0000
        // The instruction offset: its line is looked up only when a report is made (the line
        // table walk is most of what a stack costs).
        s.frames[s.size].line = PyFrame_GetLasti(f);
#else
        s.frames[s.size].line = PyFrame_GetLineNumber(f);
#endif
        ++s.size;
        PyFrameObject* back = PyFrame_GetBack(f);
#endif
        Py_DECREF(reinterpret_cast<PyObject*>(f));
        f = back;
    }
    Py_XDECREF(reinterpret_cast<PyObject*>(f));
    return s;
}

bool owner_alive(const Entry& e) {
    if (!e.owner.is_valid()) return true;  // no weak reference: cannot tell, assume alive
    bool failed = false;                   // cannot tell: assume alive
    const bool alive = weak_referent(e.owner.ptr(), &failed).is_valid();
    return alive || failed;
}

bool same_owner(const Entry& e, PyObject* owner) {
    if (!owner || owner == Py_None) return false;
    if (e.owner.is_valid()) return weak_referent(e.owner.ptr()).ptr() == owner;
    return e.owner_id == reinterpret_cast<std::uintptr_t>(owner);
}

// Bounds the log: entries whose owner died go first, then the least recently used. Called with the
// mutex held.
void prune_locked() {
    if (g_log.size() <= g_cap) return;
    for (auto it = g_log.begin(); it != g_log.end() && g_log.size() > g_cap * 3 / 4;) {
        // No stream query under the mutex: a dead owner's entry goes first whatever its stream.
        if (!owner_alive(it->second))
            it = g_log.erase(it);
        else
            ++it;
    }
    while (g_log.size() > g_cap * 3 / 4) {
        auto oldest = g_log.begin();
        for (auto it = g_log.begin(); it != g_log.end(); ++it)
            if (it->second.seq < oldest->second.seq) oldest = it;
        g_log.erase(oldest);
    }
}

}  // namespace

Entry make_entry(const View& v, PyObject* owner, const char* producer_label, std::intptr_t producer_stream,
                 std::intptr_t consumer_stream, const char* door) {
    Entry e;
    e.device = v.device();
    const Span span = v.byte_span();
    const auto base = reinterpret_cast<std::uintptr_t>(v.ptr());
    e.lo = base + static_cast<std::uintptr_t>(span.lo);
    e.hi = base + static_cast<std::uintptr_t>(span.hi);
    e.producer_label = producer_label;
    if (!producer_label && owner && owner != Py_None)
        e.producer_type = nb::borrow(reinterpret_cast<PyObject*>(Py_TYPE(owner)));
    if (owner && owner != Py_None) {
        e.owner_id = reinterpret_cast<std::uintptr_t>(owner);
        if (type_supports_weakrefs(Py_TYPE(owner))) {
            e.owner = nb::steal(PyWeakref_NewRef(owner, nullptr));
            if (!e.owner.is_valid()) PyErr_Clear();
        }
    }
    e.producer_stream = producer_stream;
    e.consumer_stream = consumer_stream;
    e.door = door;
    e.pool = v.device().type == DeviceType::kCUDA && cuda::in_pool(v.ptr(), v.device().id);
    e.stack = capture_stack();
    return e;
}

std::vector<Earlier> overlapping(const Entry& e, PyObject* owner) {
    std::vector<Earlier> out;
    const std::lock_guard lock(g_mutex);
    const int type = static_cast<int>(e.device.type);
    const std::uintptr_t from = e.lo > g_max_span ? e.lo - g_max_span : 0;
    for (auto it = g_log.lower_bound({type, e.device.id, from});
         it != g_log.end() && it->first < Key{type, e.device.id, e.hi == e.lo ? e.hi + 1 : e.hi}; ++it) {
        const Entry& before = it->second;
        if (before.hi > e.lo || (e.hi == e.lo && before.lo == e.lo))
            out.push_back({before, same_owner(before, owner), owner_alive(before),
                           g_stream_objects.count(before.consumer_stream) != 0});
    }
    return out;
}

// Logs `e`. An entry of the same range, owner and consumer stream is the same hand-over again (a
// loop importing one array, a View used again on the stream it is ready on): the earlier entry is
// kept and only made recent, because it names the producer's stream, where the owner's allocator
// works; a later use of the View names the View's own stream there, the consumer's, and would
// hide every race between the two.
void record(Entry&& e, PyObject* owner, const std::vector<std::uint64_t>& finished) {
    const std::lock_guard lock(g_mutex);
    for (auto it = g_log.begin(); !finished.empty() && it != g_log.end();) {
        if (std::find(finished.begin(), finished.end(), it->second.seq) != finished.end())
            it = g_log.erase(it);
        else
            ++it;
    }
    e.seq = ++g_seq;
    const Key key{static_cast<int>(e.device.type), e.device.id, e.lo};
    for (auto [it, end] = g_log.equal_range(key); it != end; ++it)
        if (it->second.hi == e.hi && it->second.consumer_stream == e.consumer_stream && same_owner(it->second, owner)) {
            Entry& kept = it->second;
            kept.seq = e.seq;
            kept.ipc = kept.ipc || e.ipc;
            if (kept.producer_stream == kNoStream) kept.producer_stream = e.producer_stream;
            return;
        }
    g_max_span = std::max(g_max_span, e.hi - e.lo);
    g_log.emplace(key, std::move(e));
    prune_locked();
}

std::size_t set_cap(std::size_t cap) {
    const std::lock_guard lock(g_mutex);
    const std::size_t before = g_cap;
    g_cap = cap;
    prune_locked();
    return before;
}

void clear() {
    std::map<std::intptr_t, nb::object> streams;  // released after the mutex
    const std::lock_guard lock(g_mutex);
    g_log.clear();
    streams.swap(g_stream_objects);
    g_max_span = 0;
}

nb::list snapshot() {
    nb::list out;
    const std::lock_guard lock(g_mutex);
    for (const auto& [key, e] : g_log)
        out.append(nb::make_tuple(e.device.name(), e.lo, e.hi, e.door, e.producer_stream, e.consumer_stream,
                                  owner_alive(e), e.ipc));
    return out;
}

void hold_stream_object(PyObject* object, std::intptr_t handle) noexcept {
    std::vector<nb::object> dropped;  // released after the mutex
    try {
        const std::lock_guard lock(g_mutex);
        nb::object& held = g_stream_objects[handle];
        if (held.ptr() != object) {
            dropped.push_back(std::move(held));
            held = nb::borrow(object);
        }
        if (g_stream_objects.size() > g_stream_objects_prune_at) prune_stream_objects_locked(handle, dropped);
    } catch (...) {  // out of memory: the stream is just not vouched for
    }
}

}  // namespace stridex::python::sanitizer::log
