// A test double of the CUDA driver: the calls stridex makes, implemented in memory.
//
// It keeps a call log (readable strings, addresses relative to the reservation that holds them),
// checks every call against the driver's documented rules (violations are logged and answered with
// CUDA_ERROR_INVALID_VALUE, so a bug shows up as a failed expectation), can fail the n-th call of
// any function, and backs allocations with host bytes so copies can be checked. Single-threaded.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "stridex/cuda/driver.hpp"

namespace stridex_test {

using namespace stridex::cuda;

inline constexpr std::size_t MiB = std::size_t{1} << 20;

class FakeDriver {
public:
    // ---- configuration (set before the DriverOverride is made) ----
    int devices = 1;
    std::size_t granularity = 2 * MiB;
    CUresult init_result = result::success;
    std::vector<int> vmm_supported;         // per device; empty = all supported
    std::vector<std::vector<int>> no_peer;  // pairs {a, b}: a cannot access b
    bool pointer_attributes_need_context = false;
    std::vector<int> uuid_of_ordinal;  // device i reports UUID number uuid_of_ordinal[i]; empty = i

    // ---- observation ----
    std::vector<std::string> log;         // VMM, copy, sync (of contexts, streams, events), stream and event calls
    std::vector<std::string> ctx_log;     // context calls (set_current, retain, release)
    std::vector<std::string> violations;  // rule breaks; tests expect none
    CUcontext current = nullptr;          // the calling thread's current context
    int events_created = 0, events_destroyed = 0;

    // The n-th call (1 = the next one) of `call` ("cuMemCreate") returns `r`.
    void fail_nth(const std::string& call, int nth, CUresult r) { failures_[call] = {nth, r}; }

    // A range pointer_info should know: type 1 host (pinned), 2 device; managed flag.
    void add_pointer_range(CUdeviceptr base, std::size_t size, unsigned type, bool managed, int ordinal) {
        ranges_.push_back({base, size, type, managed, ordinal});
    }

    CUcontext context_of(int ordinal) const {
        return reinterpret_cast<CUcontext>(std::uintptr_t{0x1000} + 0x100 * ordinal);
    }
    int retained(int ordinal) const { return retained_.count(ordinal) ? retained_.at(ordinal) : 0; }

    std::size_t live_allocations() const { return allocations_.size(); }
    std::size_t live_mappings() const { return mappings_.size(); }
    std::size_t live_reservations() const { return reservations_.size(); }
    // Nothing left behind and no rule broken.
    void expect_clean() const {
        EXPECT_TRUE(violations.empty()) << "first violation: " << (violations.empty() ? "" : violations.front());
        EXPECT_EQ(live_mappings(), 0u);
        EXPECT_EQ(live_allocations(), 0u);
        EXPECT_EQ(live_reservations(), 0u);
    }
    // Access granted on the mapping at `address`, as "dev0,dev1".
    std::string access_of(CUdeviceptr address) const {
        auto it = mappings_.find(address);
        if (it == mappings_.end()) return "unmapped";
        std::string out;
        for (int d : it->second.access) out += (out.empty() ? "dev" : ",dev") + std::to_string(d);
        return out;
    }
    // Direct access to the bytes behind a mapped device address (the test's "kernel").
    std::byte* bytes_at(CUdeviceptr address) {
        for (auto& [start, m] : mappings_)
            if (address >= start && address < start + m.size)
                return allocations_.at(m.handle).bytes.data() + (address - start);
        return nullptr;
    }
    std::vector<std::string> take_log() { return std::exchange(log, {}); }

    DriverTable table() const;

    // ---- the fake calls (public for the trampolines) ----
    CUresult injected(const char* call) {
        auto it = failures_.find(call);
        if (it == failures_.end() || --it->second.first > 0) return result::success;
        const CUresult r = it->second.second;
        failures_.erase(it);
        log.push_back(std::string(call) + " -> injected error " + std::to_string(r));
        return r;
    }
    CUresult violation(std::string what) {
        violations.push_back(std::move(what));
        return result::invalid_value;
    }
    bool valid_ordinal(int o) const { return o >= 0 && o < devices; }
    int ordinal_of(CUdevice d) const { return d - 100; }
    int ordinal_of(CUcontext c) const {
        return static_cast<int>((reinterpret_cast<std::uintptr_t>(c) - 0x1000) / 0x100);
    }
    std::string where(CUdeviceptr a) const {
        for (auto& [base, size] : reservations_)
            if (a >= base && a < base + size) return "+" + sz(a - base);
        return "0x" + hex(a);
    }
    static std::string hex(std::uint64_t v) {
        char b[24];
        std::snprintf(b, sizeof b, "%llx", static_cast<unsigned long long>(v));
        return b;
    }
    static std::string sz(std::size_t n) { return n % MiB == 0 ? std::to_string(n / MiB) + "M" : std::to_string(n); }
    static std::string stream_name(CUstream s) {
        const auto v = reinterpret_cast<std::uintptr_t>(s);
        return v == 1 ? "legacy" : v == 2 ? "per_thread" : "s" + hex(v);
    }
    std::string handle_name(CUmemGenericAllocationHandle h) const { return "h" + std::to_string(h); }
    CUresult need_context(const char* call) {
        return current ? result::success : violation(std::string(call) + " without a current context");
    }

