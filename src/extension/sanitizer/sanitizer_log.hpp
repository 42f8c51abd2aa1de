// The hand-over race sanitizer's log (sanitizer.hpp, docs/sanitizer.md, "The log"): the store of one entry per
// (memory range, owner, consumer stream) handed over while the sanitizer is on, with the producer's
// and the consumer's streams, the door, the owner as a weak reference and a few Python frames, and
// the stream objects the checks may query later. Every function takes the log's mutex itself and
// releases Python references only outside it (a finalizer may run Python code that hands over
// again). The GIL is held by every caller.
#pragma once

#include <nanobind/nanobind.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "stridex/view.hpp"

namespace stridex::python::sanitizer::log {

// A few Python frames of a hand-over: code objects and instruction offsets, whose lines are looked
// up only when a report is made (the line table walk is most of what a stack costs).
constexpr int kFrames = 8;  // captured; stridex's own frames are dropped when formatting
struct Frame {
    nanobind::object code;
    int line = 0;  // the instruction offset on Python >= 3.11, the line before
};
struct Stack {
    std::array<Frame, kFrames> frames;
    int size = 0;
};

struct Entry {
    std::uint64_t seq = 0;  // last use, for the LRU
    Device device;
    std::uintptr_t lo = 0, hi = 0;
    // The producer: its type (a strong reference to the type, never to an instance), named only
    // when a report is made, or a fixed label.
    nanobind::object producer_type;
    const char* producer_label = nullptr;
    nanobind::object owner;  // a weak reference to the owner object, or empty where it takes none
    std::uintptr_t owner_id = 0;
    std::intptr_t producer_stream = kNoStream, consumer_stream = kNoStream;
    const char* door = "";
    bool ipc = false;
    // stridex's pool memory: the pool frees it only after every stream it was handed to
    // (handover.hpp), so neither its reuse nor its release races with those streams.
    bool pool = false;
    Stack stack;
};

// The hand-over of `v` (owned by `owner`, may be null or None; the producer named by its type, or
// by `producer_label` where given) through `door`, with the calling Python frames.
Entry make_entry(const View& v, PyObject* owner, const char* producer_label, std::intptr_t producer_stream,
                 std::intptr_t consumer_stream, const char* door);

// An earlier hand-over overlapping a new one, with what the checks ask of it, answered under the
// log's mutex: whether its owner is the new one's, whether that owner is still alive (true where
// it takes no weak reference: cannot tell), and whether the stream object of its consumer's stream
// is held (that stream may be queried now).
struct Earlier {
    Entry entry;
    bool same_owner = false, owner_alive = true, consumer_held = false;
};
// Copies of the entries overlapping `e`'s range on its device, to check outside the mutex; `owner`
// is the new hand-over's (may be null or None).
std::vector<Earlier> overlapping(const Entry& e, PyObject* owner);
// Forgets the entries of these sequence numbers (hand-overs proven finished), then logs `e`. An
// entry of the same range, owner and consumer stream is the same hand-over again: the earlier one
// is kept and made recent (sanitizer_log.cpp says why).
void record(Entry&& e, PyObject* owner, const std::vector<std::uint64_t>& finished = {});
// Sets the entry cap (beyond it: entries whose owner died, then the least recently used, go);
// returns the previous one.
std::size_t set_cap(std::size_t cap);
// Forgets everything: entries and stream objects (tests, and at exit).
void clear();
// The log, read-only (tests): (device, lo, hi, door, producer stream, consumer stream, owner alive, ipc).
nanobind::list snapshot();

// A stream object the caller passed for `handle`: held while an entry names the handle.
void hold_stream_object(PyObject* object, std::intptr_t handle) noexcept;

}  // namespace stridex::python::sanitizer::log
