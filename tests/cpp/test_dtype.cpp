// Tests for stridex::Dtype: the DLPack validity table, names, sizes, NumPy typestr and PEP 3118
// formats. Expected values are written out here independently of src/core/dtype.cpp's tables.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <complex>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <ostream>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "expect_error.hpp"
#include "stridex/dtype.hpp"
#include "stridex/error.hpp"

namespace stridex {
// gtest prints unknown types as bytes; a name makes failures readable.
static void PrintTo(Dtype d, std::ostream* os) { *os << d.name(); }
}  // namespace stridex

namespace {

using stridex::Dtype;
using stridex::DtypeCode;
using stridex::Error;
using stridex::ErrorKind;
namespace dtypes = stridex::dtypes;

// Passes when f throws stridex::Error of `kind` whose message contains `needle`.

constexpr bool kLE = std::endian::native == std::endian::little;
constexpr std::string_view kNative = kLE ? "<" : ">";
constexpr std::string_view kForeign = kLE ? ">" : "<";

Dtype D(DtypeCode c, int bits, int lanes = 1) {
    return Dtype{c, static_cast<std::uint8_t>(bits), static_cast<std::uint16_t>(lanes)};
}

// The DLPack rule, written out again here so that the implementation's table is checked against
// an independent statement of it.
std::vector<int> expected_widths(int code) {
    switch (code) {
        case 0:
        case 1: return {1, 2, 4, 8, 16, 32, 64};
        case 2: return {16, 32, 64};
        case 3: {
            std::vector<int> w;
            for (int b = 8; b <= 248; b += 8) w.push_back(b);
            return w;
        }
        case 4: return {16};
        case 5: return {32, 64, 128};
        case 6: return {8};
        case 7:
        case 8:
        case 9:
        case 10:
        case 11:
        case 12:
        case 13:
        case 14: return {8};
        case 15:
        case 16: return {6};
        case 17: return {4};
        default: return {};
    }
}

// Every valid (code, bits) pair with one lane.
std::vector<Dtype> all_valid_scalars() {
    std::vector<Dtype> out;
    for (int code = 0; code <= 17; ++code)
        for (int bits : expected_widths(code)) out.push_back(D(static_cast<DtypeCode>(code), bits));
    return out;
}

// ---------------------------------------------------------------------------------------------
// Layout and ABI values

TEST(Dtype, LayoutMatchesDLDataType) {
    struct DLDataTypeLike {
        std::uint8_t code;
        std::uint8_t bits;
        std::uint16_t lanes;
    };
    EXPECT_EQ(sizeof(Dtype), 4u);
    EXPECT_EQ(offsetof(Dtype, code), 0u);
    EXPECT_EQ(offsetof(Dtype, bits), 1u);
    EXPECT_EQ(offsetof(Dtype, lanes), 2u);
    EXPECT_EQ(std::bit_cast<Dtype>(DLDataTypeLike{5, 128, 3}), D(DtypeCode::kComplex, 128, 3));
    EXPECT_EQ(std::bit_cast<DLDataTypeLike>(dtypes::float8_e4m3fn).code, 10);
}

TEST(Dtype, CodeValuesAreDLPack) {
    const std::vector<std::pair<DtypeCode, int>> codes = {
        {DtypeCode::kInt, 0},
        {DtypeCode::kUInt, 1},
        {DtypeCode::kFloat, 2},
        {DtypeCode::kOpaqueHandle, 3},
        {DtypeCode::kBfloat, 4},
        {DtypeCode::kComplex, 5},
        {DtypeCode::kBool, 6},
        {DtypeCode::kFloat8_e3m4, 7},
        {DtypeCode::kFloat8_e4m3, 8},
        {DtypeCode::kFloat8_e4m3b11fnuz, 9},
        {DtypeCode::kFloat8_e4m3fn, 10},
        {DtypeCode::kFloat8_e4m3fnuz, 11},
        {DtypeCode::kFloat8_e5m2, 12},
        {DtypeCode::kFloat8_e5m2fnuz, 13},
        {DtypeCode::kFloat8_e8m0fnu, 14},
        {DtypeCode::kFloat6_e2m3fn, 15},
        {DtypeCode::kFloat6_e3m2fn, 16},
        {DtypeCode::kFloat4_e2m1fn, 17},
    };
    for (auto [code, value] : codes) EXPECT_EQ(static_cast<int>(code), value);
}

TEST(Dtype, Equality) {
    EXPECT_EQ(dtypes::float32, Dtype::make(DtypeCode::kFloat, 32));
    EXPECT_NE(dtypes::float32, dtypes::int32);
    EXPECT_NE(dtypes::float32, dtypes::float64);
    EXPECT_NE(dtypes::float32, Dtype::make(DtypeCode::kFloat, 32, 2));
}

// ---------------------------------------------------------------------------------------------
// Validity

TEST(Dtype, ValidityTableForEveryCodeAndWidth) {
    for (int code = 0; code <= 17; ++code) {
        const std::vector<int> widths = expected_widths(code);
        for (int bits = 0; bits <= 255; ++bits) {
            SCOPED_TRACE("code " + std::to_string(code) + " bits " + std::to_string(bits));
            const bool expected = std::find(widths.begin(), widths.end(), bits) != widths.end();
            const Dtype d = D(static_cast<DtypeCode>(code), bits);
            EXPECT_EQ(d.valid(), expected);
            if (expected) {
                EXPECT_EQ(Dtype::make(d.code, bits), d);
                EXPECT_EQ(Dtype::from_raw(static_cast<std::uint8_t>(code), d.bits, 1), d);
                EXPECT_NO_THROW(d.validate());
            } else {
                const std::string needle = " with " + std::to_string(bits) + " bits";
                EXPECT_ERROR(Dtype::make(d.code, bits), type, needle);
                EXPECT_ERROR(Dtype::from_raw(static_cast<std::uint8_t>(code), d.bits, 1), type, needle);
                EXPECT_ERROR(d.validate(), type, needle);
            }
        }
    }
}

TEST(Dtype, WidthMessagesSayWhatIsExpected) {
    EXPECT_ERROR(Dtype::make(DtypeCode::kFloat, 12), type,
                 "invalid dtype: float with 12 bits (float takes 16, 32 or 64)");
    EXPECT_ERROR(Dtype::make(DtypeCode::kInt, 3), type, "int with 3 bits (int takes 1, 2, 4, 8, 16, 32 or 64)");
    EXPECT_ERROR(Dtype::make(DtypeCode::kUInt, 128), type, "uint takes 1, 2, 4, 8, 16, 32 or 64");
    EXPECT_ERROR(Dtype::make(DtypeCode::kBfloat, 32), type, "bfloat with 32 bits (bfloat takes 16)");
    EXPECT_ERROR(Dtype::make(DtypeCode::kComplex, 16), type, "complex takes 32, 64 or 128");
    EXPECT_ERROR(Dtype::make(DtypeCode::kBool, 1), type, "bool with 1 bits (bool takes 8)");
    EXPECT_ERROR(Dtype::make(DtypeCode::kOpaqueHandle, 12), type, "opaque_handle takes a positive multiple of 8");
    EXPECT_ERROR(Dtype::make(DtypeCode::kOpaqueHandle, 0), type, "opaque_handle with 0 bits");
    EXPECT_ERROR(Dtype::make(DtypeCode::kFloat8_e4m3fn, 16), type,
                 "float8_e4m3fn with 16 bits (float8_e4m3fn takes 8)");
    EXPECT_ERROR(Dtype::make(DtypeCode::kFloat6_e3m2fn, 8), type, "float6_e3m2fn takes 6");
    EXPECT_ERROR(Dtype::make(DtypeCode::kFloat4_e2m1fn, 8), type, "float4_e2m1fn takes 4");
}

TEST(Dtype, MakeRejectsWidthsOutsideUint8BeforeNarrowing) {
    // 256 is a multiple of 8, and 264 would narrow to 8: neither may sneak through.
    EXPECT_ERROR(Dtype::make(DtypeCode::kOpaqueHandle, 256), type, "with 256 bits");
    EXPECT_ERROR(Dtype::make(DtypeCode::kOpaqueHandle, 264), type, "with 264 bits");
    EXPECT_ERROR(Dtype::make(DtypeCode::kInt, 264), type, "with 264 bits");
    EXPECT_ERROR(Dtype::make(DtypeCode::kInt, -8), type, "with -8 bits");
    EXPECT_EQ(Dtype::make(DtypeCode::kOpaqueHandle, 248), D(DtypeCode::kOpaqueHandle, 248));
}

TEST(Dtype, Lanes) {
    EXPECT_EQ(Dtype::make(DtypeCode::kFloat, 32, 4), D(DtypeCode::kFloat, 32, 4));
    EXPECT_EQ(Dtype::make(DtypeCode::kFloat, 32, 65535).lanes, 65535);
    EXPECT_ERROR(Dtype::make(DtypeCode::kFloat, 32, 0), type, "float32 with 0 lanes (lanes must be 1 to 65535)");
    EXPECT_ERROR(Dtype::make(DtypeCode::kFloat, 32, -1), type, "with -1 lanes");
    // 65537 would narrow to 1.
    EXPECT_ERROR(Dtype::make(DtypeCode::kFloat, 32, 65537), type, "with 65537 lanes");
    EXPECT_ERROR(Dtype::from_raw(0, 8, 0), type, "int8 with 0 lanes");
    EXPECT_FALSE(D(DtypeCode::kInt, 8, 0).valid());
    EXPECT_ERROR(D(DtypeCode::kInt, 8, 0).validate(), type, "0 lanes");
    EXPECT_TRUE(D(DtypeCode::kInt, 8, 2).valid());
}

TEST(Dtype, UnknownCodesAreUnsupported) {
    // 18 is DLPack head's bcomplex; stridex must refuse it by name rather than misread it.
    for (int code : {18, 19, 100, 255}) {
        SCOPED_TRACE(code);
        const std::string needle = "unsupported dtype code " + std::to_string(code);
        EXPECT_ERROR(Dtype::from_raw(static_cast<std::uint8_t>(code), 8, 1), unsupported, needle);
        EXPECT_ERROR(Dtype::make(static_cast<DtypeCode>(code), 8), unsupported, needle);
        const Dtype d = D(static_cast<DtypeCode>(code), 8);
        EXPECT_FALSE(d.valid());
        EXPECT_ERROR(d.validate(), unsupported, needle);
    }
    EXPECT_ERROR(Dtype::from_raw(18, 8, 1), unsupported, "codes 0 to 17");
}

// ---------------------------------------------------------------------------------------------
// Names

TEST(Dtype, CanonicalNames) {
    const std::vector<std::pair<Dtype, std::string>> names = {
        {dtypes::int8, "int8"},
        {dtypes::int16, "int16"},
        {dtypes::int32, "int32"},
        {dtypes::int64, "int64"},
        {dtypes::uint8, "uint8"},
        {dtypes::uint16, "uint16"},
        {dtypes::uint32, "uint32"},
        {dtypes::uint64, "uint64"},
        {D(DtypeCode::kInt, 4), "int4"},
        {D(DtypeCode::kInt, 1), "int1"},
        {D(DtypeCode::kUInt, 1), "uint1"},
        {D(DtypeCode::kUInt, 2), "uint2"},
        {dtypes::float16, "float16"},
        {dtypes::float32, "float32"},
        {dtypes::float64, "float64"},
        {dtypes::bfloat16, "bfloat16"},
        {D(DtypeCode::kComplex, 32), "complex32"},
        {dtypes::complex64, "complex64"},
        {dtypes::complex128, "complex128"},
        {dtypes::bool_, "bool"},
        {D(DtypeCode::kOpaqueHandle, 64), "opaque_handle64"},
        {D(DtypeCode::kOpaqueHandle, 8), "opaque_handle8"},
        {D(DtypeCode::kFloat8_e3m4, 8), "float8_e3m4"},
        {D(DtypeCode::kFloat8_e4m3, 8), "float8_e4m3"},
        {D(DtypeCode::kFloat8_e4m3b11fnuz, 8), "float8_e4m3b11fnuz"},
        {dtypes::float8_e4m3fn, "float8_e4m3fn"},
        {D(DtypeCode::kFloat8_e4m3fnuz, 8), "float8_e4m3fnuz"},
        {dtypes::float8_e5m2, "float8_e5m2"},
        {D(DtypeCode::kFloat8_e5m2fnuz, 8), "float8_e5m2fnuz"},
        {D(DtypeCode::kFloat8_e8m0fnu, 8), "float8_e8m0fnu"},
        {D(DtypeCode::kFloat6_e2m3fn, 6), "float6_e2m3fn"},
        {D(DtypeCode::kFloat6_e3m2fn, 6), "float6_e3m2fn"},
        {D(DtypeCode::kFloat4_e2m1fn, 4), "float4_e2m1fn"},
        {D(DtypeCode::kFloat, 32, 4), "float32x4"},
        {D(DtypeCode::kComplex, 64, 2), "complex64x2"},
        {D(DtypeCode::kBool, 8, 16), "boolx16"},
        {D(DtypeCode::kFloat8_e4m3fn, 8, 2), "float8_e4m3fnx2"},
        {D(DtypeCode::kInt, 4, 65535), "int4x65535"},
    };
    for (const auto& [d, name] : names) {
        EXPECT_EQ(d.name(), name);
        EXPECT_EQ(Dtype::from_name(name), d) << name;
    }
}

TEST(Dtype, EveryValidDtypeRoundTripsThroughItsName) {
    std::set<std::string> seen;
    for (Dtype scalar : all_valid_scalars()) {
        for (int lanes : {1, 2, 3, 4, 10, 65535}) {
            const Dtype d = D(scalar.code, scalar.bits, lanes);
            const std::string name = d.name();
            EXPECT_EQ(Dtype::from_name(name), d) << name;
            EXPECT_TRUE(seen.insert(name).second) << "duplicate name " << name;
        }
    }
    // 7+7 ints, 3 floats, 31 opaque widths, 1 bfloat, 3 complex, 1 bool, 11 fp8/6/4; 6 lane counts.
    EXPECT_EQ(seen.size(), (14u + 3 + 31 + 1 + 3 + 1 + 11) * 6);
}

TEST(Dtype, InvalidDtypeStillHasADescriptiveName) {
    EXPECT_EQ(D(DtypeCode::kFloat, 12).name(), "dtype(code=2, bits=12, lanes=1)");
    EXPECT_EQ(D(static_cast<DtypeCode>(18), 8, 2).name(), "dtype(code=18, bits=8, lanes=2)");
    EXPECT_EQ(D(DtypeCode::kInt, 8, 0).name(), "dtype(code=0, bits=8, lanes=0)");
}

TEST(Dtype, FromNameRejectsUnknownNames) {
    for (const char* name : {"",
                             "float",
                             "int",
                             "Float32",
                             "float32 ",
                             " float32",
                             "f4",
                             "double",
                             "bool8",
                             "opaque_handle",
                             "complex",
                             "x4",
                             "int08",
                             "int+8",
                             "float32x",
                             "float32x1",
                             "float32x02",
                             "float32x-2",
                             "float32x65536",
                             "float32x4x4",
                             "float8_e4m3fn8",
                             "float8_e4m3fz",
                             "float8_e4m3fnuz2",
                             "int256",
                             "opaque_handle256",
                             "bfloat",
                             "uint"}) {
        SCOPED_TRACE(name);
        EXPECT_ERROR(Dtype::from_name(name), type, std::string("unknown dtype name '") + name + "'");
    }
}

TEST(Dtype, FromNameExplainsWellFormedButInvalidNames) {
    // These look like names but break the width rule; the message says which rule.
    EXPECT_ERROR(Dtype::from_name("float8"), type, "float with 8 bits (float takes 16, 32 or 64)");
    EXPECT_ERROR(Dtype::from_name("int3"), type, "int with 3 bits");
    EXPECT_ERROR(Dtype::from_name("bfloat32"), type, "bfloat takes 16");
    EXPECT_ERROR(Dtype::from_name("complex16"), type, "complex with 16 bits");
    EXPECT_ERROR(Dtype::from_name("opaque_handle12"), type, "multiple of 8");
    EXPECT_ERROR(Dtype::from_name("float32x0"), type, "0 lanes");
}

// ---------------------------------------------------------------------------------------------
// Sizes

TEST(Dtype, SubbyteAndItemsize) {
    struct Case {
        Dtype d;
        bool subbyte;
        std::int64_t itemsize;
    };
    const std::vector<Case> cases = {
        {dtypes::bool_, false, 1},
        {dtypes::int8, false, 1},
        {dtypes::float16, false, 2},
        {dtypes::bfloat16, false, 2},
        {dtypes::float32, false, 4},
        {dtypes::complex64, false, 8},
        {dtypes::complex128, false, 16},
        {D(DtypeCode::kComplex, 32), false, 4},
        {D(DtypeCode::kFloat, 32, 4), false, 16},
        {D(DtypeCode::kOpaqueHandle, 24), false, 3},
        {D(DtypeCode::kUInt, 1), true, 1},
        {D(DtypeCode::kInt, 2), true, 1},
        {D(DtypeCode::kInt, 4), true, 1},
        {D(DtypeCode::kFloat4_e2m1fn, 4), true, 1},
        {D(DtypeCode::kFloat6_e2m3fn, 6), true, 1},
        {D(DtypeCode::kInt, 4, 2), false, 1},  // two lanes fill a byte
        {D(DtypeCode::kInt, 4, 3), false, 2},  // 12 bits round up
        {D(DtypeCode::kUInt, 1, 7), true, 1},
        {dtypes::float8_e5m2, false, 1},
    };
    for (const Case& c : cases) {
        SCOPED_TRACE(c.d.name());
        EXPECT_EQ(c.d.is_subbyte(), c.subbyte);
        EXPECT_EQ(c.d.itemsize(), c.itemsize);
    }
}

TEST(Dtype, StorageBytesWholeBytes) {
    EXPECT_EQ(dtypes::float32.storage_bytes(0), 0);
    EXPECT_EQ(dtypes::float32.storage_bytes(10), 40);
    EXPECT_EQ(dtypes::complex128.storage_bytes(3), 48);
    EXPECT_EQ(dtypes::bool_.storage_bytes(5), 5);
    EXPECT_EQ(D(DtypeCode::kInt, 4, 3).storage_bytes(5), 10);        // not sub-byte: itemsize 2
    EXPECT_EQ(D(DtypeCode::kInt, 4, 3).storage_bytes(5, true), 10);  // the flag changes nothing here
    EXPECT_EQ(dtypes::float64.storage_bytes(5, true), 40);
}

TEST(Dtype, StorageBytesPackedSubbyte) {
    const Dtype int4 = D(DtypeCode::kInt, 4);
    const Dtype uint1 = D(DtypeCode::kUInt, 1);
    const Dtype fp6 = D(DtypeCode::kFloat6_e3m2fn, 6);
    const Dtype uint2x3 = D(DtypeCode::kUInt, 2, 3);
    using Cases = std::vector<std::pair<std::int64_t, std::int64_t>>;  // {count, bytes}
    for (auto [n, bytes] : Cases{{0, 0}, {1, 1}, {2, 1}, {3, 2}, {7, 4}, {8, 4}})
        EXPECT_EQ(int4.storage_bytes(n), bytes) << n;
    for (auto [n, bytes] : Cases{{1, 1}, {8, 1}, {9, 2}, {16, 2}, {17, 3}})
        EXPECT_EQ(uint1.storage_bytes(n), bytes) << n;
    for (auto [n, bytes] : Cases{{1, 1}, {4, 3}, {5, 4}, {8, 6}, {9, 7}}) EXPECT_EQ(fp6.storage_bytes(n), bytes) << n;
    EXPECT_EQ(uint2x3.storage_bytes(4), 3);  // 4 elements of 6 bits
}

TEST(Dtype, StorageBytesPaddedSubbyteTakesAByteEach) {
    EXPECT_EQ(D(DtypeCode::kInt, 4).storage_bytes(3, true), 3);
    EXPECT_EQ(D(DtypeCode::kUInt, 1).storage_bytes(9, true), 9);
    EXPECT_EQ(D(DtypeCode::kFloat4_e2m1fn, 4).storage_bytes(0, true), 0);
}

TEST(Dtype, StorageBytesLimits) {
    constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
    EXPECT_EQ(dtypes::float64.storage_bytes(kMax / 8), kMax / 8 * 8);
    EXPECT_ERROR(dtypes::float64.storage_bytes(kMax / 8 + 1), value, "overflows int64");
    EXPECT_ERROR(dtypes::complex128.storage_bytes(kMax), value, "complex128");
    EXPECT_EQ(dtypes::int8.storage_bytes(kMax), kMax);
    // Packed sizes never exceed the count, so even the largest count fits; computing
    // count * bits first would have overflowed.
    EXPECT_EQ(D(DtypeCode::kInt, 4).storage_bytes(kMax), std::int64_t{1} << 62);
    EXPECT_EQ(D(DtypeCode::kUInt, 1).storage_bytes(kMax), std::int64_t{1} << 60);
    EXPECT_EQ(D(DtypeCode::kUInt, 1).storage_bytes(kMax, true), kMax);
    EXPECT_ERROR(dtypes::float32.storage_bytes(-1), value, "found -1");
    EXPECT_ERROR(D(DtypeCode::kInt, 4).storage_bytes(-8), value, "found -8");
    EXPECT_ERROR(D(DtypeCode::kInt, 0).storage_bytes(1), type, "int with 0 bits");
}

// ---------------------------------------------------------------------------------------------
// NumPy typestr and PEP 3118 formats

struct HostCase {
    Dtype d;
    std::string typestr;  // with the byte order this host uses
    std::string format;
};

std::vector<HostCase> host_cases() {
    const std::string n(kNative);
    return {
        {dtypes::bool_, "|b1", "?"},         {dtypes::int8, "|i1", "b"},
        {dtypes::uint8, "|u1", "B"},         {dtypes::int16, n + "i2", "h"},
        {dtypes::uint16, n + "u2", "H"},     {dtypes::int32, n + "i4", "i"},
        {dtypes::uint32, n + "u4", "I"},     {dtypes::int64, n + "i8", "q"},
        {dtypes::uint64, n + "u8", "Q"},     {dtypes::float16, n + "f2", "e"},
        {dtypes::float32, n + "f4", "f"},    {dtypes::float64, n + "f8", "d"},
        {dtypes::complex64, n + "c8", "Zf"}, {dtypes::complex128, n + "c16", "Zd"},
    };
}

std::vector<Dtype> no_host_format() {
    return {dtypes::bfloat16,
            dtypes::float8_e4m3fn,
            dtypes::float8_e5m2,
            D(DtypeCode::kFloat8_e8m0fnu, 8),
            D(DtypeCode::kFloat6_e2m3fn, 6),
            D(DtypeCode::kFloat4_e2m1fn, 4),
            D(DtypeCode::kOpaqueHandle, 64),
            D(DtypeCode::kComplex, 32),
            D(DtypeCode::kInt, 4),
            D(DtypeCode::kUInt, 1),
            D(DtypeCode::kFloat, 32, 4),
            D(DtypeCode::kBool, 8, 2),
            D(DtypeCode::kFloat, 12)};
}

TEST(Dtype, TypestrRoundTrips) {
    for (const HostCase& c : host_cases()) {
        SCOPED_TRACE(c.typestr);
        EXPECT_EQ(c.d.typestr(), c.typestr);
        EXPECT_EQ(Dtype::from_typestr(c.typestr), c.d);
        // '=' and '|' also mean native order.
        EXPECT_EQ(Dtype::from_typestr("=" + c.typestr.substr(1)), c.d);
        EXPECT_EQ(Dtype::from_typestr("|" + c.typestr.substr(1)), c.d);
    }
}

TEST(Dtype, TypestrUnsupportedDtypes) {
    for (Dtype d : no_host_format()) {
        SCOPED_TRACE(d.name());
        EXPECT_ERROR(d.typestr(), unsupported, "dtype " + d.name() + " has no NumPy typestr");
    }
}

TEST(Dtype, FromTypestrByteOrder) {
    const std::string f(kForeign);
    EXPECT_ERROR(Dtype::from_typestr(f + "f4"), unsupported, "non-native byte order in typestr '" + f + "f4'");
    EXPECT_ERROR(Dtype::from_typestr(f + "i8"), unsupported, "non-native byte order");
    EXPECT_ERROR(Dtype::from_typestr(f + "c16"), unsupported, kLE ? "little-endian" : "big-endian");
    // Byte order is meaningless for single bytes.
    EXPECT_EQ(Dtype::from_typestr(f + "i1"), dtypes::int8);
    EXPECT_EQ(Dtype::from_typestr(f + "b1"), dtypes::bool_);
}

TEST(Dtype, FromTypestrMalformed) {
    for (const char* ts :
         {"", "<", "f4", "<f", "#f4", "<x4", "<f0", "<f4 ", "<f-4", "<4f", "<f4x", "<ff", "<i99999999999999"}) {
        SCOPED_TRACE(ts);
        EXPECT_ERROR(Dtype::from_typestr(ts), value, std::string("malformed typestr '") + ts + "'");
    }
}

TEST(Dtype, FromTypestrWellFormedButUnsupported) {
    // Valid NumPy typestrs (long double, datetimes, strings, objects) that have no DLPack dtype.
    for (const char* ts : {"<f16", "<c32", "<M8", "<m8", "|O8", "<U10", "|S4", "<i16", "<u3", "|b2"}) {
        SCOPED_TRACE(ts);
        EXPECT_ERROR(Dtype::from_typestr(ts), unsupported, std::string("unsupported typestr '") + ts + "'");
    }
}

TEST(Dtype, VoidTypestrsAreOpaqueBytes) {
    // NumPy's void and structured elements: opaque bytes of that size, whatever the byte order.
    for (const char* ts : {"|V12", "<V12", ">V12", "=V12"}) {
        SCOPED_TRACE(ts);
        EXPECT_EQ(Dtype::from_typestr(ts), Dtype::opaque_bytes(12));
    }
    const Dtype d = Dtype::opaque_bytes(12);
    EXPECT_EQ(d, Dtype::make(DtypeCode::kOpaqueHandle, 8, 12));
    EXPECT_TRUE(d.is_opaque_bytes());
    EXPECT_EQ(d.itemsize(), 12);
    EXPECT_EQ(d.typestr(), "|V12");
    EXPECT_EQ(Dtype::opaque_bytes(1).typestr(), "|V1");
    EXPECT_EQ(Dtype::opaque_bytes(65535).itemsize(), 65535);
    EXPECT_ERROR(Dtype::from_typestr("|V65536"), unsupported, "opaque element of 65536 bytes");
    EXPECT_ERROR(Dtype::opaque_bytes(0), unsupported, "opaque element of 0 bytes");
    EXPECT_ERROR(d.buffer_format(), unsupported, "no PEP 3118 buffer format");
    EXPECT_FALSE(dtypes::float32.is_opaque_bytes());
    EXPECT_FALSE(Dtype::make(DtypeCode::kOpaqueHandle, 64).is_opaque_bytes()) << "a DLPack handle, not bytes";
}

TEST(Dtype, PackedByteOfSubbyteLanes) {
    const Dtype f4x2 = Dtype::make(DtypeCode::kFloat4_e2m1fn, 4, 2);  // torch's float4_e2m1fn_x2
    EXPECT_TRUE(f4x2.is_packed_byte());
    EXPECT_FALSE(f4x2.is_subbyte());
    EXPECT_EQ(f4x2.itemsize(), 1);
    EXPECT_EQ(f4x2.name(), "float4_e2m1fnx2");
    EXPECT_FALSE(Dtype::make(DtypeCode::kFloat4_e2m1fn, 4).is_packed_byte());
    EXPECT_FALSE(Dtype::make(DtypeCode::kFloat4_e2m1fn, 4, 4).is_packed_byte()) << "two bytes: a vector";
    EXPECT_FALSE(Dtype::make(DtypeCode::kFloat, 32, 4).is_packed_byte());
    EXPECT_FALSE(Dtype::make(DtypeCode::kInt, 8, 1).is_packed_byte());
}

TEST(Dtype, BufferFormatRoundTrips) {
    for (const HostCase& c : host_cases()) {
        SCOPED_TRACE(c.format);
        EXPECT_EQ(c.d.buffer_format(), c.format);
        EXPECT_EQ(Dtype::from_buffer_format(c.format), c.d);
        EXPECT_EQ(Dtype::from_buffer_format("@" + c.format), c.d);
        // These codes have the same size in native and standard mode.
        EXPECT_EQ(Dtype::from_buffer_format("=" + c.format), c.d);
        EXPECT_EQ(Dtype::from_buffer_format(std::string(kNative) + c.format), c.d);
    }
}

TEST(Dtype, BufferFormatUnsupportedDtypes) {
    for (Dtype d : no_host_format()) {
        SCOPED_TRACE(d.name());
        EXPECT_ERROR(d.buffer_format(), unsupported, "dtype " + d.name() + " has no PEP 3118 buffer format");
    }
}

TEST(Dtype, FromBufferFormatLongIsNativeOrFourBytes) {
    // NumPy exports int64 as "l" on Linux: 8 bytes in native mode on LP64 ...
    const int native_long_bits = static_cast<int>(sizeof(long) * 8);
    EXPECT_EQ(Dtype::from_buffer_format("l"), Dtype::make(DtypeCode::kInt, native_long_bits));
    EXPECT_EQ(Dtype::from_buffer_format("@L"), Dtype::make(DtypeCode::kUInt, native_long_bits));
    if constexpr (sizeof(long) == 8) {
        EXPECT_EQ(Dtype::from_buffer_format("l"), dtypes::int64);
    }
    // ... but the struct module's standard size, 4 bytes, once any size/order prefix is given.
    EXPECT_EQ(Dtype::from_buffer_format("=l"), dtypes::int32);
    EXPECT_EQ(Dtype::from_buffer_format("=L"), dtypes::uint32);
    EXPECT_EQ(Dtype::from_buffer_format(std::string(kNative) + "l"), dtypes::int32);
    EXPECT_EQ(Dtype::from_buffer_format(std::string(kNative) + "L"), dtypes::uint32);
}

TEST(Dtype, FromBufferFormatSizeTypes) {
    const int ssize_bits = static_cast<int>(sizeof(std::ptrdiff_t) * 8);
    const int size_bits = static_cast<int>(sizeof(std::size_t) * 8);
    EXPECT_EQ(Dtype::from_buffer_format("n"), Dtype::make(DtypeCode::kInt, ssize_bits));
    EXPECT_EQ(Dtype::from_buffer_format("@N"), Dtype::make(DtypeCode::kUInt, size_bits));
    EXPECT_ERROR(Dtype::from_buffer_format("=n"), unsupported, "'n' exists only in native mode");
    EXPECT_ERROR(Dtype::from_buffer_format("<N"), unsupported, "'N' exists only in native mode");
}

TEST(Dtype, FromBufferFormatByteOrder) {
    const std::string f(kForeign);
    EXPECT_ERROR(Dtype::from_buffer_format(f + "f"), unsupported,
                 "non-native byte order in buffer format '" + f + "f'");
    EXPECT_ERROR(Dtype::from_buffer_format(f + "Zd"), unsupported, "non-native byte order");
    EXPECT_ERROR(Dtype::from_buffer_format(f + "e"), unsupported, "non-native byte order");
    if constexpr (kLE) {
        // '!' is network order: big-endian.
        EXPECT_ERROR(Dtype::from_buffer_format("!i"), unsupported, "non-native byte order in buffer format '!i'");
        EXPECT_ERROR(Dtype::from_buffer_format("!l"), unsupported, "little-endian");
    } else {
        EXPECT_EQ(Dtype::from_buffer_format("!i"), dtypes::int32);
    }
    // Byte order is meaningless for single bytes.
    EXPECT_EQ(Dtype::from_buffer_format(f + "b"), dtypes::int8);
    EXPECT_EQ(Dtype::from_buffer_format("!B"), dtypes::uint8);
    EXPECT_EQ(Dtype::from_buffer_format(f + "?"), dtypes::bool_);
}

TEST(Dtype, FromBufferFormatUnsupported) {
    for (const char* fmt : {"g",    "Zg", "<g", "x", "c", "s",  "p", "P", "2f",  "ff",  "T{f:x:}",
                            "(2)f", "Z",  "Zi", "@", "<", "f ", "w", "O", "@@f", "<=f", "3x"}) {
        SCOPED_TRACE(fmt);
        EXPECT_ERROR(Dtype::from_buffer_format(fmt), unsupported,
                     std::string("unsupported buffer format '") + fmt + "'");
    }
    EXPECT_ERROR(Dtype::from_buffer_format(""), value, "empty buffer format");
}

// ---------------------------------------------------------------------------------------------
// C++ types

static_assert(stridex::dtype_of<float>() == dtypes::float32);
static_assert(stridex::dtype_of<const double>() == dtypes::float64);

TEST(Dtype, DtypeOf) {
    EXPECT_EQ(stridex::dtype_of<std::int8_t>(), dtypes::int8);
    EXPECT_EQ(stridex::dtype_of<std::int16_t>(), dtypes::int16);
    EXPECT_EQ(stridex::dtype_of<std::int32_t>(), dtypes::int32);
    EXPECT_EQ(stridex::dtype_of<std::int64_t>(), dtypes::int64);
    EXPECT_EQ(stridex::dtype_of<long long>(), dtypes::int64);
    EXPECT_EQ(stridex::dtype_of<std::uint8_t>(), dtypes::uint8);
    EXPECT_EQ(stridex::dtype_of<std::uint16_t>(), dtypes::uint16);
    EXPECT_EQ(stridex::dtype_of<std::uint32_t>(), dtypes::uint32);
    EXPECT_EQ(stridex::dtype_of<std::uint64_t>(), dtypes::uint64);
    EXPECT_EQ(stridex::dtype_of<unsigned long long>(), dtypes::uint64);
    EXPECT_EQ(stridex::dtype_of<float>(), dtypes::float32);
    EXPECT_EQ(stridex::dtype_of<double>(), dtypes::float64);
    EXPECT_EQ(stridex::dtype_of<bool>(), dtypes::bool_);
    EXPECT_EQ(stridex::dtype_of<const volatile bool>(), dtypes::bool_);
    EXPECT_EQ(stridex::dtype_of<std::complex<float>>(), dtypes::complex64);
    EXPECT_EQ(stridex::dtype_of<std::complex<double>>(), dtypes::complex128);
}

TEST(Dtype, NamedConstantsAreValid) {
    for (Dtype d : {dtypes::int8, dtypes::int16, dtypes::int32, dtypes::int64, dtypes::uint8, dtypes::uint16,
                    dtypes::uint32, dtypes::uint64, dtypes::float16, dtypes::float32, dtypes::float64, dtypes::bfloat16,
                    dtypes::complex64, dtypes::complex128, dtypes::bool_, dtypes::float8_e4m3fn, dtypes::float8_e5m2}) {
        EXPECT_TRUE(d.valid()) << d.name();
        EXPECT_EQ(d.lanes, 1);
    }
    EXPECT_EQ(dtypes::bool_, D(DtypeCode::kBool, 8));
    EXPECT_EQ(dtypes::complex64, D(DtypeCode::kComplex, 64));
    EXPECT_EQ(dtypes::float8_e4m3fn, D(DtypeCode::kFloat8_e4m3fn, 8));
}

}  // namespace
