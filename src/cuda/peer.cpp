// Peer access between two GPUs (stridex/cuda/peer.hpp), enabled once per ordered pair.
#include "stridex/cuda/peer.hpp"

#include <mutex>
#include <set>
#include <utility>

#include "stridex/cuda/driver.hpp"

namespace stridex::cuda {

bool peer_access(int ordinal, int peer) {
    if (ordinal == peer) return true;
    // Both answers are kept: the hardware's topology does not change while the process runs, and
    // asking again would cost a driver call per piece of a sharded copy.
    static std::mutex mutex;
    static std::set<std::pair<int, int>> enabled, refused;
    const std::lock_guard lock(mutex);
    if (enabled.count({ordinal, peer})) return true;
    if (refused.count({ordinal, peer})) return false;
    Driver& d = driver();
    int can = 0;
    d.call("cuDeviceCanAccessPeer", d.api().device_can_access_peer, &can, d.device(ordinal), d.device(peer));
    if (!can) {
        refused.insert({ordinal, peer});
        return false;
    }
    const ContextGuard guard(d, ordinal);
    d.require("cuCtxEnablePeerAccess", d.api().ctx_enable_peer_access);
    const CUresult r = d.api().ctx_enable_peer_access(d.primary_context(peer), 0);
    if (r != result::success && r != result::peer_access_already_enabled) d.fail_call("cuCtxEnablePeerAccess", r);
    enabled.insert({ordinal, peer});
    return true;
}

}  // namespace stridex::cuda
