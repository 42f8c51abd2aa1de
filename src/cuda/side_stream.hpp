// stridex's own CUDA streams: one non-blocking stream per device and driver, for work that must
// neither join a capture nor hold a stream of the program's (the relay of an IPC event, the
// allocations a graph owns).
#pragma once

#include "stridex/cuda/stream.hpp"

namespace stridex::cuda {

// The private stream of device `ordinal` of the process's driver, created on first use and never
// destroyed (exit may come after the driver is gone).
StreamRef side_stream(int ordinal);

// Drops the handles of the private streams made for `d` without calling it (~Driver calls this: a
// later Driver at the same address must not find them).
void forget_side_streams(const Driver& d) noexcept;

}  // namespace stridex::cuda
