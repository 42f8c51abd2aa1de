// The one hook stridex.copy calls for sharded arrays (bind_sharded.cpp, docs/sharded.md).
#pragma once

#include <nanobind/nanobind.h>

namespace stridex::python {

// stridex.copy(dst, src, stream=) when either side is a stridex.ShardedView: the sharded copy's
// result; an invalid object when neither is (the caller goes on with its View copy).
nanobind::object copy_sharded(nanobind::handle dst, nanobind::handle src, nanobind::handle stream);

}  // namespace stridex::python