    CUresult device_get(CUdevice* d, int ordinal) {
        if (!valid_ordinal(ordinal)) return result::invalid_device;
        *d = 100 + ordinal;
        return result::success;
    }
    CUresult device_get_attribute(int* v, int attribute, CUdevice d) {
        if (attribute != cu::kDeviceAttrVirtualMemoryManagementSupported) return violation("unexpected attribute");
        const int o = ordinal_of(d);
        *v = vmm_supported.empty() ? 1 : vmm_supported.at(static_cast<std::size_t>(o));
        return result::success;
    }
    CUresult can_access_peer(int* v, CUdevice a, CUdevice b) {
        *v = 1;
        for (auto& p : no_peer)
            if (p[0] == ordinal_of(a) && p[1] == ordinal_of(b)) *v = 0;
        return result::success;
    }
    CUresult primary_retain(CUcontext* c, CUdevice d) {
        const int o = ordinal_of(d);
        if (!valid_ordinal(o)) return result::invalid_device;
        ++retained_[o];
        ctx_log.push_back("retain dev" + std::to_string(o));
        *c = context_of(o);
        return result::success;
    }
    CUresult primary_release(CUdevice d) {
        const int o = ordinal_of(d);
        if (retained(o) == 0) return violation("release of a primary context never retained");
        --retained_[o];
        ctx_log.push_back("release dev" + std::to_string(o));
        return result::success;
    }
    CUresult set_current(CUcontext c) {
        ctx_log.push_back(c ? "set ctx" + std::to_string(ordinal_of(c)) : "set none");
        current = c;
        return result::success;
    }
    CUresult synchronize() {
        if (CUresult r = need_context("cuCtxSynchronize")) return r;
        if (CUresult r = injected("cuCtxSynchronize")) return r;
        log.push_back("sync dev" + std::to_string(ordinal_of(current)));
        return result::success;
    }
    CUresult pointer_attributes(unsigned n, int* attrs, void** data, CUdeviceptr p) {
        if (pointer_attributes_need_context && !current) return result::invalid_context;
        if (CUresult r = injected("cuPointerGetAttributes")) return r;
        log.push_back("pointer_attributes 0x" + hex(p));
        const Range* hit = nullptr;
        for (auto& r : ranges_)
            if (p >= r.base && p < r.base + r.size) hit = &r;
        for (unsigned i = 0; i < n; ++i) {
            switch (attrs[i]) {  // widths as the real driver writes them; booleans as one byte
                case cu::kPointerAttrMemoryType: *static_cast<unsigned*>(data[i]) = hit ? hit->type : 0; break;
                case cu::kPointerAttrIsManaged: *static_cast<bool*>(data[i]) = hit && hit->managed; break;
                case cu::kPointerAttrDeviceOrdinal: *static_cast<int*>(data[i]) = hit ? hit->ordinal : -2; break;
                case cu::kPointerAttrRangeStartAddr: *static_cast<CUdeviceptr*>(data[i]) = hit ? hit->base : 0; break;
                case cu::kPointerAttrRangeSize: *static_cast<std::size_t*>(data[i]) = hit ? hit->size : 0; break;
                default: return violation("unexpected pointer attribute " + std::to_string(attrs[i]));
            }
        }
        return result::success;
    }
    CUresult stream_create(CUstream* s, unsigned flags) {
        if (CUresult r = need_context("cuStreamCreate")) return r;
        *s = reinterpret_cast<CUstream>(std::uintptr_t{0x5000} + 0x10 * ++streams_);
        log.push_back("stream_create " + stream_name(*s) + (flags ? " non_blocking" : ""));
        return result::success;
    }
    CUresult stream_destroy(CUstream s) {
        log.push_back("stream_destroy " + stream_name(s));
        return result::success;
    }
    CUresult event_create(CUevent* e, unsigned flags) {
        if (CUresult r = need_context("cuEventCreate")) return r;
        if ((flags & ~cu::kEventInterprocess) != cu::kEventDisableTiming)
            return violation("event without CU_EVENT_DISABLE_TIMING");
        if (CUresult r = injected("cuEventCreate")) return r;
        *e = reinterpret_cast<CUevent>(std::uintptr_t{0x9000} + ++events_created);
        if (flags & cu::kEventInterprocess) interprocess_events_.push_back(*e);
        log.push_back("event_create e" + std::to_string(events_created) +
                      (flags & cu::kEventInterprocess ? " interprocess" : ""));
        return result::success;
    }

    // ---- interprocess sharing (one process plays both sides) ----
    // A UUID: 16 bytes, byte 0 the device's UUID number, the rest a fixed pattern.
    static Uuid uuid_number(int n) {
        Uuid u{};
        for (std::size_t i = 0; i < sizeof u.bytes; ++i) u.bytes[i] = static_cast<char>(0x10 + i);
        u.bytes[0] = static_cast<char>(n);
        return u;
    }
    CUresult device_uuid(Uuid* u, CUdevice d) {
        const int o = ordinal_of(d);
        if (!valid_ordinal(o)) return result::invalid_device;
        *u = uuid_number(uuid_of_ordinal.empty() ? o : uuid_of_ordinal.at(static_cast<std::size_t>(o)));
        return result::success;
    }
    // Legacy handles name the allocation base; only ranges added as device memory have one.
    CUresult ipc_get_mem_handle(IpcHandle* h, CUdeviceptr base) {
        if (CUresult r = need_context("cuIpcGetMemHandle")) return r;
        if (CUresult r = injected("cuIpcGetMemHandle")) return r;
        bool known = false;
        for (auto& r : ranges_) known = known || (r.base == base && r.type == cu::kMemoryTypeDevice);
        if (!known) return result::invalid_value;
        *h = IpcHandle{};
        std::memcpy(h->reserved, &base, sizeof base);
        log.push_back("ipc_get_mem_handle 0x" + hex(base));
        return result::success;
    }
    CUresult ipc_open_mem_handle(CUdeviceptr* p, IpcHandle h, unsigned flags) {
        if (CUresult r = need_context("cuIpcOpenMemHandle")) return r;
        if (flags != cu::kIpcMemLazyEnablePeerAccess) return violation("cuIpcOpenMemHandle flags");
        CUdeviceptr base = 0;
        std::memcpy(&base, h.reserved, sizeof base);
        for (auto& [opened, b] : ipc_open_)
            if (b == base) return violation("cuIpcOpenMemHandle of a handle already open in this context");
        if (CUresult r = injected("cuIpcOpenMemHandle")) return r;
        *p = base + 0x100000000000;  // the importer sees the memory at another address
        ipc_open_[*p] = base;
        log.push_back("ipc_open 0x" + hex(base) + " ctx" + std::to_string(ordinal_of(current)));
        return result::success;
    }
    CUresult ipc_close_mem_handle(CUdeviceptr p) {
        if (CUresult r = need_context("cuIpcCloseMemHandle")) return r;
        auto it = ipc_open_.find(p);
        if (it == ipc_open_.end()) return violation("cuIpcCloseMemHandle of no open handle");
        log.push_back("ipc_close 0x" + hex(it->second));
        ipc_open_.erase(it);
        return result::success;
    }
    std::size_t open_ipc_handles() const { return ipc_open_.size(); }
    CUresult ipc_get_event_handle(IpcHandle* h, CUevent e) {
        if (std::find(interprocess_events_.begin(), interprocess_events_.end(), e) == interprocess_events_.end())
            return violation("cuIpcGetEventHandle of an event without CU_EVENT_INTERPROCESS");
        *h = IpcHandle{};
        std::memcpy(h->reserved, &e, sizeof e);
        return result::success;
    }
    CUresult ipc_open_event_handle(CUevent* e, IpcHandle h) {
        if (CUresult r = need_context("cuIpcOpenEventHandle")) return r;
        CUevent original = nullptr;
        std::memcpy(&original, h.reserved, sizeof original);
        *e = reinterpret_cast<CUevent>(std::uintptr_t{0x9000} + ++events_created);
        log.push_back("ipc_open_event " + event_name(original) + " -> " + event_name(*e));
        return result::success;
    }
    // fds are real (of /dev/null), so the code under test may close them; each names a handle.
    CUresult export_shareable(void* out, CUmemGenericAllocationHandle h, int type, unsigned long long flags) {
        auto it = allocations_.find(h);
        if (it == allocations_.end() || type != cu::kMemHandleTypePosixFileDescriptor || flags)
            return violation("cuMemExportToShareableHandle arguments");
        if (!it->second.exportable) return result::invalid_value;  // as the driver: not requested at create
        if (CUresult r = injected("cuMemExportToShareableHandle")) return r;
        const int fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
        exported_[fd] = h;
        *static_cast<int*>(out) = fd;
        log.push_back("export " + handle_name(h));
        return result::success;
    }
    // The import is the same allocation under its original handle, counted, as a second process's
    // handle would keep the memory alive.
    CUresult import_shareable(CUmemGenericAllocationHandle* h, void* os_handle, int type) {
        const auto fd = static_cast<int>(reinterpret_cast<std::intptr_t>(os_handle));
        auto it = exported_.find(fd);
        if (it == exported_.end() || type != cu::kMemHandleTypePosixFileDescriptor)
            return violation("cuMemImportFromShareableHandle of an fd never exported");
        if (CUresult r = injected("cuMemImportFromShareableHandle")) return r;
        *h = it->second;
        ++allocations_.at(*h).imports;
        log.push_back("import " + handle_name(*h));
        return result::success;
    }
    CUresult event_destroy(CUevent) {
        ++events_destroyed;
        return result::success;
    }
    std::string event_name(CUevent e) const {
        return "e" + std::to_string(reinterpret_cast<std::uintptr_t>(e) - 0x9000);
    }
    CUresult event_record(CUevent e, CUstream s) {
        if (CUresult r = need_context("cuEventRecord")) return r;
        if (CUresult r = injected("cuEventRecord")) return r;
        log.push_back("record " + event_name(e) + " on " + stream_name(s) + " ctx" +
                      std::to_string(ordinal_of(current)));
        return result::success;
    }
    CUresult stream_wait_event(CUstream s, CUevent e, unsigned flags) {
        // CU_EVENT_WAIT_EXTERNAL (1) is valid only on a capturing stream.
        if (flags > 1 || (flags == 1 && capture_status(s) != 1)) return violation("cuStreamWaitEvent flags");
        if (CUresult r = injected("cuStreamWaitEvent")) return r;
        log.push_back("wait " + stream_name(s) + " on " + event_name(e) + (flags ? " external" : ""));
        return result::success;
    }

