// The CUDA graph capture rule (stridex/cuda/capture.hpp, docs/graphs.md) against the fake driver:
// the capture query, order() inside and across a capture, graph-owned keep-alives, and the copy
// engine's refusals, which must come before anything is enqueued.
#include <gtest/gtest.h>

#include <cstring>

#include "expect_error.hpp"
#include "fake_driver.hpp"
#include "stridex/cuda/capture.hpp"
#include "stridex/cuda/copy.hpp"
#include "stridex/cuda/ipc.hpp"

namespace {

using namespace stridex_test;
using stridex::Device;
using stridex::Dtype;
using stridex::ErrorKind;
using stridex::Layout;
using stridex::Owner;
using stridex::View;
using stridex::testing::throws_error;
using Log = std::vector<std::string>;

const StreamRef kCapturing(0x5010), kOther(0x5020), kSecondCapture(0x5030);

CUstream h(StreamRef s) { return s.handle(); }

TEST(CudaCapture, QueryNamesTheStatusIdAndGraph) {
    FakeCuda fake;
    fake->begin_capture(h(kCapturing), 7);
    const Capture c = capture_of(kCapturing, 0);
    EXPECT_TRUE(c.active());
    EXPECT_EQ(c.id, 7u);
    EXPECT_EQ(c.graph, FakeDriver::graph_of(7));
    EXPECT_FALSE(capture_of(kOther, 0).capturing());
    EXPECT_FALSE(capture_of(StreamRef::none(), 0).capturing());
    fake->begin_capture(h(kOther), 8, /*status=*/2);
    EXPECT_EQ(capture_of(kOther, 0).status, CaptureStatus::invalidated);
    EXPECT_EQ(capture_of(kOther, 0).graph, nullptr);
    fake->legacy_implicit = true;
    EXPECT_EQ(capture_of(StreamRef::legacy(), 0).status, CaptureStatus::implicit);
    EXPECT_TRUE(fake->log.empty());  // queries enqueue nothing
}

TEST(CudaCapture, WithoutTheQueryNothingCaptures) {
    DriverOverride missing("libcuda_does_not_exist.so.1");
    EXPECT_FALSE(capture_of(kCapturing, 0).capturing());
}

TEST(CudaCapture, OrderInsideOneCaptureIsAnOrdinaryRecordAndWait) {
    FakeCuda fake;
    fake->begin_capture(h(kCapturing), 7);
    fake->begin_capture(h(kOther), 7);  // forked into the same capture
    order(kOther, kCapturing, Device::cuda(0));
    EXPECT_EQ(fake->take_log(), (Log{"event_create e1", "record e1 on s5020 ctx0", "wait s5010 on e1"}));
}

TEST(CudaCapture, ProducerOutsideTheCaptureIsAnExternalWaitOnAnEventTheGraphOwns) {
    FakeCuda fake;
    fake->begin_capture(h(kCapturing), 7);
    order(kOther, kCapturing, Device::cuda(0));
    order(kOther, kCapturing, Device::cuda(0));  // a fresh event each time: never re-recorded
    EXPECT_EQ(fake->take_log(), (Log{"event_create e1", "user_object u0", "graph 7 keeps u0", "record e1 on s5020 ctx0",
                                     "wait s5010 on e1 external", "event_create e2", "user_object u1",
                                     "graph 7 keeps u1", "record e2 on s5020 ctx0", "wait s5010 on e2 external"}));
    EXPECT_EQ(fake->events_destroyed, 0);
    fake->destroy_graph(7);  // the driver's thread: queued, not destroyed there
    EXPECT_EQ(pending_graph_releases(), 2u);
    EXPECT_EQ(fake->events_destroyed, 0);
    drain_graph_releases();
    EXPECT_EQ(fake->events_destroyed, 2);
    EXPECT_EQ(pending_graph_releases(), 0u);
    fake->expect_clean();
}

TEST(CudaCapture, ConsumerOutsideTheCaptureCannotWaitForCapturedWork) {
    FakeCuda fake;
    fake->begin_capture(h(kCapturing), 7);
    EXPECT_TRUE(throws_error([&] { order(kCapturing, kOther, Device::cuda(0)); }, ErrorKind::cuda,
                             "stream ordering cannot run inside a CUDA graph capture: work captured into a graph "
                             "runs only when the graph is launched, so stream 0x5020 (not in that capture) cannot "
                             "wait for it; stream 0x5010 (capturing CUDA graph capture 7). Nothing was enqueued"));
    fake->begin_capture(h(kSecondCapture), 9);
    EXPECT_TRUE(throws_error([&] { order(kCapturing, kSecondCapture, Device::cuda(0)); }, ErrorKind::cuda,
                             "two captures cannot be joined"));
    EXPECT_TRUE(fake->log.empty());
}

TEST(CudaCapture, TheLegacyStreamInACaptureIsRefused) {
    FakeCuda fake;
    fake->legacy_implicit = true;
    EXPECT_TRUE(throws_error([&] { order(kOther, StreamRef::legacy(), Device::cuda(0)); }, ErrorKind::cuda,
                             "the legacy default stream cannot take part in a capture; use the capturing stream; the "
                             "legacy default stream (implicitly part of a CUDA graph capture"));
    EXPECT_TRUE(throws_error([&] { order(StreamRef::legacy(), kOther, Device::cuda(0)); }, ErrorKind::cuda,
                             "legacy default stream cannot take part"));
    EXPECT_TRUE(fake->log.empty());
}

TEST(CudaCapture, OwnersLiveAsLongAsTheGraph) {
    FakeCuda fake;
    fake->begin_capture(h(kCapturing), 7);
    int released = 0;
    {
        Owner owner = Owner::from_action([&released]() noexcept { ++released; });
        keep_alive_in_capture(capture_of(kCapturing, 0), owner);
        keep_alive_in_capture(capture_of(kOther, 0), owner);        // not capturing: nothing kept
        keep_alive_in_capture(capture_of(kCapturing, 0), Owner{});  // empty: nothing to keep
    }
    EXPECT_EQ(fake->take_log(), (Log{"user_object u0", "graph 7 keeps u0"}));
    EXPECT_EQ(released, 0);
    fake->destroy_graph(7);
    EXPECT_EQ(released, 0);  // not on the driver's thread
    drain_graph_releases();
    EXPECT_EQ(released, 1);
}

int g_notified = 0;
void count_notification() noexcept { ++g_notified; }

TEST(CudaCapture, TheNotifierHearsOfEachRelease) {
    FakeCuda fake;
    fake->begin_capture(h(kCapturing), 7);
    set_graph_release_notifier(&count_notification);
    keep_alive_in_capture(capture_of(kCapturing, 0), Owner::from_action([]() noexcept {}));
    fake->destroy_graph(7);
    set_graph_release_notifier(nullptr);
    EXPECT_EQ(g_notified, 1);
    drain_graph_releases();
}

TEST(CudaCapture, AFailedRetainLeavesNothingAlive) {
    FakeCuda fake;
    fake->begin_capture(h(kCapturing), 7);
    fake->fail_nth("cuGraphRetainUserObject", 1, result::invalid_value);
    int released = 0;
    EXPECT_TRUE(throws_error(
        [&] {
            keep_alive_in_capture(capture_of(kCapturing, 0),
                                  Owner::from_action([&released]() noexcept { ++released; }));
        },
        ErrorKind::cuda, "cuGraphRetainUserObject"));
    drain_graph_releases();
    EXPECT_EQ(released, 1);
}

// ---- the copy engine inside a capture ----
CUdeviceptr address_of(const void* p) { return reinterpret_cast<CUdeviceptr>(p); }

View labelled(void* data, std::vector<std::int64_t> shape, std::vector<std::int64_t> strides, Device device,
              std::intptr_t stream, Owner owner = {}) {
    View v(data, 0, Layout(shape, strides), stridex::dtypes::float32, device, false, std::move(owner));
    v.set_stream(stream);
    return v;
}

struct Memory {
    alignas(64) float pinned[128] = {};
    alignas(64) float device[128] = {};
    alignas(64) float pageable[128] = {};
    explicit Memory(FakeCuda& fake) {
        for (int i = 0; i < 128; ++i) pinned[i] = pageable[i] = static_cast<float>(i);
        fake->add_pointer_range(address_of(pinned), sizeof pinned, cu::kMemoryTypeHost, false, 0);
        fake->add_pointer_range(address_of(device), sizeof device, cu::kMemoryTypeDevice, false, 0);
    }
};

TEST(CudaCaptureCopy, PinnedToDeviceIsCapturedAndKeepsBothOwners) {
    FakeCuda fake;
    Memory m(fake);
    fake->begin_capture(h(kCapturing), 7);
    int released = 0;
    {
        const View src = labelled(m.pinned, {64}, {1}, Device::cuda_host(), kCapturing.encoded(),
                                  Owner::from_action([&released]() noexcept { ++released; }));
        const View dst = labelled(m.device, {64}, {1}, Device::cuda(0), kOther.encoded(),
                                  Owner::from_action([&released]() noexcept { ++released; }));
        EXPECT_EQ(stridex::copy(dst, src, kCapturing.encoded()), kCapturing.encoded());
    }
    const Log log = fake->take_log();
    // dst's producer is outside the capture: an external wait; then the copy; then the keep-alives.
    EXPECT_EQ(log, (Log{"event_create e1", "user_object u0", "graph 7 keeps u0", "record e1 on s5020 ctx0",
                        "wait s5010 on e1 external", "memcpy_async device+0 <- pinned+0 256 on s5010", "user_object u1",
                        "graph 7 keeps u1", "user_object u2", "graph 7 keeps u2"}));
    EXPECT_EQ(released, 0);
    fake->destroy_graph(7);
    drain_graph_releases();
    EXPECT_EQ(released, 2);
}

TEST(CudaCaptureCopy, PageableHostMemoryIsRefusedBeforeAnythingIsEnqueued) {
    FakeCuda fake;
    Memory m(fake);
    fake->begin_capture(h(kCapturing), 7);
    const View host = labelled(m.pageable, {64}, {1}, Device::cpu(), stridex::kNoStream);
    const View dev = labelled(m.device, {64}, {1}, Device::cuda(0), kOther.encoded());
    EXPECT_TRUE(throws_error([&] { stridex::copy(dev, host, kCapturing.encoded()); }, ErrorKind::cuda,
                             "stridex.copy cannot run inside a CUDA graph capture: copying cpu to cuda:0 needs the "
                             "CPU (pageable host memory is staged or waited for by the host)"));
    EXPECT_TRUE(throws_error([&] { stridex::copy(host, dev, kCapturing.encoded()); }, ErrorKind::cuda,
                             "copying cuda:0 to cpu needs the CPU"));
    const Log log = fake->take_log();
    for (const std::string& line : log) EXPECT_EQ(line.rfind("pointer_attributes", 0), 0u) << line;
}

TEST(CudaCaptureCopy, PinnedMemoryInALayoutTheCpuMustPackIsRefused) {
    FakeCuda fake;
    Memory m(fake);
    fake->begin_capture(h(kCapturing), 7);
    // Every other element of every other row: neither one block, nor 2-d rows, nor dense.
    const View src = labelled(m.pinned, {4, 8}, {32, 2}, Device::cuda_host(), stridex::kNoStream);
    const View dst = labelled(m.device, {4, 8}, {8, 1}, Device::cuda(0), stridex::kNoStream);
    EXPECT_TRUE(throws_error([&] { stridex::copy(dst, src, kCapturing.encoded()); }, ErrorKind::cuda,
                             "in this layout needs the CPU to pack the host side"));
}

// A copy between host memories enqueues nothing: it runs on the CPU at the call and never asks
// the stream anything (a caller may name any value for it), capturing or not.
TEST(CudaCaptureCopy, HostCopiesRunNowWhateverTheStream) {
    FakeCuda fake;
    Memory m(fake);
    fake->begin_capture(h(kCapturing), 7);
    float out[64];
    const View src = labelled(m.pageable, {64}, {1}, Device::cpu(), stridex::kNoStream);
    const View dst = labelled(out, {64}, {1}, Device::cpu(), stridex::kNoStream);
    EXPECT_EQ(stridex::copy(dst, src, kCapturing.encoded()), stridex::kNoStream);
    EXPECT_EQ(std::memcmp(out, m.pageable, sizeof out), 0);
    EXPECT_TRUE(fake->log.empty()) << fake->log.front();  // not one driver call
}

TEST(CudaCaptureCopy, TheLegacyStreamInACaptureIsRefused) {
    FakeCuda fake;
    Memory m(fake);
    fake->legacy_implicit = true;
    const View src = labelled(m.pinned, {64}, {1}, Device::cuda_host(), stridex::kNoStream);
    const View dst = labelled(m.device, {64}, {1}, Device::cuda(0), stridex::kNoStream);
    EXPECT_TRUE(throws_error([&] { stridex::copy(dst, src, stridex::kDefaultStream); }, ErrorKind::cuda,
                             "copying cuda_host to cuda:0 on the legacy default stream, which cannot take part in a "
                             "capture; pass the capturing stream (stream=...); the legacy default stream (implicitly "
                             "part of a CUDA graph capture"));
    EXPECT_TRUE(fake->log.empty());
}

TEST(CudaCaptureIpc, AViewStillBeingCapturedIsNotSharedWithAnotherProcess) {
    FakeCuda fake;
    Memory m(fake);
    fake->begin_capture(h(kCapturing), 7);
    const View v = labelled(m.device, {64}, {1}, Device::cuda(0), kCapturing.encoded());
    EXPECT_TRUE(throws_error([&] { (void)stridex::cuda::ipc::Export::of(v); }, ErrorKind::cuda,
                             "sharing a View with another process cannot run inside a CUDA graph capture: its "
                             "pending work is captured into a graph"));
    for (const std::string& line : fake->take_log())
        EXPECT_EQ(line.find("record"), std::string::npos) << line;  // no event recorded in the capture
    fake->end_capture(h(kCapturing));
    EXPECT_NO_THROW((void)stridex::cuda::ipc::Export::of(v));  // after the capture: an ordinary export
}

}  // namespace
