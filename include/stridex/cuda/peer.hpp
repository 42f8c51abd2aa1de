// Peer access between two GPUs of this process: whether kernels of one may read and write the
// memory of another, enabled once per pair (cuDeviceCanAccessPeer, cuCtxEnablePeerAccess). The one
// home of that question: the copy engine's strided peer copies and the sharded copies' choice
// between a direct and a staged piece (docs/sharded.md) both ask here.
#pragma once

namespace stridex::cuda {

// True when kernels on GPU `ordinal` can now use memory of GPU `peer` (enabled here on first ask,
// remembered per pair); false when the hardware has no peer path between them. The same ordinal
// twice is true. Driver failures other than "already enabled": Error(cuda).
bool peer_access(int ordinal, int peer);

}  // namespace stridex::cuda
