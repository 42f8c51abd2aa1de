// stridex's private streams (side_stream.hpp).
//
// Only the handles are kept: the streams live as long as the process, and a Driver that goes
// forgets its own (forget_side_streams), so that a later Driver at the same address creates new
// ones.
#include "side_stream.hpp"

#include <algorithm>
#include <mutex>
#include <utility>
#include <vector>

namespace stridex::cuda {
namespace {

using SideStreams = std::vector<std::pair<const Driver*, std::vector<CUstream>>>;
std::mutex g_side_mutex;
SideStreams& side_streams() {
    static auto* const streams = new SideStreams();  // never destroyed: a test's ~Driver may come late
    return *streams;
}

}  // namespace

StreamRef side_stream(int ordinal) {
    Driver& d = driver();
    const std::lock_guard lock(g_side_mutex);
    SideStreams& all = side_streams();
    auto it = std::find_if(all.begin(), all.end(), [&](const auto& e) { return e.first == &d; });
    if (it == all.end()) it = all.insert(all.end(), {&d, {}});
    std::vector<CUstream>& streams = it->second;
    if (streams.size() <= static_cast<std::size_t>(ordinal)) streams.resize(static_cast<std::size_t>(ordinal) + 1);
    CUstream& stream = streams[static_cast<std::size_t>(ordinal)];
    if (!stream) {
        const ContextGuard guard(d, ordinal);
        d.call("cuStreamCreate", d.api().stream_create, &stream, cu::kStreamNonBlocking);
    }
    return StreamRef::from_handle(stream);
}

void forget_side_streams(const Driver& d) noexcept {
    const std::lock_guard lock(g_side_mutex);
    std::erase_if(side_streams(), [&](const auto& e) { return e.first == &d; });
}

}  // namespace stridex::cuda