    // ---- CUDA graph capture (capture.hpp) ----
    // A stream capturing into capture `id` (status 1 active, 2 invalidated); the legacy stream
    // implicitly captured (a blocking stream of its context captures).
    void begin_capture(CUstream s, unsigned long long id, int status = 1) {
        captures_[reinterpret_cast<std::uintptr_t>(s)] = {status, id};
    }
    void end_capture(CUstream s) { captures_.erase(reinterpret_cast<std::uintptr_t>(s)); }
    bool legacy_implicit = false;
    int capture_status(CUstream s) const {
        auto it = captures_.find(reinterpret_cast<std::uintptr_t>(s));
        if (it == captures_.end()) return std::find(capturing.begin(), capturing.end(), s) != capturing.end() ? 1 : 0;
        return it->second.first;
    }
    static CUgraph graph_of(unsigned long long id) { return reinterpret_cast<CUgraph>(std::uintptr_t{0xa000} + id); }
    CUresult get_capture_info(CUstream s, int* status, unsigned long long* id, CUgraph* graph, const CUgraphNode** deps,
                              std::size_t* count) {
        if (deps || count) return violation("cuStreamGetCaptureInfo: unexpected dependency query");
        if (reinterpret_cast<std::uintptr_t>(s) == 1 && legacy_implicit) return 906;
        if (CUresult r = injected("cuStreamGetCaptureInfo")) return r;
        auto it = captures_.find(reinterpret_cast<std::uintptr_t>(s));
        if (it == captures_.end() && std::find(capturing.begin(), capturing.end(), s) != capturing.end()) {
            // The pool tests' simpler model: an active capture of its own.
            *status = 1;
            *id = 0xc0de;
            *graph = graph_of(*id);
            return result::success;
        }
        *status = it == captures_.end() ? 0 : it->second.first;
        *id = it == captures_.end() ? 0 : it->second.second;
        *graph = it == captures_.end() || it->second.first != 1 ? nullptr : graph_of(it->second.second);
        return result::success;
    }
    CUresult user_object_create(CUuserObject* o, void* ptr, void (*destroy)(void*), unsigned refs, unsigned flags) {
        if (flags != 1 || refs != 1) return violation("cuUserObjectCreate flags");
        if (CUresult r = injected("cuUserObjectCreate")) return r;
        *o = reinterpret_cast<CUuserObject>(std::uintptr_t{0xb000} + user_objects_.size());
        user_objects_.push_back({ptr, destroy, false});
        log.push_back("user_object u" + std::to_string(user_objects_.size() - 1));
        return result::success;
    }
    std::size_t user_index(CUuserObject o) const { return reinterpret_cast<std::uintptr_t>(o) - 0xb000; }
    CUresult user_object_release(CUuserObject o, unsigned count) {
        if (count != 1) return violation("cuUserObjectRelease count");
        auto& u = user_objects_.at(user_index(o));
        if (u.released) return violation("user object released twice");
        u.released = true;
        u.destroy(u.ptr);
        log.push_back("release u" + std::to_string(user_index(o)));
        return result::success;
    }
    CUresult graph_retain_user_object(CUgraph g, CUuserObject o, unsigned count, unsigned flags) {
        if (count != 1 || flags != 1) return violation("cuGraphRetainUserObject: not a move of one reference");
        if (CUresult r = injected("cuGraphRetainUserObject")) return r;
        const auto id = reinterpret_cast<std::uintptr_t>(g) - 0xa000;
        graphs_[id].push_back(o);
        log.push_back("graph " + std::to_string(id) + " keeps u" + std::to_string(user_index(o)));
        return result::success;
    }
    // The graph of capture `id` is destroyed: its user objects' destructors run.
    void destroy_graph(unsigned long long id) {
        for (CUuserObject o : graphs_[id]) (void)user_object_release(o, 1);
        graphs_.erase(id);
    }

