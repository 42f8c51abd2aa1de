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

// For imports whose exporter may destroy its event as soon as the import returns (VMM memory: its
// ticket is released right after the import, so that the memory may outlive its exporter), where
// CUDA leaves a later wait on the opened event undefined. A private stream of device `ordinal`
// waits for the exporter's event now and records an event of this process, which is returned
// instead: the consumer's stream still waits at the point of use, and no stream of the caller's
// (not the legacy default stream either) is held at import.
std::shared_ptr<const Pending> relay_event(Driver& d, const IpcHandle& handle, int ordinal);

}  // namespace stridex::cuda::ipc
