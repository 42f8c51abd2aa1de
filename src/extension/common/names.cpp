// The interned names (names.hpp), made once at module init.
#include "common/names.hpp"

#include <nanobind/nanobind.h>

#include "stridex/dlpack.hpp"

namespace nb = nanobind;

namespace stridex::python {

Names names{};

void intern_names() {
    if (names.dlpack) return;  // interned already
    const auto intern = [](PyObject*& slot, const char* text) {
        slot = PyUnicode_InternFromString(text);
        if (!slot) throw nb::python_error();
    };
#define STRIDEX_INTERN_NAME(field, text) intern(names.field, text);
    STRIDEX_INTERNED_NAMES(STRIDEX_INTERN_NAME)
#undef STRIDEX_INTERN_NAME
    names.kw_stream_max_version = PyTuple_Pack(2, names.stream, names.max_version_kw);
    names.kw_max_version = PyTuple_Pack(1, names.max_version_kw);
    names.kw_stream = PyTuple_Pack(1, names.stream);
    names.max_version = Py_BuildValue("(II)", dlpack::kMajorVersion, dlpack::kMinorVersion);
    if (!names.kw_stream_max_version || !names.kw_max_version || !names.kw_stream || !names.max_version)
        throw nb::python_error();
}

}  // namespace stridex::python
