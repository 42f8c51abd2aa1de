#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <thread>
#include <vector>

#include "expect_error.hpp"
#include "producer.hpp"
#include "stridex/dlpack.hpp"

namespace stridex {
namespace {

using dlpack::DLManagedTensor;
using dlpack::DLManagedTensorVersioned;
using ::stridex::testing::expect_error;
using testing::DeleterCount;
using testing::produce;

TEST(DLPackConversions, DeviceAndDtypeAsDLPackWritesThem) {
    constexpr dlpack::DLDevice d = dlpack::dl_device_of(Device::cuda(3));
    static_assert(d.device_type == 2 && d.device_id == 3);
    EXPECT_EQ(dlpack::dl_device_of(Device::cuda_host()).device_type, 3);
    EXPECT_EQ(dlpack::dl_device_of(Device::cpu()).device_id, 0);
    const dlpack::DLDataType t = dlpack::dl_dtype_of(Dtype::from_name("float32x4"));
    EXPECT_EQ(t.code, 2);
    EXPECT_EQ(t.bits, 32);
    EXPECT_EQ(t.lanes, 4);
}

TEST(DLPackImport, VersionedTensorBecomesAView) {
    std::vector<float> buf(24);
    DeleterCount count;
    auto* t = produce<DLManagedTensorVersioned>(buf.data(), {2, 3, 4}, {12, 4, 1}, count);
    {
        View v = dlpack::import_managed(t);
        EXPECT_EQ(v.ptr(), reinterpret_cast<std::byte*>(buf.data()));
        EXPECT_EQ(std::vector<std::int64_t>(v.shape().begin(), v.shape().end()), (std::vector<std::int64_t>{2, 3, 4}));
        EXPECT_EQ(std::vector<std::int64_t>(v.strides().begin(), v.strides().end()),
                  (std::vector<std::int64_t>{12, 4, 1}));
        EXPECT_EQ(v.dtype(), dtypes::float32);
        EXPECT_EQ(v.device(), Device::cpu());
        EXPECT_FALSE(v.readonly());
        View copy = v;
        v = View();
        EXPECT_EQ(count.calls, 0) << "a copy is still alive";
    }
    EXPECT_EQ(count.calls, 1);
}

TEST(DLPackImport, WritesThroughTheViewReachTheProducer) {
    std::vector<float> buf(6, 0.f);
    DeleterCount count;
    View v = dlpack::import_managed(produce<DLManagedTensorVersioned>(buf.data(), {2, 3}, {3, 1}, count));
    v.as<float, 2>()(1, 2) = 5.f;
    EXPECT_EQ(buf[5], 5.f);
}

TEST(DLPackImport, LegacyNullStridesMeanCOrder) {
    std::vector<double> buf(6);
    DeleterCount count;
    View v = dlpack::import_managed(produce<DLManagedTensor>(buf.data(), {2, 3}, {}, count, {2, 64, 1}));
    EXPECT_TRUE(v.layout().is_c_contiguous());
    EXPECT_EQ(v.strides()[0], 3);
    EXPECT_FALSE(v.readonly()) << "legacy capsules carry no read-only flag";
}

TEST(DLPackImport, LegacyCanBeMarkedReadOnlyByTheCaller) {
    std::vector<double> buf(2);
    DeleterCount count;
    {
        View v = dlpack::import_managed(produce<DLManagedTensor>(buf.data(), {2}, {1}, count, {2, 64, 1}), true);
        EXPECT_TRUE(v.readonly());
        EXPECT_THROW(v.as<double>(), Error);
    }
    EXPECT_EQ(count.calls, 1);
}

TEST(DLPackImport, WritabilityRemembersWhatTheProducerSaid) {
    std::vector<float> buf(4);
    DeleterCount count;
    auto* writable = produce<DLManagedTensorVersioned>(buf.data(), {4}, {1}, count);
    EXPECT_EQ(dlpack::import_managed(writable).writability(), Writability::writable);
    auto* flagged = produce<DLManagedTensorVersioned>(buf.data(), {4}, {1}, count);
    flagged->flags = dlpack::kFlagReadOnly;
    EXPECT_EQ(dlpack::import_managed(flagged).writability(), Writability::readonly);
    View legacy = dlpack::import_managed(produce<DLManagedTensor>(buf.data(), {4}, {1}, count));
    EXPECT_EQ(legacy.writability(), Writability::unknown) << "a legacy tensor cannot say";
    EXPECT_FALSE(legacy.readonly()) << "unknown is writable where a yes or no is needed";
    View immutable = dlpack::import_managed(produce<DLManagedTensor>(buf.data(), {4}, {1}, count), true);
    EXPECT_EQ(immutable.writability(), Writability::immutable);
    EXPECT_TRUE(immutable.readonly());
    // Derived views keep the origin; as_readonly makes a view read-only unless it already is.
    EXPECT_EQ(legacy.slice(0, Slice{1, 3, 1}).writability(), Writability::unknown);
    EXPECT_EQ(legacy.as_readonly().writability(), Writability::readonly);
    EXPECT_EQ(immutable.as_readonly().writability(), Writability::immutable);
    EXPECT_EQ(legacy.with_writability(Writability::immutable).writability(), Writability::immutable);
}

TEST(DLPackImport, PackedByteLanesImportAsBytes) {
    std::vector<std::uint8_t> buf(8);
    DeleterCount count;
    // torch's float4_e2m1fn_x2: code 17, 4 bits, 2 lanes, one byte an element, strided.
    View v = dlpack::import_managed(produce<DLManagedTensorVersioned>(buf.data(), {2, 2}, {4, 2}, count, {17, 4, 2}));
    EXPECT_EQ(v.itemsize(), 1);
    EXPECT_EQ(v.byte_stride(0), 4);
    auto* back = dlpack::export_versioned(v.index(1, 1));
    EXPECT_EQ(back->dl_tensor.data, buf.data() + 2);
    EXPECT_EQ(back->dl_tensor.dtype.lanes, 2);
    back->deleter(back);
    expect_error(
        [&] {
            dlpack::import_managed(produce<DLManagedTensorVersioned>(buf.data(), {1}, {1}, count, {2, 32, 2}));
        },
        ErrorKind::unsupported, "lanes");
}

TEST(DLPackImport, VersionedBeforeMinor2AcceptsNullStrides) {
    std::vector<float> buf(6);
    DeleterCount count;
    auto* t = produce<DLManagedTensorVersioned>(buf.data(), {3, 2}, {}, count);
    t->version = {1, 1};
    View v = dlpack::import_managed(t);
    EXPECT_EQ(v.strides()[0], 2);
    EXPECT_EQ(v.strides()[1], 1);
}

TEST(DLPackImport, VersionedFromMinor2RejectsNullStrides) {
    std::vector<float> buf(6);
    DeleterCount count;
    auto* t = produce<DLManagedTensorVersioned>(buf.data(), {3, 2}, {}, count);
    t->version = {1, 2};
    expect_error([&] { dlpack::import_managed(t); }, ErrorKind::buffer, "requires strides");
    EXPECT_EQ(count.calls, 1);
}

TEST(DLPackImport, ZeroDimNeedsNoShape) {
    float x = 3.f;
    DeleterCount count;
    View v = dlpack::import_managed(produce<DLManagedTensorVersioned>(&x, {}, {}, count));
    EXPECT_EQ(v.ndim(), 0);
    EXPECT_EQ(v.size(), 1);
    EXPECT_EQ((*v.as<float, 0>().data()), 3.f);
}

TEST(DLPackImport, ByteOffsetAddressesElementZero) {
    std::vector<std::int32_t> buf{10, 11, 12, 13};
    DeleterCount count;
    auto* t = produce<DLManagedTensorVersioned>(buf.data(), {2}, {1}, count, {0, 32, 1});
    t->dl_tensor.byte_offset = 8;
    View v = dlpack::import_managed(t);
    EXPECT_EQ((v.as<std::int32_t, 1>()(0)), 12);
    EXPECT_EQ(v.byte_offset(), 8);
}

TEST(DLPackImport, FlagsBecomeReadOnlyAndPadded) {
    std::vector<std::uint8_t> buf(4);
    DeleterCount count;
    auto* t = produce<DLManagedTensorVersioned>(buf.data(), {2, 2}, {1, 2}, count, {17, 4, 1});
    t->flags = dlpack::kFlagReadOnly | dlpack::kFlagIsSubbyteTypePadded;
    View v = dlpack::import_managed(t);
    EXPECT_TRUE(v.readonly());
    EXPECT_TRUE(v.subbyte_padded()) << "padded float4 may be strided: one value a byte";
    EXPECT_EQ(v.nbytes(), 4);
}

TEST(DLPackImport, PackedSubbyteMustBeContiguous) {
    std::vector<std::uint8_t> buf(4);
    DeleterCount count;
    auto* t = produce<DLManagedTensorVersioned>(buf.data(), {2, 2}, {1, 2}, count, {0, 4, 1});
    expect_error([&] { dlpack::import_managed(t); }, ErrorKind::unsupported, "C-contiguous");
    EXPECT_EQ(count.calls, 1);
    auto* ok = produce<DLManagedTensorVersioned>(buf.data(), {2, 3}, {3, 1}, count, {0, 4, 1});
    EXPECT_EQ(dlpack::import_managed(ok).nbytes(), 3) << "six packed 4-bit values fill three bytes";
}

TEST(DLPackImport, NullDeleterIsAllowed) {
    float x = 1.f;
    DeleterCount count;
    auto* t = produce<DLManagedTensorVersioned>(&x, {1}, {1}, count);
    auto deleter = t->deleter;
    t->deleter = nullptr;
    View v = dlpack::import_managed(t);
    EXPECT_FALSE(v.owner());
    deleter(t);  // the producer frees its own tensor
}

TEST(DLPackImport, MajorVersionMismatchCallsOnlyTheDeleter) {
    DeleterCount count;
    auto* t = produce<DLManagedTensorVersioned>(nullptr, {4}, {1}, count);
    t->version = {2, 0};
    t->dl_tensor.ndim = -5;  // past the frozen prefix: must not be read
    expect_error([&] { dlpack::import_managed(t); }, ErrorKind::buffer, "major version 2");
    EXPECT_EQ(count.calls, 1);
}

struct BadTensor {
    const char* what;
    std::vector<std::int64_t> shape, strides;
    dlpack::DLDataType dtype;
    dlpack::DLDevice device;
    bool null_data;
    int ndim;
    ErrorKind kind;
    const char* fragment;
};

class DLPackImportRejects : public ::testing::TestWithParam<BadTensor> {};

TEST_P(DLPackImportRejects, WithATypedErrorAndOneDeleterCall) {
    const BadTensor& bad = GetParam();
    std::vector<float> buf(64);
    for (bool versioned : {true, false}) {
        DeleterCount count;
        void* data = bad.null_data ? nullptr : buf.data();
        if (versioned)
            expect_error(
                [&] {
                    dlpack::import_managed(produce<DLManagedTensorVersioned>(data, bad.shape, bad.strides, count,
                                                                             bad.dtype, bad.device, bad.ndim));
                },
                bad.kind, bad.fragment);
        else
            expect_error(
                [&] {
                    dlpack::import_managed(
                        produce<DLManagedTensor>(data, bad.shape, bad.strides, count, bad.dtype, bad.device, bad.ndim));
                },
                bad.kind, bad.fragment);
        EXPECT_EQ(count.calls, 1) << bad.what << (versioned ? " (versioned)" : " (legacy)");
    }
}

constexpr dlpack::DLDataType f32{2, 32, 1};
constexpr dlpack::DLDevice cpu{1, 0};
constexpr std::int64_t kHuge = std::numeric_limits<std::int64_t>::max() / 2;

INSTANTIATE_TEST_SUITE_P(
    BadInput, DLPackImportRejects,
    ::testing::Values(
        BadTensor{"null data", {4}, {1}, f32, cpu, true, testing::kNdimFromShape, ErrorKind::value, "NULL"},
        BadTensor{"negative extent", {2, -1}, {1, 1}, f32, cpu, false, testing::kNdimFromShape, ErrorKind::value, "-1"},
        BadTensor{
            "overflowing size", {kHuge, 4}, {4, 1}, f32, cpu, false, testing::kNdimFromShape, ErrorKind::value, ""},
        BadTensor{"negative ndim", {2}, {1}, f32, cpu, false, -1, ErrorKind::value, "ndim"},
        BadTensor{"absurd ndim", {2}, {1}, f32, cpu, false, 100000, ErrorKind::value, "ndim"},
        BadTensor{"null shape", {}, {}, f32, cpu, false, 2, ErrorKind::value, "shape is NULL"},
        BadTensor{
            "float with 12 bits", {2}, {1}, {2, 12, 1}, cpu, false, testing::kNdimFromShape, ErrorKind::type, "12"},
        BadTensor{"zero lanes", {2}, {1}, {2, 32, 0}, cpu, false, testing::kNdimFromShape, ErrorKind::type, "lanes"},
        BadTensor{"unknown dtype code",
                  {2},
                  {1},
                  {99, 32, 1},
                  cpu,
                  false,
                  testing::kNdimFromShape,
                  ErrorKind::unsupported,
                  "99"},
        BadTensor{
            "vector dtype", {2}, {1}, {2, 32, 4}, cpu, false, testing::kNdimFromShape, ErrorKind::unsupported, "lanes"},
        BadTensor{
            "bool with 16 bits", {2}, {1}, {6, 16, 1}, cpu, false, testing::kNdimFromShape, ErrorKind::type, "16"},
        BadTensor{
            "unused device type 5", {2}, {1}, f32, {5, 0}, false, testing::kNdimFromShape, ErrorKind::unsupported, "5"},
        BadTensor{
            "negative device id", {2}, {1}, f32, {2, -1}, false, testing::kNdimFromShape, ErrorKind::value, "-1"}));

TEST(DLPackImport, ByteOffsetBeyondInt64IsRejected) {
    std::vector<float> buf(4);
    DeleterCount count;
    auto* t = produce<DLManagedTensorVersioned>(buf.data(), {4}, {1}, count);
    t->dl_tensor.byte_offset = std::numeric_limits<std::uint64_t>::max();
    expect_error([&] { dlpack::import_managed(t); }, ErrorKind::value, "byte_offset");
    EXPECT_EQ(count.calls, 1);
}

TEST(DLPackImport, NullTensorIsAValueError) {
    expect_error([] { dlpack::import_managed(static_cast<DLManagedTensorVersioned*>(nullptr)); }, ErrorKind::value,
                 "NULL");
}

TEST(DLPackImport, EmptyTensorMayHaveNullData) {
    DeleterCount count;
    View v = dlpack::import_managed(produce<DLManagedTensorVersioned>(nullptr, {0, 3}, {3, 1}, count));
    EXPECT_EQ(v.size(), 0);
    EXPECT_EQ(v.nbytes(), 0);
}

// ---- export -----------------------------------------------------------------------------------

View owned_view(std::vector<float>& buf, std::atomic<int>& released, bool readonly = false) {
    Owner owner = Owner::from_action([&released]() noexcept { released.fetch_add(1); });
    const std::int64_t shape[] = {2, 3};
    const std::int64_t strides[] = {1, 2};  // Fortran order, to prove strides travel
    return View(buf.data(), 4, Layout(shape, strides), dtypes::float32, Device::cpu(), readonly, owner);
}

TEST(DLPackExport, VersionedCarriesEverythingAndReleasesOnce) {
    std::vector<float> buf(8);
    std::atomic<int> released{0};
    DLManagedTensorVersioned* t = nullptr;
    {
        View v = owned_view(buf, released, /*readonly=*/true);
        t = dlpack::export_versioned(v, dlpack::kFlagIsCopied);
    }
    EXPECT_EQ(released, 0) << "the exported tensor keeps the owner alive";
    EXPECT_EQ(t->version.major, 1u);
    EXPECT_EQ(t->version.minor, 3u);
    EXPECT_EQ(t->flags, dlpack::kFlagReadOnly | dlpack::kFlagIsCopied);
    EXPECT_EQ(t->dl_tensor.data, reinterpret_cast<std::byte*>(buf.data()) + 4) << "byte_offset folded into data";
    EXPECT_EQ(t->dl_tensor.byte_offset, 0u);
    EXPECT_EQ(t->dl_tensor.ndim, 2);
    EXPECT_EQ(t->dl_tensor.shape[1], 3);
    EXPECT_EQ(t->dl_tensor.strides[1], 2);
    EXPECT_EQ(t->dl_tensor.dtype.code, 2);
    EXPECT_EQ(t->dl_tensor.device.device_type, 1);
    t->deleter(t);
    EXPECT_EQ(released, 1);
}

TEST(DLPackExport, LegacyRefusesReadOnly) {
    std::vector<float> buf(8);
    std::atomic<int> released{0};
    View v = owned_view(buf, released, true);
    expect_error([&] { dlpack::export_legacy(v); }, ErrorKind::buffer, "read-only");
    v = View();
    EXPECT_EQ(released, 1) << "a refused export holds no reference";
}

TEST(DLPackExport, LegacyGoesOutAsTheProducersOwnWould) {
    std::vector<float> buf(8);
    std::atomic<int> released{0};
    View v = owned_view(buf, released);
    for (Writability w : {Writability::writable, Writability::unknown, Writability::immutable}) {
        DLManagedTensor* t = dlpack::export_legacy(v.with_writability(w));  // JAX's arrays: unflagged legacy
        t->deleter(t);
    }
    expect_error([&] { dlpack::export_legacy(v.with_writability(Writability::readonly)); }, ErrorKind::buffer,
                 "read-only");
    for (Writability w : {Writability::readonly, Writability::immutable}) {
        auto* t = dlpack::export_versioned(v.with_writability(w));
        EXPECT_EQ(t->flags, dlpack::kFlagReadOnly) << "versioned consumers see read-only";
        t->deleter(t);
    }
    auto* t = dlpack::export_versioned(v.with_writability(Writability::unknown));
    EXPECT_EQ(t->flags, 0u);
    t->deleter(t);
}

TEST(DLPackExport, LegacyRoundTripPreservesTheView) {
    std::vector<float> buf(8);
    std::atomic<int> released{0};
    {
        View v = owned_view(buf, released);
        View back = dlpack::import_managed(dlpack::export_legacy(v));
        EXPECT_EQ(back.ptr(), v.ptr());
        EXPECT_EQ(back.layout(), v.layout());
        EXPECT_EQ(back.dtype(), v.dtype());
        v = View();
        EXPECT_EQ(released, 0);
    }
    EXPECT_EQ(released, 1);
}

TEST(DLPackExport, ManyDimensionsUseHeapStorage) {
    std::vector<float> buf(1);
    std::vector<std::int64_t> shape(20, 1), strides(20, 1);
    View v(buf.data(), 0, Layout(shape, strides), dtypes::float32, Device::cpu(), false, Owner());
    for (int round = 0; round < 3; ++round) {
        View back = dlpack::import_managed(dlpack::export_versioned(v));
        EXPECT_EQ(back.ndim(), 20);
        EXPECT_EQ(back.layout(), v.layout());
    }
}

TEST(DLPackExport, DeleterMayRunOnAnotherThread) {
    std::vector<float> buf(8);
    std::atomic<int> released{0};
    std::vector<DLManagedTensorVersioned*> exported;
    {
        View v = owned_view(buf, released);
        for (int i = 0; i < 100; ++i) exported.push_back(dlpack::export_versioned(v));
    }
    std::thread([&] {
        for (auto* t : exported) t->deleter(t);
    }).join();
    EXPECT_EQ(released, 1);
}

TEST(DLPackExport, PooledBlocksAreReinitialised) {
    std::vector<float> buf(8);
    std::atomic<int> released{0};
    View ro = owned_view(buf, released, true);
    auto* first = dlpack::export_versioned(ro);
    first->deleter(first);
    const std::int64_t shape[] = {8};
    View rw(buf.data(), 0, Layout::contiguous(shape), dtypes::float32, Device::cuda(1), false, Owner());
    auto* second = dlpack::export_versioned(rw);
    EXPECT_EQ(second->flags, 0u);
    EXPECT_EQ(second->dl_tensor.ndim, 1);
    EXPECT_EQ(second->dl_tensor.device.device_type, 2);
    EXPECT_EQ(second->dl_tensor.device.device_id, 1);
    second->deleter(second);
}

}  // namespace
}  // namespace stridex
