// Fuzzes the text parsers of foreign type and device descriptions: NumPy typestrs (array
// interfaces), PEP 3118 formats (buffer protocol), dtype and device names. Each either throws
// stridex::Error or returns a value that round-trips through its printer.
#include <cstdint>
#include <string>

#include "fuzz_input.hpp"
#include "stridex/device.hpp"
#include "stridex/dtype.hpp"
#include "stridex/error.hpp"

using namespace stridex;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    fuzz::Input in(data, size);
    const std::uint8_t which = in.take<std::uint8_t>();
    const std::string_view text = in.text(48);
    try {
        switch (which % 5) {
            case 0: {
                const Dtype d = Dtype::from_typestr(text);
                fuzz::require(d.valid());
                std::string again;
                try {
                    again = d.typestr();
                } catch (const Error&) {
                    break;  // a dtype with no typestr of its own (e.g. read from '<V2' by name)
                }
                fuzz::require(Dtype::from_typestr(again) == d);
                break;
            }
            case 1: {
                const Dtype d = Dtype::from_buffer_format(text);
                fuzz::require(d.valid() && d.itemsize() > 0);
                break;
            }
            case 2: {
                const Dtype d = Dtype::from_name(text);
                fuzz::require(Dtype::from_name(d.name()) == d);
                break;
            }
            case 3: {
                const Device d = Device::parse(text);
                fuzz::require(Device::parse(d.name()) == d);
                break;
            }
            default: {
                // Raw DLPack fields, as a capsule carries them.
                const Dtype d = Dtype::from_raw(in.take<std::uint8_t>(), in.take<std::uint8_t>(),
                                                in.take<std::uint16_t>());
                d.validate();
                fuzz::require(Dtype::from_name(d.name()) == d);
                (void)d.storage_bytes(in.take<std::int64_t>() & INT64_MAX, in.flag());
                break;
            }
        }
    } catch (const Error&) {
        // a typed refusal is the expected outcome for most inputs
    }
    return 0;
}
