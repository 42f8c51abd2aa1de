// Deprecated: the core's host copies are <stridex/host_copy.hpp> (the copy engine: <stridex/cuda/copy.hpp>).
#pragma once
#include "stridex/host_copy.hpp"  // IWYU pragma: export
