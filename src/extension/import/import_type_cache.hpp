// The per-type cache of stridex.view(): what a Python type offers, probed once per type.
//
// Direct-mapped, keyed by PyTypeObject*. An entry holds a strong reference to its type (so the
// address cannot be reused by another type while cached) and the type's tp_version_tag when it was
// probed: CPython resets the tag to 0 whenever the type or one of its bases is modified, and never
// reuses a tag, so a changed tag means "probe again". Types without a tag are never cached.
// Under CPython's limited API (the abi3 build; limited_api.hpp) no tag can be read: there only
// immutable types (Py_TPFLAGS_IMMUTABLETYPE, the type and every class of its MRO: C types such as
// numpy.ndarray, nothing a Python class statement makes) are cached, under the constant tag 1, and
// every other type is probed on each import.
//
// The hit path (entry_for, Depth) is inline: every import runs it. Probing and filling are in
// import_type_cache.cpp. Everything runs with the GIL held.
#pragma once

#include <Python.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/limited_api.hpp"
#include "import/type_entry.hpp"

namespace stridex::python {

// Per-type cache statistics (stridex._stridex._internals.cache_stats).
struct CacheStats {
    std::uint64_t hits = 0, fills = 0, uncacheable = 0;
};
CacheStats cache_stats() noexcept;
// The framework shortcuts that imports of `type` take now: a probe outside the cache
// (stridex._stridex._internals.shortcuts_of, the doctor's check).
ShortcutSet shortcuts_of(PyTypeObject* type);
// Empties the cache (tests; at exit, so that teardown sees every type released).
void clear_type_cache() noexcept;

namespace type_cache {
inline constexpr std::size_t kSlots = 64;
extern TypeEntry g_slots[kSlots];
extern CacheStats g_stats;
// Imports in progress (a producer's __dlpack__ may call stridex.view again). While any is, entries
// leaving the cache are parked instead of released: an import in progress uses a plain copy of its
// type's entry, whose references stay valid until the outermost import returns.
extern int g_depth;
extern std::vector<TypeEntry>* g_parked;

// The tag a cached entry of `type` must match now (see above).
inline unsigned int current_version_tag([[maybe_unused]] PyTypeObject* type) noexcept {
#ifdef Py_LIMITED_API
    return 1;
#else
    return type->tp_version_tag;
#endif
}

inline std::size_t slot_of(PyTypeObject* type) noexcept {
    const auto p = reinterpret_cast<std::uintptr_t>(type);
    return ((p >> 4) ^ (p >> 10)) & (kSlots - 1);
}
// A miss: probes the type and caches the entry where it can (import_type_cache.cpp).
TypeEntry fill(PyTypeObject* type, bool* uncached);
// Drops the references of an entry.
void release(TypeEntry& e) noexcept;
// Releases the parked entries (the outermost import returned).
void release_parked() noexcept;
}  // namespace type_cache

// The type's entry, as a plain copy (see g_parked). `uncached` receives whether it is a probed
// entry that could not be cached (no version tag): its references are then the caller's to release
// (Uncached below).
inline TypeEntry entry_for(PyTypeObject* type, bool* uncached) {
    const TypeEntry& slot = type_cache::g_slots[type_cache::slot_of(type)];
    *uncached = false;
    if (slot.type == type && slot.version_tag != 0 && slot.version_tag == type_cache::current_version_tag(type))
        [[likely]] {
        ++type_cache::g_stats.hits;
        return slot;
    }
    return type_cache::fill(type, uncached);
}

// Releases an entry_for() entry that could not be cached: a probed entry that is nobody else's.
struct Uncached {
    TypeEntry& e;
    bool on;
    ~Uncached() {
        if (on) type_cache::release(e);
    }
};

// One import in progress, for as long as it lives (see g_parked).
struct Depth {
    Depth() noexcept { ++type_cache::g_depth; }
    ~Depth() {
        if (--type_cache::g_depth == 0 && type_cache::g_parked && !type_cache::g_parked->empty()) [[unlikely]]
            type_cache::release_parked();
    }
    Depth(const Depth&) = delete;
    Depth& operator=(const Depth&) = delete;
};

// Remembers what a TypeError retry learned (keywords the producer does not take).
void learn(const TypeEntry& e, DlpackKeywords keywords) noexcept;

}  // namespace stridex::python
