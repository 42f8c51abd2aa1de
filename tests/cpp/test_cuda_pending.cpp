// An imported IPC View's event, against the fake driver: carried as the View's Pending, waited for
// at the point of use by the consumer's stream (cuda::order, ready_stream, the copy engine), on the
// host only by host readers (wait_on_host), and destroyed with the last View that carries it.
#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "fake_driver.hpp"
#include "stridex/cuda/copy.hpp"
#include "stridex/cuda/ipc.hpp"
#include "stridex/cuda/stream.hpp"

namespace {

using namespace stridex_test;
using stridex::Device;
using stridex::kNoStream;
using stridex::Layout;
using stridex::Owner;
using stridex::Slice;
using stridex::View;
using stridex::cuda::StreamRef;
namespace dtypes = stridex::dtypes;
namespace ipc = stridex::cuda::ipc;
namespace cuda = stridex::cuda;
using Log = std::vector<std::string>;

constexpr CUdeviceptr kBase = 0x500000000;
constexpr std::intptr_t kConsumer = 0x5030, kOther = 0x5040;

// An exported View of 16 floats on cuda:0 and its import, as another process would open it (the
// fake driver plays both): the exporter's event is e1, the importer's opened copy e2.
struct Imported {
    FakeCuda& fake;
    std::optional<ipc::Export> exported;
    std::optional<View> view;
    explicit Imported(FakeCuda& f) : fake(f) {
        fake->add_pointer_range(kBase, 1 << 20, cu::kMemoryTypeDevice, false, 0);
        const std::int64_t shape[] = {16};
        const View src(reinterpret_cast<void*>(kBase), 0, Layout::contiguous(shape), dtypes::float32, Device::cuda(0),
                       false, Owner());
        exported.emplace(ipc::Export::of(src));
        const ipc::Shape s{{16}, {1}, dtypes::float32, false};
        view = ipc::import_handle(exported->handle(), exported->device(), exported->offset(), exported->extent(), s,
                                  exported->event(), Owner());
        fake->take_log();
    }
};

TEST(CudaPending, TheImportWaitsForNothingAndTheConsumersStreamWaitsWhenItTakesTheView) {
    FakeCuda fake;
    Imported in(fake);
    const View& v = *in.view;
    ASSERT_NE(v.pending(), nullptr);
    EXPECT_EQ(v.stream(), kNoStream);
    cuda::order(v, StreamRef(kConsumer));
    EXPECT_EQ(fake->take_log(), (Log{"wait s5030 on e2"}));  // the event itself: no record, no host block
    EXPECT_TRUE(v.pending()->waited_by(kConsumer, Device::cuda(0)));
    EXPECT_FALSE(v.pending()->waited_by(kOther, Device::cuda(0)));
    EXPECT_TRUE(v.pending()->waited());
}

TEST(CudaPending, ADefaultStreamWaitsOnceAndANamedStreamEachTime) {
    FakeCuda fake;
    Imported in(fake);
    const View& v = *in.view;
    cuda::order(v, StreamRef::legacy());
    cuda::order(v, StreamRef::legacy());
    cuda::order(v, StreamRef::per_thread());
    cuda::order(v, StreamRef::per_thread());
    // A named stream's handle may be reused by a new stream that never waited: asked again, it waits again.
    cuda::order(v, StreamRef(kConsumer));
    cuda::order(v, StreamRef(kConsumer));
    EXPECT_EQ(fake->take_log(),
              (Log{"wait legacy on e2", "wait per_thread on e2", "wait s5030 on e2", "wait s5030 on e2"}));
}

TEST(CudaPending, CopiesAndSlicesShareOneEventAndSetStreamDropsIt) {
    FakeCuda fake;
    Imported in(fake);
    const View copy = *in.view;
    const View part = in.view->slice(0, Slice{4, 8, 1});
    EXPECT_EQ(part.pending(), in.view->pending());
    cuda::order(copy, StreamRef::legacy());
    cuda::order(part, StreamRef::legacy());  // the same event, already waited for by that stream
    EXPECT_EQ(fake->take_log(), (Log{"wait legacy on e2"}));
    View moved = part;
    moved.set_stream(stridex::StreamValue(kConsumer));  // the caller ordered it: ready on kConsumer now
    EXPECT_EQ(moved.pending(), nullptr);
    cuda::order(moved, StreamRef(kOther));
    EXPECT_EQ(fake->take_log(), (Log{"event_create e3", "record e3 on s5030 ctx0", "wait s5040 on e3"}));
}

TEST(CudaPending, NoStreamAndHostMemoryOrderNothing) {
    FakeCuda fake;
    Imported in(fake);
    cuda::order(*in.view, StreamRef::none());  // the consumer said it takes care of ordering
    EXPECT_TRUE(fake->take_log().empty());
    EXPECT_FALSE(in.view->pending()->waited());
}

TEST(CudaPending, ReadyStreamResolvesTheEventOntoTheStreamItReports) {
    FakeCuda fake;
    Imported in(fake);
    EXPECT_EQ(cuda::ready_stream(*in.view), StreamRef::legacy());  // no stream of its own: the legacy one
    EXPECT_EQ(fake->take_log(), (Log{"wait legacy on e2"}));
    View on_stream = *in.view;
    on_stream.set_stream(stridex::StreamValue(kConsumer));
    on_stream.set_pending(in.view->pending());
    EXPECT_EQ(cuda::ready_stream(on_stream), StreamRef(kConsumer));
    EXPECT_EQ(fake->take_log(), (Log{"wait s5030 on e2"}));
    on_stream.set_stream(stridex::StreamValue(kOther));  // no Pending: the stream as it is, nothing enqueued
    EXPECT_EQ(cuda::ready_stream(on_stream), StreamRef(kOther));
    EXPECT_TRUE(fake->take_log().empty());
}

TEST(CudaPending, TheHostWaitsOnlyForAHostReaderAndThenNoStreamNeedsTo) {
    FakeCuda fake;
    Imported in(fake);
    cuda::wait_on_host(*in.view);
    cuda::wait_on_host(*in.view);
    EXPECT_EQ(fake->take_log(), (Log{"event_sync e2"}));  // once: the work is done
    cuda::order(*in.view, StreamRef(kConsumer));
    EXPECT_TRUE(fake->take_log().empty());
    EXPECT_TRUE(in.view->pending()->waited_by(kOther, Device::cuda(0)));
}

TEST(CudaPending, TheCopyEngineWaitsOnItsOwnStream) {
    FakeCuda fake;
    Imported in(fake);
    // Two ranges of real bytes the fake treats as device memory; the source carries the event.
    alignas(64) static float a[16], b[16];
    fake->add_pointer_range(reinterpret_cast<CUdeviceptr>(a), sizeof a, cu::kMemoryTypeDevice, false, 0);
    fake->add_pointer_range(reinterpret_cast<CUdeviceptr>(b), sizeof b, cu::kMemoryTypeDevice, false, 0);
    const std::int64_t shape[] = {16};
    View src(a, 0, Layout::contiguous(shape), dtypes::float32, Device::cuda(0), false, Owner());
    src.set_pending(in.view->pending());
    const View dst(b, 0, Layout::contiguous(shape), dtypes::float32, Device::cuda(0), false, Owner());
    EXPECT_EQ(stridex::copy(dst, src, kConsumer), kConsumer);
    const Log log = fake->take_log();
    ASSERT_GE(log.size(), 2u);
    EXPECT_EQ(log[0], "wait s5030 on e2");  // before the copy reads
    EXPECT_EQ(log[1].rfind("memcpy", 0), 0u) << log[1];
}

TEST(CudaPending, AReExportRecordsAfterTheEventItWasImportedWith) {
    FakeCuda fake;
    Imported in(fake);
    // What the fake maps the import at is device memory to it too (a second process's mapping).
    fake->add_pointer_range(reinterpret_cast<CUdeviceptr>(in.view->ptr()), 1 << 20, cu::kMemoryTypeDevice, false, 0);
    const ipc::Export again = ipc::Export::of(*in.view);
    const Log log = fake->take_log();
    const auto at = [&](const std::string& line) { return std::find(log.begin(), log.end(), line) - log.begin(); };
    ASSERT_LT(at("wait legacy on e2"), static_cast<std::ptrdiff_t>(log.size()));
    EXPECT_LT(at("wait legacy on e2"), at("record e3 on legacy ctx0"));
}

TEST(CudaPending, TheEventIsDestroyedWithTheLastViewThatCarriesIt) {
    FakeCuda fake;
    std::optional<Imported> in(std::in_place, fake);
    const int before = fake->events_destroyed;
    std::optional<View> slice = in->view->slice(0, Slice{0, 2, 1});
    in->view.reset();
    EXPECT_EQ(fake->events_destroyed, before);  // the slice still carries it
    slice.reset();
    EXPECT_EQ(fake->events_destroyed, before + 1);
    in.reset();
}

}  // namespace