    CUresult reserve(CUdeviceptr* p, std::size_t size, std::size_t alignment, CUdeviceptr hint,
                     unsigned long long flags) {
        if (CUresult r = need_context("cuMemAddressReserve")) return r;
        if (size == 0 || size % granularity || alignment % granularity || hint || flags)
            return violation("cuMemAddressReserve arguments");
        if (CUresult r = injected("cuMemAddressReserve")) return r;
        next_va_ = (next_va_ + size + 0xfffffff) & ~CUdeviceptr{0xfffffff};  // leave gaps between ranges
        *p = next_va_;
        reservations_[*p] = size;
        log.push_back("reserve " + sz(size));
        return result::success;
    }
    CUresult address_free(CUdeviceptr p, std::size_t size) {
        auto it = reservations_.find(p);
        if (it == reservations_.end() || it->second != size)
            return violation("cuMemAddressFree of no exact reservation");
        for (auto& [a, m] : mappings_)
            if (a >= p && a < p + size) return violation("cuMemAddressFree with mappings left in the range");
        log.push_back("free " + sz(size));
        reservations_.erase(it);
        return result::success;
    }
    CUresult create(CUmemGenericAllocationHandle* h, std::size_t size, const MemAllocationProp* prop,
                    unsigned long long flags) {
        if (CUresult r = need_context("cuMemCreate")) return r;
        if (size == 0 || size % granularity || flags || prop->type != cu::kMemAllocationTypePinned ||
            prop->location.type != cu::kMemLocationTypeDevice || !valid_ordinal(prop->location.id) ||
            (prop->requested_handle_types != cu::kMemHandleTypeNone &&
             prop->requested_handle_types != cu::kMemHandleTypePosixFileDescriptor) ||
            prop->win32_handle_meta_data)
            return violation("cuMemCreate arguments");
        if (CUresult r = injected("cuMemCreate")) return r;
        *h = next_handle_++;
        allocations_[*h] = {size,
                            prop->location.id,
                            std::vector<std::byte>(size),
                            0,
                            false,
                            prop->requested_handle_types == cu::kMemHandleTypePosixFileDescriptor,
                            0};
        log.push_back("create dev" + std::to_string(prop->location.id) + " " + sz(size) + " -> " + handle_name(*h));
        return result::success;
    }
    CUresult release(CUmemGenericAllocationHandle h) {
        auto it = allocations_.find(h);
        if (it == allocations_.end() || it->second.released) return violation("cuMemRelease of an unknown handle");
        if (CUresult r = injected("cuMemRelease")) return r;
        log.push_back("release " + handle_name(h));
        if (it->second.imports > 0) {  // an imported handle: the exporter's still holds the memory
            --it->second.imports;
            return result::success;
        }
        it->second.released = true;
        if (it->second.mappings == 0) allocations_.erase(it);  // memory lives while mapped (VMM rule 7)
        return result::success;
    }
    CUresult map(CUdeviceptr p, std::size_t size, std::size_t offset, CUmemGenericAllocationHandle h,
                 unsigned long long flags) {
        if (CUresult r = need_context("cuMemMap")) return r;
        auto it = allocations_.find(h);
        if (it == allocations_.end() || it->second.released) return violation("cuMemMap of an unknown handle");
        if (offset != 0 || flags || size != it->second.size || p % granularity) return violation("cuMemMap arguments");
        bool inside = false;
        for (auto& [base, rs] : reservations_) inside = inside || (p >= base && p + size <= base + rs);
        if (!inside) return violation("cuMemMap outside every reservation");
        for (auto& [a, m] : mappings_)
            if (p < a + m.size && a < p + size) return violation("cuMemMap over an existing mapping");
        if (CUresult r = injected("cuMemMap")) return r;
        mappings_[p] = {size, h, {}};
        ++it->second.mappings;
        log.push_back("map " + where(p) + " " + sz(size) + " " + handle_name(h));
        return result::success;
    }
    CUresult unmap(CUdeviceptr p, std::size_t size) {
        if (CUresult r = need_context("cuMemUnmap")) return r;
        auto it = mappings_.find(p);
        if (it == mappings_.end() || it->second.size != size)
            return violation("cuMemUnmap of no whole mapping at " + where(p));
        if (CUresult r = injected("cuMemUnmap")) return r;
        log.push_back("unmap " + where(p) + " " + sz(size));
        auto& a = allocations_.at(it->second.handle);
        if (--a.mappings == 0 && a.released) allocations_.erase(it->second.handle);
        mappings_.erase(it);
        return result::success;
    }
    CUresult set_access(CUdeviceptr p, std::size_t size, const MemAccessDesc* desc, std::size_t count) {
        if (CUresult r = need_context("cuMemSetAccess")) return r;
        if (count == 0) return violation("cuMemSetAccess with no descriptors");
        for (CUdeviceptr a = p; a < p + size;) {  // the range must be mapped throughout
            auto it = mappings_.find(a);
            if (it == mappings_.end()) return violation("cuMemSetAccess over unmapped memory at " + where(a));
            a += it->second.size;
        }
        std::string devs;
        for (std::size_t i = 0; i < count; ++i) {
            if (desc[i].location.type != cu::kMemLocationTypeDevice || desc[i].flags != cu::kMemAccessReadWrite ||
                !valid_ordinal(desc[i].location.id))
                return violation("cuMemSetAccess descriptor");
            devs += (i ? ",dev" : "dev") + std::to_string(desc[i].location.id);
        }
        if (CUresult r = injected("cuMemSetAccess")) return r;
        for (CUdeviceptr a = p; a < p + size; a += mappings_.at(a).size)
            for (std::size_t i = 0; i < count; ++i) mappings_.at(a).access.push_back(desc[i].location.id);
        log.push_back("access " + where(p) + " " + sz(size) + " " + devs);
        return result::success;
    }
    CUresult granularity_of(std::size_t* g, const MemAllocationProp* prop, int option) {
        if (option != cu::kMemGranularityMinimum || !valid_ordinal(prop->location.id))
            return violation("granularity query");
        *g = granularity;
        return result::success;
    }
    CUresult copy(CUdeviceptr dev, void* host, std::size_t bytes, bool to_host) {
        if (CUresult r = need_context(to_host ? "cuMemcpyDtoH" : "cuMemcpyHtoD")) return r;
        std::byte* mem = bytes_at(dev);
        auto it = mappings_.upper_bound(dev);
        if (!mem || it == mappings_.begin() || dev + bytes > std::prev(it)->first + std::prev(it)->second.size)
            return violation("copy outside one mapping at " + where(dev));
        if (std::prev(it)->second.access.empty()) return violation("copy from memory without access");
        if (CUresult r = injected(to_host ? "cuMemcpyDtoH" : "cuMemcpyHtoD")) return r;
        if (to_host)
            std::memcpy(host, mem, bytes);
        else
            std::memcpy(mem, host, bytes);
        log.push_back(std::string(to_host ? "dtoh " : "htod ") + where(dev) + " " + sz(bytes));
        return result::success;
    }

    // Stream-ordered copies, run at once (the fake has no queue). Each side is device memory of a
    // mapping, or a range the test registered (add_pointer_range), which the fake backs with the
    // host bytes at that address: "device" memory of a test may be a host array labelled cuda:N.
    std::byte* resolve(CUdeviceptr a, std::size_t bytes) {
        for (auto& [start, m] : mappings_)
            if (a >= start && a + bytes <= start + m.size) return bytes_at(a);
        for (auto& r : ranges_)
            if (a >= r.base && a + bytes <= r.base + r.size) return reinterpret_cast<std::byte*>(a);
        for (auto& b : pinned_) {  // cuMemHostAlloc blocks (the staging buffers, the pinned pool)
            const auto base = reinterpret_cast<CUdeviceptr>(b->data());
            if (a >= base && a + bytes <= base + b->size()) return reinterpret_cast<std::byte*>(a);
        }
        // Pool blocks get host bytes on first use.
        auto block = pool_blocks_.upper_bound(a);
        if (block != pool_blocks_.begin() && a + bytes <= std::prev(block)->first + std::prev(block)->second.second) {
            --block;
            auto& backing = pool_bytes_[block->first];
            backing.resize(block->second.second);
            return backing.data() + (a - block->first);
        }
        return nullptr;
    }
    std::string name_of(CUdeviceptr a) const {
        for (auto& r : ranges_)
            if (a >= r.base && a < r.base + r.size)
                return (r.type == cu::kMemoryTypeHost ? "pinned+" : "device+") + std::to_string(a - r.base);
        return where(a);
    }
    CUresult memcpy_async(CUdeviceptr dst, CUdeviceptr src, std::size_t bytes, CUstream s) {
        if (CUresult r = need_context("cuMemcpyAsync")) return r;
        std::byte* into = resolve(dst, bytes);
        const std::byte* from = resolve(src, bytes);
        if (!into || !from) return violation("cuMemcpyAsync outside known memory");
        if (CUresult r = injected("cuMemcpyAsync")) return r;
        std::memmove(into, from, bytes);
        log.push_back("memcpy_async " + name_of(dst) + " <- " + name_of(src) + " " + std::to_string(bytes) + " on " +
                      stream_name(s));
        return result::success;
    }
    CUresult memcpy_2d_async(const Memcpy2D* m, CUstream s) {
        if (CUresult r = need_context("cuMemcpy2DAsync")) return r;
        if (m->src_memory_type != cu::kMemoryTypeUnified || m->dst_memory_type != cu::kMemoryTypeUnified ||
            m->src_pitch < m->width_in_bytes || m->dst_pitch < m->width_in_bytes || m->height == 0)
            return violation("cuMemcpy2DAsync arguments");
        const std::size_t src_span = (m->height - 1) * m->src_pitch + m->width_in_bytes;
        const std::size_t dst_span = (m->height - 1) * m->dst_pitch + m->width_in_bytes;
        std::byte* into = resolve(m->dst_device, dst_span);
        const std::byte* from = resolve(m->src_device, src_span);
        if (!into || !from) return violation("cuMemcpy2DAsync outside known memory");
        if (CUresult r = injected("cuMemcpy2DAsync")) return r;
        for (std::size_t row = 0; row < m->height; ++row)
            std::memmove(into + row * m->dst_pitch, from + row * m->src_pitch, m->width_in_bytes);
        log.push_back("memcpy_2d_async " + name_of(m->dst_device) + " <- " + name_of(m->src_device) + " " +
                      std::to_string(m->height) + "x" + std::to_string(m->width_in_bytes) + " on " + stream_name(s));
        return result::success;
    }
    CUresult stream_synchronize(CUstream s) {
        log.push_back("stream_sync " + stream_name(s));
        return result::success;
    }
    CUresult event_synchronize(CUevent e) {
        log.push_back("event_sync " + event_name(e));
        return result::success;
    }

