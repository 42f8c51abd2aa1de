// The interprocess event an imported IPC View is ready after (ipc.cpp), as the View's Pending.
#pragma once

#include <memory>

#include "stridex/cuda/driver.hpp"
#include "stridex/pending.hpp"

namespace stridex::cuda::ipc {

// Opens the exporter's event on device `ordinal` (cuIpcOpenEventHandle, in that device's primary
// context) and owns it: the last View that carries it destroys it. Nothing waits for it here; each
// consumer door does, on the consumer's stream (stridex/pending.hpp).
std::shared_ptr<const Pending> open_event(Driver& d, const IpcHandle& handle, int ordinal);

}  // namespace stridex::cuda::ipc
