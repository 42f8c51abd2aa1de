// The _stridex module: binds each piece (bindings.hpp) in dependency order.
#include "common/bindings.hpp"
#include "common/names.hpp"
#include "sanitizer/sanitizer.hpp"

NB_MODULE(_stridex, m) {
    using namespace stridex::python;
    m.doc() = "stridex native core: zero-copy array views with exact protocol semantics";
    // The one version string: CMake's project(VERSION), which pyproject.toml reads too.
    m.attr("__version__") = STRIDEX_VERSION;
    intern_names();  // names.hpp: every name the pieces below look up or match
    bind_errors(m);
    bind_types(m);
    bind_view(m);
    bind_shortcuts(m);  // before anything imports: STRIDEX_DISABLE_SHORTCUTS is read here
    bind_import(m);
    bind_internals(m);
    bind_caster_api(m);
    bind_export(m);
    bind_from_pointer(m);
    bind_cuda(m);
    bind_ipc(m);
    bind_ipc_tickets(m);
    bind_memory(m);
    bind_copy(m);
    bind_sharded(m);
    sanitizer::bind_sanitizer(m);  // the hand-over race sanitizer; STRIDEX_SANITIZE is read here
}