    // ---- stream-ordered memory pools and pinned memory (memory.hpp) ----------
    // Device pools hand out addresses from 0x5e0000000000 (device memory is not backed by bytes),
    // keep freed blocks in a cache reused for the same size (the same pointer comes back), and
    // fail with out of memory past `device_capacity` bytes in use plus cache (a trim empties the
    // cache). Pinned blocks are real host memory.
    bool pool_fd_supported = true;
    std::size_t device_capacity = 1024 * MiB;
    std::size_t pinned_capacity = 1024 * MiB;
    std::vector<CUstream> capturing;        // streams cuStreamGetCaptureInfo reports active
    std::vector<CUstream> invalid_streams;  // streams the allocation/free calls refuse (destroyed)
    std::vector<CUevent> busy_events;       // events cuEventQuery reports not ready
    std::size_t live_pool_blocks() const { return pool_blocks_.size(); }
    std::size_t live_pinned() const { return pinned_.size(); }
    std::uint64_t pool_threshold() const { return pools_.empty() ? 0 : pools_.begin()->second.threshold; }

    bool invalid_stream(CUstream s) const {
        return std::find(invalid_streams.begin(), invalid_streams.end(), s) != invalid_streams.end();
    }
    CUresult mem_pool_create(CUmemoryPool* p, const MemPoolProps* props) {
        if (!props || props->alloc_type != cu::kMemAllocationTypePinned ||
            props->location.type != cu::kMemLocationTypeDevice || !valid_ordinal(props->location.id))
            return violation("cuMemPoolCreate props");
        const bool fd = props->handle_types == cu::kMemHandleTypePosixFileDescriptor;
        if (fd && !pool_fd_supported) return result::not_supported;
        if (CUresult r = injected("cuMemPoolCreate")) return r;
        *p = reinterpret_cast<CUmemoryPool>(std::uintptr_t{0xb000} + 0x10 * (pools_.size() + 1));
        pools_[*p] = {props->location.id, fd, 0, 0, 0, 0, {}};
        log.push_back("pool_create dev" + std::to_string(props->location.id) + (fd ? " fd" : " none"));
        return result::success;
    }
    CUresult mem_pool_set_attribute(CUmemoryPool p, int attribute, void* value) {
        if (!pools_.count(p)) return violation("cuMemPoolSetAttribute of an unknown pool");
        if (attribute != cu::kMemPoolReleaseThreshold) return violation("unexpected pool attribute set");
        pools_[p].threshold = *static_cast<std::uint64_t*>(value);
        return result::success;
    }
    CUresult mem_pool_get_attribute(CUmemoryPool p, int attribute, void* value) {
        if (!pools_.count(p)) return violation("cuMemPoolGetAttribute of an unknown pool");
        const PoolState& s = pools_[p];
        auto* out = static_cast<std::uint64_t*>(value);
        switch (attribute) {
            case cu::kMemPoolReservedMemCurrent: *out = s.used + s.cached_bytes(); break;
            case cu::kMemPoolReservedMemHigh: *out = s.high; break;
            case cu::kMemPoolUsedMemCurrent: *out = s.used; break;
            default: return violation("unexpected pool attribute read");
        }
        return result::success;
    }
    CUresult mem_pool_trim_to(CUmemoryPool p, std::size_t keep) {
        if (!pools_.count(p) || keep != 0) return violation("cuMemPoolTrimTo");
        log.push_back("pool_trim " + std::to_string(pools_[p].cache.size()) + " blocks");
        pools_[p].cache.clear();
        return result::success;
    }
    CUresult alloc_from_pool(CUdeviceptr* ptr, std::size_t bytes, CUmemoryPool p, CUstream s) {
        if (CUresult r = need_context("cuMemAllocFromPoolAsync")) return r;
        if (!pools_.count(p)) return violation("cuMemAllocFromPoolAsync from an unknown pool");
        if (invalid_stream(s)) return result::invalid_handle;
        if (CUresult r = injected("cuMemAllocFromPoolAsync")) return r;
        PoolState& st = pools_[p];
        for (auto it = st.cache.begin(); it != st.cache.end(); ++it)
            if (it->second == bytes) {
                *ptr = it->first;
                st.cache.erase(it);
                return pool_handed(p, *ptr, bytes, s);
            }
        if (st.used + st.cached_bytes() + bytes > device_capacity) {
            log.push_back("alloc_pool " + sz(bytes) + " on " + stream_name(s) + " -> out of memory");
            return result::out_of_memory;
        }
        *ptr = next_pool_va_;
        next_pool_va_ += (bytes + 0xffff) & ~std::size_t{0xffff};
        return pool_handed(p, *ptr, bytes, s);
    }
    CUresult pool_handed(CUmemoryPool p, CUdeviceptr ptr, std::size_t bytes, CUstream s) {
        PoolState& st = pools_[p];
        st.used += bytes;
        st.high = std::max<std::uint64_t>(st.high, st.used + st.cached_bytes());
        pool_blocks_[ptr] = {p, bytes};
        log.push_back("alloc_pool " + sz(bytes) + " on " + stream_name(s) + " -> p" + hex(ptr));
        return result::success;
    }
    CUresult alloc_async(CUdeviceptr* ptr, std::size_t bytes, CUstream s) {
        if (CUresult r = need_context("cuMemAllocAsync")) return r;
        *ptr = next_pool_va_;
        next_pool_va_ += (bytes + 0xffff) & ~std::size_t{0xffff};
        pool_blocks_[*ptr] = {nullptr, bytes};
        log.push_back("alloc_graph " + sz(bytes) + " on " + stream_name(s) + " -> p" + hex(*ptr));
        return result::success;
    }
    CUresult free_async(CUdeviceptr ptr, CUstream s) {
        if (CUresult r = need_context("cuMemFreeAsync")) return r;
        if (invalid_stream(s)) return result::invalid_handle;
        return pool_free(ptr, "free_async p" + hex(ptr) + " on " + stream_name(s));
    }
    CUresult free_sync(CUdeviceptr ptr) {
        if (CUresult r = need_context("cuMemFree")) return r;
        if (auto it = imported_pointers_.find(ptr); it != imported_pointers_.end()) {
            log.push_back("free imported p" + hex(it->second.second));
            imported_pointers_.erase(it);
            return result::success;
        }
        return pool_free(ptr, "free p" + hex(ptr) + " (synchronous)");
    }
    CUresult pool_free(CUdeviceptr ptr, std::string what) {
        auto it = pool_blocks_.find(ptr);
        if (it == pool_blocks_.end()) return violation("free of unknown pool memory p" + hex(ptr));
        for (auto& [imported, origin] : imported_pointers_)
            if (origin.second == ptr) return violation("pool memory p" + hex(ptr) + " freed while still imported");
        if (CUmemoryPool p = it->second.first) {
            pools_[p].used -= it->second.second;
            pools_[p].cache.emplace_back(ptr, it->second.second);
        }
        pool_blocks_.erase(it);
        log.push_back(std::move(what));
        return result::success;
    }
    // ---- pool memory across processes (ipc.hpp); the fake plays both processes -----------
    // The exporter's fds are real (of /dev/null), each naming its pool; an imported pool is a new
    // handle, and an imported allocation appears at another address, counted until cuMemFree.
    CUresult pool_export_fd(void* out, CUmemoryPool p, int type, unsigned long long flags) {
        if (!pools_.count(p) || type != cu::kMemHandleTypePosixFileDescriptor || flags)
            return violation("cuMemPoolExportToShareableHandle arguments");
        if (!pools_[p].fd) return result::invalid_value;  // as the driver: no handle type at create
        if (CUresult r = injected("cuMemPoolExportToShareableHandle")) return r;
        const int fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
        exported_pools_[fd] = p;
        *static_cast<int*>(out) = fd;
        log.push_back("pool_export " + pool_name(p));
        return result::success;
    }
    CUresult pool_import_fd(CUmemoryPool* out, void* os_handle, int type, unsigned long long flags) {
        if (CUresult r = need_context("cuMemPoolImportFromShareableHandle")) return r;
        const auto fd = static_cast<int>(reinterpret_cast<std::intptr_t>(os_handle));
        auto it = exported_pools_.find(fd);
        if (it == exported_pools_.end() || type != cu::kMemHandleTypePosixFileDescriptor || flags)
            return violation("cuMemPoolImportFromShareableHandle of an fd never exported");
        if (CUresult r = injected("cuMemPoolImportFromShareableHandle")) return r;
        *out = reinterpret_cast<CUmemoryPool>(std::uintptr_t{0xc000} + 0x10 * ++pools_imported);
        imported_pools_[*out] = it->second;
        log.push_back("pool_import " + pool_name(it->second) + " -> " + pool_name(*out));
        return result::success;
    }
    CUresult pool_destroy(CUmemoryPool p) {
        auto it = imported_pools_.find(p);
        if (it == imported_pools_.end()) return violation("cuMemPoolDestroy of a pool this test did not import");
        for (auto& [ptr, origin] : imported_pointers_)
            if (origin.first == p) return violation("cuMemPoolDestroy of a pool with imported allocations");
        log.push_back("pool_destroy " + pool_name(p));
        imported_pools_.erase(it);
        return result::success;
    }
    CUresult pool_export_pointer(MemPoolPtrExportData* out, CUdeviceptr ptr) {
        auto it = pool_blocks_.find(ptr);
        if (it == pool_blocks_.end() || !it->second.first) return violation("cuMemPoolExportPointer of no pool block");
        if (CUresult r = injected("cuMemPoolExportPointer")) return r;
        *out = MemPoolPtrExportData{};
        std::memcpy(out->reserved, &ptr, sizeof ptr);
        log.push_back("pool_export_pointer p" + hex(ptr));
        return result::success;
    }
    CUresult pool_import_pointer(CUdeviceptr* out, CUmemoryPool p, MemPoolPtrExportData* data) {
        if (CUresult r = need_context("cuMemPoolImportPointer")) return r;
        auto pool = imported_pools_.find(p);
        if (pool == imported_pools_.end()) return violation("cuMemPoolImportPointer from a pool not imported");
        CUdeviceptr origin = 0;
        std::memcpy(&origin, data->reserved, sizeof origin);
        auto block = pool_blocks_.find(origin);
        if (block == pool_blocks_.end() || block->second.first != pool->second) return result::invalid_value;
        for (auto& [ptr, o] : imported_pointers_)
            if (o.second == origin) return violation("cuMemPoolImportPointer of an allocation already imported");
        if (CUresult r = injected("cuMemPoolImportPointer")) return r;
        *out = origin + 0x100000000000;
        imported_pointers_[*out] = {p, origin};
        log.push_back("pool_import_pointer p" + hex(origin) + " -> p" + hex(*out));
        return result::success;
    }
    std::size_t imported_pool_count() const { return imported_pools_.size(); }
    std::size_t imported_pointer_count() const { return imported_pointers_.size(); }
    std::string pool_name(CUmemoryPool p) const { return "pool" + hex(reinterpret_cast<std::uintptr_t>(p)); }
    int pools_imported = 0;
    CUresult event_query(CUevent e) {
        return std::find(busy_events.begin(), busy_events.end(), e) != busy_events.end() ? result::not_ready
                                                                                         : result::success;
    }
    CUresult host_alloc(void** p, std::size_t bytes, unsigned flags) {
        if (flags != cu::kMemHostAllocPortable) return violation("cuMemHostAlloc flags");
        if (CUresult r = injected("cuMemHostAlloc")) return r;
        std::size_t held = 0;
        for (auto& b : pinned_) held += b->size();
        if (held + bytes > pinned_capacity) return result::out_of_memory;
        pinned_.push_back(std::make_unique<std::vector<std::byte>>(bytes));
        *p = pinned_.back()->data();
        log.push_back("host_alloc " + sz(bytes));
        return result::success;
    }
    CUresult free_host(void* p) {
        for (auto it = pinned_.begin(); it != pinned_.end(); ++it)
            if ((*it)->data() == p) {
                log.push_back("free_host " + sz((*it)->size()));
                pinned_.erase(it);
                return result::success;
            }
        return violation("cuMemFreeHost of unknown memory");
    }
    // cuMemHostRegister: the range becomes pinned host memory (pointer_info and copies see it).
    std::vector<std::pair<void*, std::size_t>> registered;  // live registrations
    CUresult host_register(void* p, std::size_t bytes, unsigned flags) {
        if (CUresult r = need_context("cuMemHostRegister")) return r;
        if (flags != 1) return violation("cuMemHostRegister flags (expected portable)");
        for (auto& [q, n] : registered)
            if (q == p) return violation("cuMemHostRegister of a range already registered");
        if (CUresult r = injected("cuMemHostRegister")) return r;
        registered.emplace_back(p, bytes);
        add_pointer_range(reinterpret_cast<CUdeviceptr>(p), bytes, cu::kMemoryTypeHost, false, 0);
        log.push_back("host_register " + sz(bytes));
        return result::success;
    }
    CUresult host_unregister(void* p) {
        if (CUresult r = need_context("cuMemHostUnregister")) return r;
        auto it = std::find_if(registered.begin(), registered.end(), [&](auto& e) { return e.first == p; });
        if (it == registered.end()) return violation("cuMemHostUnregister of a range never registered");
        log.push_back("host_unregister " + sz(it->second));
        registered.erase(it);
        std::erase_if(ranges_, [&](const Range& r) { return r.base == reinterpret_cast<CUdeviceptr>(p); });
        return result::success;
    }
    CUresult mem_get_info(std::size_t* free_bytes, std::size_t* total) {
        std::size_t used = 0;
        for (auto& [p, s] : pools_) used += s.used + s.cached_bytes();
        *total = device_capacity;
        *free_bytes = device_capacity - std::min(used, device_capacity);
        return result::success;
    }

private:
    struct PoolState {
        int device;
        bool fd;
        std::uint64_t threshold, used, high, spare;
        std::vector<std::pair<CUdeviceptr, std::size_t>> cache;
        std::uint64_t cached_bytes() const {
            std::uint64_t n = 0;
            for (auto& c : cache) n += c.second;
            return n;
        }
    };
    std::map<CUmemoryPool, PoolState> pools_;
    std::map<CUdeviceptr, std::pair<CUmemoryPool, std::size_t>> pool_blocks_;  // nullptr pool: a graph's
    std::vector<std::unique_ptr<std::vector<std::byte>>> pinned_;
    std::map<CUdeviceptr, std::vector<std::byte>> pool_bytes_;
    CUdeviceptr next_pool_va_ = 0x5e0000000000;
    std::map<int, CUmemoryPool> exported_pools_;                                     // fd -> pool
    std::map<CUmemoryPool, CUmemoryPool> imported_pools_;                            // imported -> exporter's
    std::map<CUdeviceptr, std::pair<CUmemoryPool, CUdeviceptr>> imported_pointers_;  // -> imported pool, origin

