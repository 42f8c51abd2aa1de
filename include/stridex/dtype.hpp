// stridex::Dtype: an element type, bit-for-bit a DLPack DLDataType.
//
// Keeping the DLPack layout means a DLTensor's dtype field can be read or written with one copy,
// and every other protocol (NumPy typestr, PEP 3118 buffer formats, names) converts through it.
// The validity rules (which widths each code takes) live once, as a table, in src/core/dtype.cpp.
#pragma once

#include <complex>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

namespace stridex {

// DLPack 1.3 type codes (values are ABI).
enum class DtypeCode : std::uint8_t {
    kInt = 0,
    kUInt = 1,
    kFloat = 2,
    kOpaqueHandle = 3,
    kBfloat = 4,
    kComplex = 5,  // bits is the total width: complex64 is two float32
    kBool = 6,
    kFloat8_e3m4 = 7,
    kFloat8_e4m3 = 8,
    kFloat8_e4m3b11fnuz = 9,
    kFloat8_e4m3fn = 10,
    kFloat8_e4m3fnuz = 11,
    kFloat8_e5m2 = 12,
    kFloat8_e5m2fnuz = 13,
    kFloat8_e8m0fnu = 14,
    kFloat6_e2m3fn = 15,
    kFloat6_e3m2fn = 16,
    kFloat4_e2m1fn = 17,
};

struct Dtype {
    DtypeCode code;
    std::uint8_t bits;    // width of one lane
    std::uint16_t lanes;  // > 1 for vector types such as float32x4

    // Checked constructors. An unknown code is Error(unsupported) (DLPack may add codes that
    // stridex does not know yet); a known code with a width or lane count it does not take is
    // Error(type).
    static Dtype make(DtypeCode code, int bits, int lanes = 1);
    static Dtype from_raw(std::uint8_t code, std::uint8_t bits, std::uint16_t lanes);

    // An opaque element of `bytes` bytes: NumPy's void and structured dtypes ('|V12', records),
    // which no other protocol can name. opaque_handle8 x `bytes` lanes, so its itemsize is `bytes`;
    // what is inside only the producer's own description says (the Python layer keeps it). Bytes
    // outside [1, 65535] are Error(unsupported).
    static Dtype opaque_bytes(std::int64_t bytes);
    bool is_opaque_bytes() const noexcept { return code == DtypeCode::kOpaqueHandle && bits == 8; }

    bool valid() const noexcept;
    void validate() const;  // throws what make() would throw for these fields

    // Canonical name ("float32", "int4", "bfloat16", "float8_e4m3fn", "float32x4"); from_name
    // accepts exactly the canonical names, so from_name(d.name()) == d for every valid d.
    // An invalid Dtype still gets a descriptive (non-parsable) name, for error messages.
    std::string name() const;
    static Dtype from_name(std::string_view name);

    bool is_subbyte() const noexcept { return int{bits} * int{lanes} < 8; }
    // Sub-byte lanes packed into exactly one byte (float4_e2m1fn x 2: torch's float4_e2m1fn_x2).
    bool is_packed_byte() const noexcept { return lanes > 1 && bits < 8 && int{bits} * int{lanes} == 8; }
    // Bytes one element occupies when every element is byte-addressed (DLPack's size rule).
    std::int64_t itemsize() const noexcept { return (std::int64_t{bits} * lanes + 7) / 8; }
    // Bytes needed for `count` elements. Sub-byte elements are packed (DLPack's default) unless
    // subbyte_padded says each takes a whole byte (DLPack's IS_SUBBYTE_TYPE_PADDED flag).
    // A negative count or a size past int64 is Error(value).
    std::int64_t storage_bytes(std::int64_t count, bool subbyte_padded = false) const;

    // NumPy array-interface typestr ("<f4", "|b1"; "|V12" for opaque bytes). Native byte order only.
    std::string typestr() const;
    static Dtype from_typestr(std::string_view typestr);

    // PEP 3118 / struct-module format of a single element ("f", "Zd", "?").
    std::string buffer_format() const;
    static Dtype from_buffer_format(std::string_view format);

    friend constexpr bool operator==(Dtype, Dtype) = default;
};

static_assert(sizeof(Dtype) == 4, "Dtype must match DLDataType");
static_assert(std::is_trivially_copyable_v<Dtype> && std::is_standard_layout_v<Dtype>);

namespace dtypes {
inline constexpr Dtype int8{DtypeCode::kInt, 8, 1};
inline constexpr Dtype int16{DtypeCode::kInt, 16, 1};
inline constexpr Dtype int32{DtypeCode::kInt, 32, 1};
inline constexpr Dtype int64{DtypeCode::kInt, 64, 1};
inline constexpr Dtype uint8{DtypeCode::kUInt, 8, 1};
inline constexpr Dtype uint16{DtypeCode::kUInt, 16, 1};
inline constexpr Dtype uint32{DtypeCode::kUInt, 32, 1};
inline constexpr Dtype uint64{DtypeCode::kUInt, 64, 1};
inline constexpr Dtype float16{DtypeCode::kFloat, 16, 1};
inline constexpr Dtype float32{DtypeCode::kFloat, 32, 1};
inline constexpr Dtype float64{DtypeCode::kFloat, 64, 1};
inline constexpr Dtype bfloat16{DtypeCode::kBfloat, 16, 1};
inline constexpr Dtype complex64{DtypeCode::kComplex, 64, 1};
inline constexpr Dtype complex128{DtypeCode::kComplex, 128, 1};
inline constexpr Dtype bool_{DtypeCode::kBool, 8, 1};
inline constexpr Dtype float8_e4m3fn{DtypeCode::kFloat8_e4m3fn, 8, 1};
inline constexpr Dtype float8_e5m2{DtypeCode::kFloat8_e5m2, 8, 1};
}  // namespace dtypes

namespace detail {
template <class>
inline constexpr bool no_dtype_for = false;
}  // namespace detail

// The Dtype of a C++ element type. Integers map by signedness and size, so int64_t and
// long long (distinct types on LP64) both give int64.
template <class T>
constexpr Dtype dtype_of() {
    using U = std::remove_cv_t<T>;
    if constexpr (std::is_same_v<U, bool>) {
        return dtypes::bool_;
    } else if constexpr (std::is_integral_v<U>) {
        return Dtype{std::is_signed_v<U> ? DtypeCode::kInt : DtypeCode::kUInt, static_cast<std::uint8_t>(sizeof(U) * 8),
                     1};
    } else if constexpr (std::is_same_v<U, float>) {
        return dtypes::float32;
    } else if constexpr (std::is_same_v<U, double>) {
        return dtypes::float64;
    } else if constexpr (std::is_same_v<U, std::complex<float>>) {
        return dtypes::complex64;
    } else if constexpr (std::is_same_v<U, std::complex<double>>) {
        return dtypes::complex128;
    } else {
        static_assert(detail::no_dtype_for<T>,
                      "stridex::dtype_of<T>: T has no DLPack dtype (use Dtype::make for others)");
        return {};
    }
}

}  // namespace stridex
