// Fuzzes DLPack import: a DLManagedTensorVersioned or legacy DLManagedTensor built field by field
// from the input, exactly as a foreign producer could hand it over (any version, flags, ndim,
// dtype, device, byte_offset, data address, NULL or short shape/strides arrays). Import must
// either throw stridex::Error or give a View obeying the byte rules; the deleter runs exactly
// once either way, and a re-export of an accepted view must import back to the same view.
#include <cstdint>
#include <memory>
#include <vector>

#include "fuzz_input.hpp"
#include "stridex/dlpack.hpp"
#include "stridex/error.hpp"

using namespace stridex;

namespace {

int g_deleted = 0;
template <class Managed>
void count_delete(Managed*) noexcept {
    ++g_deleted;
}

// Shape and strides arrays of exactly the length the producer allocated: an importer reading
// past ndim (or reading at all when ndim is absurd) is an ASan report.
std::unique_ptr<std::int64_t[]> dims(fuzz::Input& in, int count, bool strides) {
    if (count <= 0) return nullptr;
    auto out = std::make_unique<std::int64_t[]>(static_cast<std::size_t>(count));
    for (int i = 0; i < count; ++i) out[static_cast<std::size_t>(i)] = strides ? in.stride() : in.extent();
    return out;
}

dlpack::DLTensor tensor_of(fuzz::Input& in, std::unique_ptr<std::int64_t[]>& shape,
                           std::unique_ptr<std::int64_t[]>& strides) {
    dlpack::DLTensor t{};
    const auto pick = in.take<std::uint8_t>();
    t.ndim = pick < 240 ? pick % 10 : in.take<std::int32_t>();
    const int allocated = t.ndim < 0 ? 0 : (t.ndim > 64 ? 0 : t.ndim);
    const auto nulls = in.take<std::uint8_t>();
    shape = nulls % 7 == 1 ? nullptr : dims(in, allocated, false);
    strides = nulls % 5 == 1 ? nullptr : dims(in, allocated, true);
    t.shape = shape.get();
    t.strides = strides.get();
    t.dtype = dlpack::DLDataType{static_cast<std::uint8_t>(in.take<std::uint8_t>() % 20), in.take<std::uint8_t>(),
                                 static_cast<std::uint16_t>(in.take<std::uint8_t>() < 250 ? 1
                                                                                          : in.take<std::uint16_t>())};
    const auto device = in.take<std::uint8_t>();
    t.device = dlpack::DLDevice{device < 250 ? 1 : in.take<std::int32_t>(), device < 250 ? 0 : in.take<std::int32_t>()};
    const auto offset = in.take<std::uint8_t>();
    t.byte_offset = offset < 200 ? offset % 17 : in.take<std::uint64_t>();
    const auto where = in.take<std::uint8_t>();
    t.data = where < 10 ? nullptr
                        : reinterpret_cast<void*>(where < 200 ? std::uintptr_t{0x10000} : in.take<std::uintptr_t>());
    return t;
}

void check_view(const View& v) {
    // Every accessor of an accepted view is defined: none may overflow (UBSan) or throw.
    (void)v.nbytes();
    const Span span = v.byte_span();
    fuzz::require(span.lo <= 0 && (v.layout().empty() || span.hi > 0));
    for (int a = 0; a < v.ndim(); ++a) (void)v.byte_stride(a);
}

// Export, then import the export: the same view comes back.
void round_trip(const View& v) {
    dlpack::DLManagedTensorVersioned* out = dlpack::export_versioned(v);
    View back = dlpack::import_managed(out);
    fuzz::require(back.layout() == v.layout() && back.dtype() == v.dtype() && back.ptr() == v.ptr() &&
                  back.readonly() == v.readonly());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    fuzz::Input in(data, size);
    const bool versioned = in.take<std::uint8_t>() % 2 == 0;
    std::unique_ptr<std::int64_t[]> shape, strides;
    g_deleted = 0;
    if (versioned) {
        auto* m = new dlpack::DLManagedTensorVersioned{};
        const auto version = in.take<std::uint8_t>();
        m->version = dlpack::DLPackVersion{version < 230 ? 1u : in.take<std::uint32_t>(), in.take<std::uint8_t>() % 5u};
        m->flags = in.take<std::uint8_t>() % 8;
        m->dl_tensor = tensor_of(in, shape, strides);
        m->deleter = &count_delete<dlpack::DLManagedTensorVersioned>;
        try {
            View v = dlpack::import_managed(m);
            check_view(v);
            round_trip(v);
        } catch (const Error&) {
        }
        fuzz::require(g_deleted == 1);
        delete m;
    } else {
        auto* m = new dlpack::DLManagedTensor{};
        m->dl_tensor = tensor_of(in, shape, strides);
        m->deleter = &count_delete<dlpack::DLManagedTensor>;
        try {
            View v = dlpack::import_managed(m, in.flag());
            check_view(v);
            round_trip(v);
        } catch (const Error&) {
        }
        fuzz::require(g_deleted == 1);
        delete m;
    }
    return 0;
}
