// The sanitizer's reports (sanitizer.hpp, docs/sanitizer.md): what each of the four says, and where
// it goes -- a stridex.StreamRaceWarning, or a StreamRaceError in raise mode -- counted. The checks
// decide (sanitizer.cpp); a report is made once, at the end of a hand-over's observation, from what
// they found: the words of every report live here, and nothing here asks the log or a stream.
#pragma once

#include <nanobind/nanobind.h>

#include <cstdint>
#include <optional>
#include <string>

#include "sanitizer/sanitizer_log.hpp"

namespace stridex::python::sanitizer::report {

enum Kind : int { kNoSync, kReuse, kRelease, kIpc, kKinds };

// How a no_sync hand-over came to have no ordering.
enum class Unordered { no_sync, ignores_stream, view_used };

// What a check found: the race, the earlier hand-over it names (every kind but no_sync) and this one.
struct Finding {
    Kind kind;
    log::Entry now;
    std::optional<log::Entry> before;
    Unordered how = Unordered::no_sync;  // no_sync only
    bool may_raise = true;               // false at a View's release: an exception there is unraisable
};

// Counts the report and warns (or raises, in raise mode, where `f.may_raise`). Throws
// nb::python_error when the warning became an exception (raise mode, or a warnings filter of "error").
void make(const Finding& f);

// StreamRaceWarning and StreamRaceError, made once by bind_sanitizer.
void set_types(PyObject* warning, PyObject* error) noexcept;
void set_raise_mode(bool raise) noexcept;
bool raise_mode() noexcept;

// Reports made so far, per class; the first ones made (class, message), at most 256; forgets them.
nanobind::dict counts();
nanobind::list recent();
void forget();
// "stridex sanitizer: N report(s), no_sync n, ..." for the summary at exit; empty when none was made.
std::string summary();

}  // namespace stridex::python::sanitizer::report
