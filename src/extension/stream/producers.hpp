// The producer quirk table: what each framework's `__dlpack__` accepts, as data.
//
// stridex.view() says which stream the caller will use; each row says how that intent is spelled
// for one producer (docs/protocols.md). A row holds two kinds of facts, kept apart: correctness
// quirks (what the producer's protocols accept, refuse and promise), which stridex must follow,
// and one performance column, the framework shortcuts its arrays may take, whose entries and
// switch are the registry's (shortcuts.hpp). A row is chosen once per Python type, from the `__module__`
// of the type or of its nearest base a row names and the package's `__version__`, and cached with
// the type (import_type_cache.cpp). Every row has a test in tests/python/test_stream_policy.py; the prose for
// each row is in docs/import.md.
#pragma once

#include <Python.h>

#include <cstdint>
#include <span>

#include "stream/shortcuts.hpp"

namespace stridex::python {

// What `__dlpack__` takes as keywords.
enum class DlpackKeywords : std::uint8_t {
    full,         // stream, max_version (and dl_device, copy): array API 2023.12
    stream_only,  // array API 2021.12: stream only (max_version raises TypeError)
    none,         // no keywords at all (MLX <= 0.31)
};

struct Version {
    int major = 0, minor = 0, patch = 0;
    friend constexpr auto operator<=>(const Version&, const Version&) = default;
};

// The newest version any package can have: the open end of a row's version range.
inline constexpr Version kNewestVersion{1 << 30, 0, 0};

// A row of the table. The defaults are the generic producer's (array API 2023.12); a row names
// only where its producer differs (designated initializers, in this order).
struct ProducerRow {
    const char* name;     // stable id, used by tests and docs ("numpy", "torch<2.9", ...)
    const char* module;   // type.__module__ is this or starts with it plus '.'; "" = any
    const char* package;  // module whose __version__ selects the row by version
    Version since{};      // row applies to package versions in [since, until)
    Version until = kNewestVersion;

    // ---- correctness: what the producer's protocols accept, refuse and promise ----
    DlpackKeywords keywords = DlpackKeywords::full;
    bool host_only = false;                // every array of the type is in host memory: no __dlpack_device__
                                           // call, and no stream argument (None, the default, is the only
                                           // value host producers take)
    bool takes_no_sync = true;             // stream=-1 means "no synchronization" (JAX: a CUstream, fails)
    bool takes_per_thread = true;          // stream=2 is accepted (torch: BufferError)
    bool needs_current_device = false;     // raises BufferError unless the array's GPU is current
    bool immutable = false;                // arrays are immutable by contract: imports are read-only even
                                           // through a legacy capsule, which cannot say so (jax#19123)
    bool spell_none = false;               // stream=None must be sent explicitly: the parameter's default is
                                           // something else (torch >= 2.10: -1, no sync); elsewhere None is
                                           // the default and is left out (one keyword less to bind)
    bool repair_negative_strides = false;  // DLPack strides of negative-stride arrays come divided
                                           // as unsigned (CuPy 13.4-14.2, cupy#10172): 2**64/itemsize - k for
                                           // -k. Such values cannot be real strides; they are repaired exactly
    bool exchange_skips_refusals = false;  // the exchange API exports what __dlpack__ refuses
                                           // (torch: tensors that require grad or have the conjugate bit set):
                                           // stridex refuses them as __dlpack__ does (import_dlpack.cpp)
    bool refusals_final = false;           // a refusal by __dlpack__ ends the import: the producer's other
                                           // protocols would hand the array over without the check (torch's
                                           // __cuda_array_interface__ exports a conjugate view's memory as
                                           // plain, unconjugated values)

    bool ignores_stream = false;   // __dlpack__ orders nothing for the consumer's stream (MLX,
                                   // cuda.core, nanobind): the sanitizer reports such a hand-over
                                   // while the producer's stream has pending work, as NO_SYNC
    bool records_streams = false;  // its arrays' allocator takes the streams that use them (torch:
                                   // Tensor.record_stream): stridex tells it the streams a View of
                                   // one was handed to whose lifetime it knows, through a private
                                   // stream of the framework's, when its last reference to the
                                   // memory goes (handover.hpp)
    // ---- performance: the framework shortcuts the producer's arrays may take ----
    ShortcutSet shortcuts{};  // entries of the registry (shortcuts.hpp) that give, for this
                              // producer's versions, exactly what its public protocol would:
                              // numpy_struct (NumPy >= 2.1: versioned capsules carry the read-only
                              // flag the struct is read for), cupy_c_api and cupy_layout (CuPy >=
                              // 13.4), jaxlib_export and torch_getter (torch >= 2.9)
    const char* why = "";     // one line, for docs and test ids

    // Whether an array of this row takes shortcut `s` now: the row allows it and it is on.
    bool takes(Shortcut s) const noexcept { return shortcuts.has(s) && shortcut_on(s); }

    // Derived, not a column: on the default request the producer is asked its device and sent the
    // legacy stream as 1 on CUDA, what torch's and CuPy's own from_dlpack send (and producers
    // written against them assert), rather than None. Only a producer no row names: every named
    // one keeps None and is not asked its device (JAX: None is a host wait, ints raw CUstreams;
    // torch >= 2.10 needs None spelt out; the others ignore the stream or were never tried with 1).
    constexpr bool spells_default_stream() const noexcept { return *module == '\0'; }
};

// The whole table, most specific rows first; the last row is the generic one.
std::span<const ProducerRow> producer_rows() noexcept;

// The row for a type: that of its framework (stridex/python/framework_of.hpp: the nearest class
// of its MRO whose __module__ a row names), where rows differ by version with the package's
// __version__ from sys.modules. Never fails: anything unknown gets the generic row. Needs the GIL.
const ProducerRow& producer_for(PyTypeObject* type) noexcept;

// The row of a given name (tests); nullptr if there is none.
const ProducerRow* producer_named(const char* name) noexcept;

// "2.11.0+cu130" -> {2, 11, 0}; anything unparsable -> nullopt-like {-1, -1, -1}.
Version parse_version(const char* text) noexcept;

}  // namespace stridex::python
