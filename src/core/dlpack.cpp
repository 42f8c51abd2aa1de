// DLPack import (validation of every field a producer can get wrong) and export (pooled blocks,
// so a steady stream of exports allocates nothing).
#include "stridex/dlpack.hpp"

#include "stridex/detail/thread_cache.hpp"

#include <limits>
#include <memory>
#include <new>

namespace stridex::dlpack {
namespace {

template <class Managed>
void run_deleter(void* tensor) noexcept {
    auto* managed = static_cast<Managed*>(tensor);
    managed->deleter(managed);
}

// The keep-alive of an imported tensor: its deleter, run once when the last View goes. A NULL
// deleter means the producer keeps the memory alive by other means, so nothing is allocated.
// If allocating the owner fails, the deleter still runs (the tensor is ours from the call on).
template <class Managed>
Owner owner_running_deleter(Managed* tensor) {
    if (tensor->deleter == nullptr) return Owner();
    try {
        return Owner::from_callback(&run_deleter<Managed>, tensor);
    } catch (...) {
        tensor->deleter(tensor);
        throw;
    }
}

Layout layout_of(const DLTensor& t, bool null_strides_mean_c_order) {
    if (t.ndim < 0) fail(ErrorKind::value, "DLPack ndim must be >= 0, found ", t.ndim);
    if (t.ndim > kMaxNdim) fail(ErrorKind::value, "DLPack ndim must be <= ", kMaxNdim, ", found ", t.ndim);
    const auto ndim = static_cast<std::size_t>(t.ndim);
    if (ndim == 0) return Layout();  // NULL shape and strides are fine at ndim 0 (DLPack 1.3)
    if (t.shape == nullptr) fail(ErrorKind::value, "DLPack shape is NULL for ndim ", t.ndim);
    std::span<const std::int64_t> shape(t.shape, ndim);
    if (t.strides != nullptr) return Layout(shape, std::span<const std::int64_t>(t.strides, ndim));
    if (!null_strides_mean_c_order)
        fail(ErrorKind::buffer, "DLPack >= 1.2 requires strides for ndim ", t.ndim, ", found NULL");
    return Layout::contiguous(shape);
}

}  // namespace

View view_of(const DLTensor& t, Owner owner, DLTensorRules rules) {
    Layout layout = layout_of(t, rules.null_strides_mean_c_order);
    const Dtype dtype = Dtype::from_raw(t.dtype.code, t.dtype.bits, t.dtype.lanes);
    // Vector dtypes are valid DLPack, but strides would count vectors, not scalars: importers
    // refuse them (docs/protocols.md, importer checklist 7). The one vector type frameworks exchange is
    // a byte of packed sub-byte lanes (torch's float4_e2m1fn_x2 is float4_e2m1fn x 2): its elements
    // are whole bytes, so strides count them as for any byte-sized type.
    if (dtype.lanes != 1 && !dtype.is_packed_byte())
        fail(ErrorKind::unsupported, "DLPack dtype ", dtype.name(), " has ", dtype.lanes,
             " lanes; stridex imports scalar dtypes (lanes == 1) only");
    const Device device = Device::from_raw(t.device.device_type, t.device.device_id);
    if (t.byte_offset > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
        fail(ErrorKind::value, "DLPack byte_offset ", t.byte_offset, " does not fit in int64");
    return View(t.data, static_cast<std::int64_t>(t.byte_offset), std::move(layout), dtype, device, rules.writability,
                std::move(owner), rules.subbyte_padded);
}

View import_managed(DLManagedTensorVersioned* tensor) {
    if (tensor == nullptr) fail(ErrorKind::value, "expected a DLManagedTensorVersioned, found NULL");
    if (tensor->version.major != kMajorVersion) {
        // Only the frozen prefix may be read from a tensor of another major version.
        const auto major = tensor->version.major;
        if (tensor->deleter) tensor->deleter(tensor);
        fail(ErrorKind::buffer, "DLPack major version ", major, " is not supported (stridex reads major ",
             kMajorVersion, ")");
    }
    const DLTensorRules rules{
        .null_strides_mean_c_order = tensor->version.minor < 2,
        .writability = writability_of_flags(tensor->flags),
        .subbyte_padded = subbyte_padded_of_flags(tensor->flags),
    };
    // From here the owner is the only path to the deleter: if validation throws, destroying the
    // owner runs it, exactly once.
    return view_of(tensor->dl_tensor, owner_running_deleter(tensor), rules);
}

View import_managed(DLManagedTensor* tensor, bool immutable) {
    if (tensor == nullptr) fail(ErrorKind::value, "expected a DLManagedTensor, found NULL");
    // NULL strides mean C order in every legacy tensor.
    return view_of(tensor->dl_tensor, owner_running_deleter(tensor),
                   DLTensorRules{.null_strides_mean_c_order = true,
                                 .writability = immutable ? Writability::immutable : Writability::unknown});
}

// ---- export -----------------------------------------------------------------------------------
namespace {

inline constexpr int kInlineDims = 8;

// One exported tensor: the managed struct, the owner reference it holds and its shape/strides.
template <class Managed>
struct ExportBlock : detail::CachedAllocation<ExportBlock<Managed>> {
    Managed managed{};
    Owner owner;
    std::int64_t inline_dims[2 * kInlineDims];  // shape, then strides
    std::unique_ptr<std::int64_t[]> heap_dims;  // only for ndim > kInlineDims
};

template <class Managed>
void release_export(Managed* managed) noexcept {
    delete static_cast<ExportBlock<Managed>*>(managed->manager_ctx);
}

template <class Managed>
Managed* export_into(const View& view) {
    using Block = ExportBlock<Managed>;
    std::unique_ptr<Block> block(new Block);  // default-init: the dims are written below
    const int ndim = view.ndim();
    std::int64_t* dims = block->inline_dims;
    if (ndim > kInlineDims) {
        block->heap_dims = std::make_unique<std::int64_t[]>(2 * static_cast<std::size_t>(ndim));
        dims = block->heap_dims.get();
    }
    describe(view, block->managed.dl_tensor, dims);
    block->owner = view.owner();
    block->managed.manager_ctx = block.get();
    block->managed.deleter = &release_export<Managed>;
    return &block.release()->managed;
}

}  // namespace

void describe(const View& view, DLTensor& t, std::int64_t* dims) noexcept {
    const int ndim = view.ndim();
    for (int a = 0; a < ndim; ++a) {
        dims[a] = view.shape()[static_cast<std::size_t>(a)];
        dims[ndim + a] = view.strides()[static_cast<std::size_t>(a)];
    }
    t.data = view.ptr();
    t.device = dl_device_of(view.device());
    t.ndim = ndim;
    t.dtype = dl_dtype_of(view.dtype());
    t.shape = ndim ? dims : nullptr;
    t.strides = ndim ? dims + ndim : nullptr;
    t.byte_offset = 0;
}

DLManagedTensorVersioned* export_versioned(const View& view, std::uint64_t extra_flags) {
    DLManagedTensorVersioned* out = export_into<DLManagedTensorVersioned>(view);
    out->version = DLPackVersion{kMajorVersion, kMinorVersion};
    out->flags = extra_flags | flags_of(view);
    return out;
}

DLManagedTensor* export_legacy(const View& view) {
    if (view.writability() == Writability::readonly)
        fail(ErrorKind::buffer, "a read-only view cannot be exported as a legacy DLPack capsule, which has no "
                                "read-only flag (its producer said read-only, and refuses the same); ask for a "
                                "versioned capsule (max_version >= (1, 0))");
    if (view.subbyte_padded())
        fail(ErrorKind::buffer, "padded ", view.dtype().name(),
             " cannot be exported as a legacy DLPack capsule, "
             "which has no padding flag; ask for a versioned capsule");
    return export_into<DLManagedTensor>(view);
}

}  // namespace stridex::dlpack