    struct Range {
        CUdeviceptr base;
        std::size_t size;
        unsigned type;
        bool managed;
        int ordinal;
    };
    struct Allocation {
        std::size_t size;
        int device;
        std::vector<std::byte> bytes;
        int mappings;
        bool released;
        bool exportable;  // created with the POSIX fd handle type
        int imports;      // handles imported from its fds and not yet released
    };
    struct Mapping {
        std::size_t size;
        CUmemGenericAllocationHandle handle;
        std::vector<int> access;
    };
    std::map<std::string, std::pair<int, CUresult>> failures_;
    std::vector<Range> ranges_;
    std::map<int, int> retained_;
    std::map<CUdeviceptr, std::size_t> reservations_;
    std::map<CUmemGenericAllocationHandle, Allocation> allocations_;
    std::map<CUdeviceptr, Mapping> mappings_;
    CUdeviceptr next_va_ = 0x7f0000000000;
    CUmemGenericAllocationHandle next_handle_ = 1;
    int streams_ = 0;
    std::map<CUdeviceptr, CUdeviceptr> ipc_open_;  // importer address -> exporter base
    std::vector<CUevent> interprocess_events_;
    std::map<int, CUmemGenericAllocationHandle> exported_;  // fd -> handle
    struct UserObject {
        void* ptr;
        void (*destroy)(void*);
        bool released;
    };
    std::map<std::uintptr_t, std::pair<int, unsigned long long>> captures_;  // stream -> status, id
    std::vector<UserObject> user_objects_;
    std::map<unsigned long long, std::vector<CUuserObject>> graphs_;
};

// The instance the table's plain function pointers forward to.
inline FakeDriver* g_fake = nullptr;

inline CUresult fake_error_name(CUresult r, const char** s) {
    switch (r) {
        case 0: *s = "CUDA_SUCCESS"; return 0;
        case 1: *s = "CUDA_ERROR_INVALID_VALUE"; return 0;
        case 2: *s = "CUDA_ERROR_OUT_OF_MEMORY"; return 0;
        case 4: *s = "CUDA_ERROR_DEINITIALIZED"; return 0;
        case 100: *s = "CUDA_ERROR_NO_DEVICE"; return 0;
        case 201: *s = "CUDA_ERROR_INVALID_CONTEXT"; return 0;
        default: *s = nullptr; return result::invalid_value;  // as the real driver does
    }
}
inline CUresult fake_error_string(CUresult r, const char** s) {
    switch (r) {
        case 0: *s = "no error"; return 0;
        case 1: *s = "invalid argument"; return 0;
        case 2: *s = "out of memory"; return 0;
        case 4: *s = "driver shutting down"; return 0;
        case 100: *s = "no CUDA-capable device is detected"; return 0;
        case 201: *s = "invalid device context"; return 0;
        default: *s = nullptr; return result::invalid_value;
    }
}

inline DriverTable FakeDriver::table() const {
    DriverTable t{};
    t.get_error_name = fake_error_name;
    t.get_error_string = fake_error_string;
    t.init = [](unsigned flags) { return flags ? result::invalid_value : g_fake->init_result; };
    t.driver_get_version = [](int* v) { return *v = 13000, result::success; };
    t.device_get_count = [](int* n) { return *n = g_fake->devices, result::success; };
    t.device_get = [](CUdevice* d, int o) { return g_fake->device_get(d, o); };
    t.device_get_attribute = [](int* v, int a, CUdevice d) { return g_fake->device_get_attribute(v, a, d); };
    t.device_can_access_peer = [](int* v, CUdevice a, CUdevice b) { return g_fake->can_access_peer(v, a, b); };
    t.device_primary_ctx_retain = [](CUcontext* c, CUdevice d) { return g_fake->primary_retain(c, d); };
    t.device_primary_ctx_release = [](CUdevice d) { return g_fake->primary_release(d); };
    t.ctx_get_current = [](CUcontext* c) { return *c = g_fake->current, result::success; };
    t.ctx_set_current = [](CUcontext c) { return g_fake->set_current(c); };
    t.ctx_synchronize = [] { return g_fake->synchronize(); };
    t.ctx_get_device = [](CUdevice* d) {
        if (!g_fake->current) return result::invalid_context;
        return *d = 100 + g_fake->ordinal_of(g_fake->current), result::success;
    };
    t.pointer_get_attributes = [](unsigned n, int* a, void** d, CUdeviceptr p) {
        return g_fake->pointer_attributes(n, a, d, p);
    };
    t.stream_create = [](CUstream* s, unsigned f) { return g_fake->stream_create(s, f); };
    t.stream_destroy = [](CUstream s) { return g_fake->stream_destroy(s); };
    t.stream_synchronize = [](CUstream s) { return g_fake->stream_synchronize(s); };
    t.stream_wait_event = [](CUstream s, CUevent e, unsigned f) { return g_fake->stream_wait_event(s, e, f); };
    t.event_create = [](CUevent* e, unsigned f) { return g_fake->event_create(e, f); };
    t.event_record = [](CUevent e, CUstream s) { return g_fake->event_record(e, s); };
    t.event_synchronize = [](CUevent e) { return g_fake->event_synchronize(e); };
    t.event_destroy = [](CUevent e) { return g_fake->event_destroy(e); };
    t.mem_address_reserve = [](CUdeviceptr* p, std::size_t s, std::size_t a, CUdeviceptr h, unsigned long long f) {
        return g_fake->reserve(p, s, a, h, f);
    };
    t.mem_address_free = [](CUdeviceptr p, std::size_t s) { return g_fake->address_free(p, s); };
    t.mem_create = [](CUmemGenericAllocationHandle* h, std::size_t s, const MemAllocationProp* p,
                      unsigned long long f) { return g_fake->create(h, s, p, f); };
    t.mem_release = [](CUmemGenericAllocationHandle h) { return g_fake->release(h); };
    t.mem_map = [](CUdeviceptr p, std::size_t s, std::size_t o, CUmemGenericAllocationHandle h, unsigned long long f) {
        return g_fake->map(p, s, o, h, f);
    };
    t.mem_unmap = [](CUdeviceptr p, std::size_t s) { return g_fake->unmap(p, s); };
    t.mem_set_access = [](CUdeviceptr p, std::size_t s, const MemAccessDesc* d, std::size_t n) {
        return g_fake->set_access(p, s, d, n);
    };
    t.mem_get_allocation_granularity = [](std::size_t* g, const MemAllocationProp* p, int o) {
        return g_fake->granularity_of(g, p, o);
    };
    t.memcpy_async = [](CUdeviceptr d, CUdeviceptr s, std::size_t n, CUstream st) {
        return g_fake->memcpy_async(d, s, n, st);
    };
    t.memcpy_2d_async = [](const Memcpy2D* m, CUstream s) { return g_fake->memcpy_2d_async(m, s); };
    t.memcpy_dtoh = [](void* h, CUdeviceptr d, std::size_t n) { return g_fake->copy(d, h, n, true); };
    t.memcpy_htod = [](CUdeviceptr d, const void* h, std::size_t n) {
        return g_fake->copy(d, const_cast<void*>(h), n, false);
    };
    t.device_get_uuid = [](Uuid* u, CUdevice d) { return g_fake->device_uuid(u, d); };
    t.ipc_get_mem_handle = [](IpcHandle* h, CUdeviceptr p) { return g_fake->ipc_get_mem_handle(h, p); };
    t.ipc_open_mem_handle = [](CUdeviceptr* p, IpcHandle h, unsigned f) {
        return g_fake->ipc_open_mem_handle(p, h, f);
    };
    t.ipc_close_mem_handle = [](CUdeviceptr p) { return g_fake->ipc_close_mem_handle(p); };
    t.ipc_get_event_handle = [](IpcHandle* h, CUevent e) { return g_fake->ipc_get_event_handle(h, e); };
    t.ipc_open_event_handle = [](CUevent* e, IpcHandle h) { return g_fake->ipc_open_event_handle(e, h); };
    t.mem_export_to_shareable_handle = [](void* o, CUmemGenericAllocationHandle h, int type, unsigned long long f) {
        return g_fake->export_shareable(o, h, type, f);
    };
    t.mem_import_from_shareable_handle = [](CUmemGenericAllocationHandle* h, void* o, int type) {
        return g_fake->import_shareable(h, o, type);
    };
    // Memory pools and pinned memory.
    t.mem_pool_create = [](CUmemoryPool* p, const MemPoolProps* props) { return g_fake->mem_pool_create(p, props); };
    t.mem_pool_set_attribute = [](CUmemoryPool p, int a, void* v) { return g_fake->mem_pool_set_attribute(p, a, v); };
    t.mem_pool_get_attribute = [](CUmemoryPool p, int a, void* v) { return g_fake->mem_pool_get_attribute(p, a, v); };
    t.mem_pool_trim_to = [](CUmemoryPool p, std::size_t k) { return g_fake->mem_pool_trim_to(p, k); };
    t.mem_alloc_from_pool_async = [](CUdeviceptr* d, std::size_t n, CUmemoryPool p, CUstream s) {
        return g_fake->alloc_from_pool(d, n, p, s);
    };
    t.mem_alloc_async = [](CUdeviceptr* d, std::size_t n, CUstream s) { return g_fake->alloc_async(d, n, s); };
    t.mem_pool_destroy = [](CUmemoryPool p) { return g_fake->pool_destroy(p); };
    t.mem_pool_export_to_shareable_handle = [](void* o, CUmemoryPool p, int type, unsigned long long f) {
        return g_fake->pool_export_fd(o, p, type, f);
    };
    t.mem_pool_import_from_shareable_handle = [](CUmemoryPool* p, void* o, int type, unsigned long long f) {
        return g_fake->pool_import_fd(p, o, type, f);
    };
    t.mem_pool_export_pointer = [](MemPoolPtrExportData* o, CUdeviceptr p) {
        return g_fake->pool_export_pointer(o, p);
    };
    t.mem_pool_import_pointer = [](CUdeviceptr* o, CUmemoryPool p, MemPoolPtrExportData* d) {
        return g_fake->pool_import_pointer(o, p, d);
    };
    t.mem_free_async = [](CUdeviceptr d, CUstream s) { return g_fake->free_async(d, s); };
    t.mem_free = [](CUdeviceptr d) { return g_fake->free_sync(d); };
    t.event_query = [](CUevent e) { return g_fake->event_query(e); };
    t.mem_host_alloc = [](void** p, std::size_t n, unsigned f) { return g_fake->host_alloc(p, n, f); };
    t.mem_free_host = [](void* p) { return g_fake->free_host(p); };
    t.mem_get_info = [](std::size_t* f, std::size_t* t2) { return g_fake->mem_get_info(f, t2); };
    t.mem_host_register = [](void* p, std::size_t n, unsigned f) { return g_fake->host_register(p, n, f); };
    t.mem_host_unregister = [](void* p) { return g_fake->host_unregister(p); };
    t.stream_get_capture_info = [](CUstream s, int* st, unsigned long long* id, CUgraph* g, const CUgraphNode** d,
                                   std::size_t* n) { return g_fake->get_capture_info(s, st, id, g, d, n); };
    t.user_object_create = [](CUuserObject* o, void* p, void (*f)(void*), unsigned r, unsigned fl) {
        return g_fake->user_object_create(o, p, f, r, fl);
    };
    t.user_object_release = [](CUuserObject o, unsigned n) { return g_fake->user_object_release(o, n); };
    t.graph_retain_user_object = [](CUgraph g, CUuserObject o, unsigned n, unsigned f) {
        return g_fake->graph_retain_user_object(g, o, n, f);
    };
    return t;
}

// A fake driver installed as stridex's driver for the scope of a test.
class FakeCuda {
public:
    explicit FakeCuda(int devices = 1, std::size_t granularity = 2 * MiB, CUresult init = result::success)
        : fake_(configure(devices, granularity, init)), install_(&fake_), override_(fake_.table()) {}
    FakeDriver* operator->() { return &fake_; }
    FakeDriver& operator*() { return fake_; }
    Driver& driver() { return override_.driver(); }

private:
    static FakeDriver configure(int devices, std::size_t granularity, CUresult init) {
        FakeDriver f;
        f.devices = devices;
        f.granularity = granularity;
        f.init_result = init;
        return f;
    }
    // Points g_fake at the fake for exactly as long as the overriding Driver lives: that Driver's
    // destructor still calls the fake (releasing contexts and pooled events).
    struct Install {
        FakeDriver* previous;
        explicit Install(FakeDriver* f) : previous(std::exchange(g_fake, f)) {}
        ~Install() { g_fake = previous; }
    };
    FakeDriver fake_;
    Install install_;
    DriverOverride override_;
};

}  // namespace stridex_test
