// _IpcTicketTable: the words an exporting process shares with its importers so that an importer
// claims a CUDA IPC ticket with one compare-and-swap instead of a round trip to the exporter's
// broker thread (python/stridex/ipc/broker.py; docs/distributed.md, "Lifetime").
//
// One 64-bit word per slot: 0 free, 2*serial issued (pickled, not yet loaded), 2*serial + 1
// claimed. A serial is never reused, so a stale or duplicated pickle -- whose serial is no longer
// the slot's -- fails its claim instead of taking a ticket that is not its own. Python hands in
// only an fd and slot numbers, never an address: every slot is range-checked here.
#include <nanobind/nanobind.h>

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "common/arguments.hpp"
#include "common/bindings.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace stridex::python {

namespace {

class TicketTable {
public:
    static constexpr std::size_t kSlots = 4096;
    static constexpr std::size_t kBytes = kSlots * sizeof(std::uint64_t);

    // Maps the table file `fd` (the caller keeps the fd). A file shorter than the table would
    // fault on access (SIGBUS), so its size is checked first.
    explicit TicketTable(int fd) {
        struct stat st {};
        if (fstat(fd, &st) != 0) fail(ErrorKind::value, "ticket table fd ", fd, ": ", std::strerror(errno));
        if (st.st_size < static_cast<off_t>(kBytes))
            fail(ErrorKind::value, "ticket table file has ", st.st_size, " bytes, expected ", kBytes);
        void* p = mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED) fail(ErrorKind::value, "cannot map the ticket table: ", std::strerror(errno));
        words_ = static_cast<std::uint64_t*>(p);
    }
    TicketTable(const TicketTable&) = delete;
    TicketTable& operator=(const TicketTable&) = delete;
    ~TicketTable() { munmap(words_, kBytes); }

    void issue(std::size_t slot, std::uint64_t serial) { word(slot).store(serial << 1, std::memory_order_release); }
    void clear(std::size_t slot) { word(slot).store(0, std::memory_order_release); }
    bool claim(std::size_t slot, std::uint64_t serial) {
        std::uint64_t expected = serial << 1;
        return word(slot).compare_exchange_strong(expected, expected | 1, std::memory_order_acq_rel);
    }

private:
    std::atomic_ref<std::uint64_t> word(std::size_t slot) {
        if (slot >= kSlots) fail(ErrorKind::value, "ticket slot ", slot, " is outside the table (", kSlots, " slots)");
        return std::atomic_ref<std::uint64_t>(words_[slot]);
    }

    std::uint64_t* words_ = nullptr;
};

// A serial: an int in [1, 2**62), so that 2*serial + 1 fits the word and 0 stays "free".
std::uint64_t serial_arg(nb::handle o) {
    const std::int64_t s = int64_arg(o.ptr(), "ticket serial");
    if (s < 1 || s >= (std::int64_t{1} << 62)) fail(ErrorKind::value, "ticket serial must be in [1, 2**62), found ", s);
    return static_cast<std::uint64_t>(s);
}

std::size_t slot_arg(nb::handle o) { return size_arg(o.ptr(), "ticket slot"); }

}  // namespace

void bind_ipc_tickets(nb::module_& m) {
    nb::class_<TicketTable>(m, "_IpcTicketTable",
                            "The ticket words an exporter shares with its importers (stridex.ipc broker).")
        .def(
            "__init__",
            [](TicketTable* t, nb::handle fd) { new (t) TicketTable(int32_arg(fd.ptr(), "_IpcTicketTable(): fd")); },
            "fd"_a)
        .def_ro_static("slots", &TicketTable::kSlots)
        .def_ro_static("nbytes", &TicketTable::kBytes)
        .def(
            "issue",
            [](TicketTable& t, nb::handle slot, nb::handle serial) { t.issue(slot_arg(slot), serial_arg(serial)); },
            "slot"_a, "serial"_a)
        .def(
            "clear", [](TicketTable& t, nb::handle slot) { t.clear(slot_arg(slot)); }, "slot"_a)
        .def(
            "claim",
            [](TicketTable& t, nb::handle slot, nb::handle serial) {
                return t.claim(slot_arg(slot), serial_arg(serial));
            },
            "slot"_a, "serial"_a, "True once: the slot held this serial, issued and not yet claimed.");
}

}  // namespace stridex::python
