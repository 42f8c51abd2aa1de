// stridex::Dtype (dtype.hpp): the table of DLPack type codes, names, typestrs and buffer formats.
#include "stridex/dtype.hpp"

#include <array>
#include <bit>
#include <charconv>
#include <cstddef>
#include <limits>
#include <optional>

#include "stridex/error.hpp"

namespace stridex {
namespace {

// ---------------------------------------------------------------------------------------------
// The rule table: one row per DLPack code, in code order. Validation, naming and parsing all
// read it, so a new code is one new row.
struct CodeRule {
    DtypeCode code;
    std::string_view stem;      // name without the width: "float", "float8_e4m3fn"
    bool width_in_name;         // "float32" spells its width; "bool" and fp8/6/4 names imply it
    bool any_byte_multiple;     // opaque handles: any positive multiple of 8 bits
    std::array<int, 7> widths;  // the widths allowed otherwise; unused slots are 0
};

constexpr std::array<CodeRule, 18> kRules{{
    // code                           stem                   width in name  any bytes  widths
    {DtypeCode::kInt, "int", true, false, {1, 2, 4, 8, 16, 32, 64}},
    {DtypeCode::kUInt, "uint", true, false, {1, 2, 4, 8, 16, 32, 64}},
    {DtypeCode::kFloat, "float", true, false, {16, 32, 64}},
    {DtypeCode::kOpaqueHandle, "opaque_handle", true, true, {}},
    {DtypeCode::kBfloat, "bfloat", true, false, {16}},
    {DtypeCode::kComplex, "complex", true, false, {32, 64, 128}},
    {DtypeCode::kBool, "bool", false, false, {8}},
    {DtypeCode::kFloat8_e3m4, "float8_e3m4", false, false, {8}},
    {DtypeCode::kFloat8_e4m3, "float8_e4m3", false, false, {8}},
    {DtypeCode::kFloat8_e4m3b11fnuz, "float8_e4m3b11fnuz", false, false, {8}},
    {DtypeCode::kFloat8_e4m3fn, "float8_e4m3fn", false, false, {8}},
    {DtypeCode::kFloat8_e4m3fnuz, "float8_e4m3fnuz", false, false, {8}},
    {DtypeCode::kFloat8_e5m2, "float8_e5m2", false, false, {8}},
    {DtypeCode::kFloat8_e5m2fnuz, "float8_e5m2fnuz", false, false, {8}},
    {DtypeCode::kFloat8_e8m0fnu, "float8_e8m0fnu", false, false, {8}},
    {DtypeCode::kFloat6_e2m3fn, "float6_e2m3fn", false, false, {6}},
    {DtypeCode::kFloat6_e3m2fn, "float6_e3m2fn", false, false, {6}},
    {DtypeCode::kFloat4_e2m1fn, "float4_e2m1fn", false, false, {4}},
}};

// Lookups index the table by code, so its order must be the code order.
constexpr bool rules_in_code_order() {
    for (std::size_t i = 0; i < kRules.size(); ++i)
        if (static_cast<std::size_t>(kRules[i].code) != i) return false;
    return true;
}
static_assert(rules_in_code_order());

constexpr int kMaxBits = std::numeric_limits<std::uint8_t>::max();
constexpr int kMaxLanes = std::numeric_limits<std::uint16_t>::max();

const CodeRule* rule_for(int code) noexcept {
    if (code < 0 || code >= static_cast<int>(kRules.size())) return nullptr;
    return &kRules[static_cast<std::size_t>(code)];
}

bool width_allowed(const CodeRule& rule, int bits) noexcept {
    // The range check first: make() takes int, and a width must also fit DLDataType's uint8.
    if (bits <= 0 || bits > kMaxBits) return false;
    if (rule.any_byte_multiple) return bits % 8 == 0;
    for (int w : rule.widths)
        if (w == bits) return true;
    return false;
}

// "1, 2, 4, 8, 16, 32 or 64" for error messages, built from the table so it cannot drift.
std::string widths_text(const CodeRule& rule) {
    if (rule.any_byte_multiple) return "a positive multiple of 8";
    std::string text;
    int count = 0;
    for (int w : rule.widths) count += w != 0;
    for (int i = 0; i < count; ++i) {
        if (i > 0) text += i + 1 == count ? " or " : ", ";
        text += std::to_string(rule.widths[static_cast<std::size_t>(i)]);
    }
    return text;
}

enum class Problem { none, unknown_code, bad_bits, bad_lanes };

// The validity rule, on ints so that make() can reject widths that would not survive narrowing.
Problem classify(int code, int bits, int lanes) noexcept {
    const CodeRule* rule = rule_for(code);
    if (rule == nullptr) return Problem::unknown_code;
    if (!width_allowed(*rule, bits)) return Problem::bad_bits;
    if (lanes < 1 || lanes > kMaxLanes) return Problem::bad_lanes;
    return Problem::none;
}

std::string canonical_name(const CodeRule& rule, int bits, int lanes) {
    std::string out(rule.stem);
    if (rule.width_in_name) out += std::to_string(bits);
    if (lanes != 1) out += "x" + std::to_string(lanes);
    return out;
}

[[noreturn]] void throw_invalid(Problem problem, int code, int bits, int lanes) {
    const CodeRule* rule = rule_for(code);
    switch (problem) {
        case Problem::unknown_code:
            fail(ErrorKind::unsupported, "unsupported dtype code ", code, " (stridex knows DLPack codes 0 to ",
                 kRules.size() - 1, ")");
        case Problem::bad_bits:
            fail(ErrorKind::type, "invalid dtype: ", rule->stem, " with ", bits, " bits (", rule->stem, " takes ",
                 widths_text(*rule), ")");
        case Problem::bad_lanes:
            fail(ErrorKind::type, "invalid dtype: ", canonical_name(*rule, bits, 1), " with ", lanes,
                 " lanes (lanes must be 1 to ", kMaxLanes, ")");
        case Problem::none: break;
    }
    fail(ErrorKind::value, "internal error: throw_invalid() called for a valid dtype");
}

Dtype checked(int code, int bits, int lanes) {
    if (Problem p = classify(code, bits, lanes); p != Problem::none) throw_invalid(p, code, bits, lanes);
    return Dtype{static_cast<DtypeCode>(code), static_cast<std::uint8_t>(bits), static_cast<std::uint16_t>(lanes)};
}

// Parses a canonical decimal: digits only, no sign, no leading zero, within `max`.
std::optional<int> parse_canonical_int(std::string_view text, int max) noexcept {
    if (text.empty() || text[0] < '0' || text[0] > '9' || (text.size() > 1 && text[0] == '0')) return std::nullopt;
    int value = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc{} || end != text.data() + text.size() || value > max) return std::nullopt;
    return value;
}

// ---------------------------------------------------------------------------------------------
// Host interchange formats. NumPy and PEP 3118 describe the same small set of scalar types; one
// row per type keeps typestr and buffer format in step.
struct HostFormat {
    Dtype dtype;
    std::string_view typestr;  // without the byte-order character
    std::string_view buffer_format;
};

constexpr std::array<HostFormat, 14> kHostFormats{{
    {dtypes::bool_, "b1", "?"},
    {dtypes::int8, "i1", "b"},
    {dtypes::uint8, "u1", "B"},
    {dtypes::int16, "i2", "h"},
    {dtypes::uint16, "u2", "H"},
    {dtypes::int32, "i4", "i"},
    {dtypes::uint32, "u4", "I"},
    {dtypes::int64, "i8", "q"},
    {dtypes::uint64, "u8", "Q"},
    {dtypes::float16, "f2", "e"},
    {dtypes::float32, "f4", "f"},
    {dtypes::float64, "f8", "d"},
    {dtypes::complex64, "c8", "Zf"},
    {dtypes::complex128, "c16", "Zd"},
}};

const HostFormat* host_format_of(Dtype d) noexcept {
    for (const HostFormat& f : kHostFormats)
        if (f.dtype == d) return &f;
    return nullptr;
}

constexpr bool kLittleEndian = std::endian::native == std::endian::little;
static_assert(kLittleEndian || std::endian::native == std::endian::big, "mixed-endian hosts are not supported");

// The explicit byte-order character of the other order (typestr and buffer formats agree on it).
constexpr char kForeignOrder = kLittleEndian ? '>' : '<';

// One PEP 3118 single-character integer/float code. Native mode ('@' or no prefix) uses the C
// sizes of this compiler; standard mode ('=', '<', '>', '!') uses the struct module's fixed sizes.
struct FormatCode {
    char code;
    DtypeCode dtype_code;
    int standard_bytes;  // 0: exists only in native mode ('n', 'N')
    int native_bytes;
};

constexpr std::array<FormatCode, 16> kFormatCodes{{
    {'?', DtypeCode::kBool, 1, static_cast<int>(sizeof(bool))},
    {'b', DtypeCode::kInt, 1, 1},
    {'B', DtypeCode::kUInt, 1, 1},
    {'h', DtypeCode::kInt, 2, static_cast<int>(sizeof(short))},
    {'H', DtypeCode::kUInt, 2, static_cast<int>(sizeof(unsigned short))},
    {'i', DtypeCode::kInt, 4, static_cast<int>(sizeof(int))},
    {'I', DtypeCode::kUInt, 4, static_cast<int>(sizeof(unsigned int))},
    // 'l' is why native and standard sizes differ in practice: 8 bytes natively on LP64 (what
    // NumPy exports for int64 on Linux), 4 bytes with '=', '<', '>' or '!'.
    {'l', DtypeCode::kInt, 4, static_cast<int>(sizeof(long))},
    {'L', DtypeCode::kUInt, 4, static_cast<int>(sizeof(unsigned long))},
    {'q', DtypeCode::kInt, 8, static_cast<int>(sizeof(long long))},
    {'Q', DtypeCode::kUInt, 8, static_cast<int>(sizeof(unsigned long long))},
    {'n', DtypeCode::kInt, 0, static_cast<int>(sizeof(std::ptrdiff_t))},
    {'N', DtypeCode::kUInt, 0, static_cast<int>(sizeof(std::size_t))},
    {'e', DtypeCode::kFloat, 2, 2},
    {'f', DtypeCode::kFloat, 4, static_cast<int>(sizeof(float))},
    {'d', DtypeCode::kFloat, 8, static_cast<int>(sizeof(double))},
}};

}  // namespace

// ---------------------------------------------------------------------------------------------
// Construction and validity

Dtype Dtype::make(DtypeCode code, int bits, int lanes) { return checked(static_cast<int>(code), bits, lanes); }

Dtype Dtype::from_raw(std::uint8_t code, std::uint8_t bits, std::uint16_t lanes) { return checked(code, bits, lanes); }

bool Dtype::valid() const noexcept { return classify(static_cast<int>(code), bits, lanes) == Problem::none; }

void Dtype::validate() const { checked(static_cast<int>(code), bits, lanes); }

// ---------------------------------------------------------------------------------------------
// Names

std::string Dtype::name() const {
    if (!valid())
        return "dtype(code=" + std::to_string(static_cast<int>(code)) + ", bits=" + std::to_string(bits) +
               ", lanes=" + std::to_string(lanes) + ")";
    return canonical_name(*rule_for(static_cast<int>(code)), bits, lanes);
}

Dtype Dtype::from_name(std::string_view name) {
    // Several stems prefix others ("float" / "float8_e4m3" / "float8_e4m3fn"), so try every row
    // and keep the one that consumes the whole name; canonical names are unique, so at most one does.
    for (const CodeRule& rule : kRules) {
        if (!name.starts_with(rule.stem)) continue;
        std::string_view rest = name.substr(rule.stem.size());
        std::string_view lanes_text;
        const auto x = rest.find('x');
        if (x != std::string_view::npos) {
            lanes_text = rest.substr(x + 1);
            rest = rest.substr(0, x);
        }
        std::optional<int> bits = rule.widths[0];
        if (rule.width_in_name) {
            bits = parse_canonical_int(rest, kMaxBits);
        } else if (!rest.empty()) {
            continue;
        }
        std::optional<int> lanes = 1;
        if (x != std::string_view::npos) {
            lanes = parse_canonical_int(lanes_text, kMaxLanes);
            if (lanes == 1) continue;  // "x1" is not canonical: one lane has no suffix
        }
        if (!bits || !lanes) continue;
        // Well-formed but invalid ("float8", "int3") gets the precise message from the rules.
        return checked(static_cast<int>(rule.code), *bits, *lanes);
    }
    fail(ErrorKind::type, "unknown dtype name '", excerpt(name),
         "' (expected a name such as int32, uint4, float16, bfloat16, complex64, bool, float8_e4m3fn, "
         "opaque_handle64, optionally followed by x<lanes> as in float32x4)");
}

// ---------------------------------------------------------------------------------------------
// Sizes

std::int64_t Dtype::storage_bytes(std::int64_t count, bool subbyte_padded) const {
    constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
    validate();  // the arithmetic below relies on a non-zero width
    if (count < 0) fail(ErrorKind::value, "element count must be >= 0, found ", count);
    if (is_subbyte() && !subbyte_padded) {
        // ceil(count * width / 8) without forming count * width, which could overflow: whole
        // groups of 8 elements take exactly `width` bytes and the remainder rounds up. The result
        // is at most count (width < 8), so it always fits.
        const std::int64_t width = std::int64_t{bits} * lanes;
        return count / 8 * width + (count % 8 * width + 7) / 8;
    }
    const std::int64_t size = itemsize();
    if (count > kMax / size)
        fail(ErrorKind::value, "storage size of ", count, " ", name(), " elements (", size,
             " bytes each) overflows int64");
    return count * size;
}

// ---------------------------------------------------------------------------------------------
// NumPy typestr

Dtype Dtype::opaque_bytes(std::int64_t bytes) {
    if (bytes < 1 || bytes > kMaxLanes)
        fail(ErrorKind::unsupported, "an opaque element of ", bytes, " bytes (stridex takes 1 to ", kMaxLanes, ")");
    return Dtype{DtypeCode::kOpaqueHandle, 8, static_cast<std::uint16_t>(bytes)};
}

std::string Dtype::typestr() const {
    if (is_opaque_bytes()) return "|V" + std::to_string(itemsize());
    const HostFormat* f = host_format_of(*this);
    if (f == nullptr) fail(ErrorKind::unsupported, "dtype ", name(), " has no NumPy typestr");
    // NumPy marks single bytes as order-free ('|') and everything else with the native order.
    const char order = itemsize() == 1 ? '|' : (kLittleEndian ? '<' : '>');
    return order + std::string(f->typestr);
}

Dtype Dtype::from_typestr(std::string_view typestr) {
    if (typestr.size() < 3 || std::string_view("<>|=").find(typestr[0]) == std::string_view::npos)
        fail(ErrorKind::value, "malformed typestr '", excerpt(typestr),
             "' (expected a byte order '<', '>', '|' or '=', a kind letter and a byte size, as in '<f4')");
    const char order = typestr[0];
    const std::string_view body = typestr.substr(1);
    for (const HostFormat& f : kHostFormats) {
        if (f.typestr != body) continue;
        // Byte order means nothing for single bytes (NumPy itself turns '>i1' into '|i1').
        if (order == kForeignOrder && f.dtype.itemsize() > 1)
            fail(ErrorKind::unsupported, "non-native byte order in typestr '", excerpt(typestr), "' (this host is ",
                 kLittleEndian ? "little" : "big", "-endian)");
        return f.dtype;
    }
    // Not ours: tell "well-formed but unsupported" (datetimes, strings, long double) from garbage.
    int bytes = 0;
    const auto [end, ec] = std::from_chars(body.data() + 1, body.data() + body.size(), bytes);
    const bool well_formed = ec == std::errc{} && end == body.data() + body.size() && bytes > 0 &&
                             std::string_view("biufcmMOSUV").find(body[0]) != std::string_view::npos;
    if (!well_formed)
        fail(ErrorKind::value, "malformed typestr '", excerpt(typestr),
             "' (expected a kind letter and a byte size, as in '<f4')");
    // Void and structured elements: opaque bytes of that size (byte order means nothing for them).
    if (body[0] == 'V') return opaque_bytes(bytes);
    fail(ErrorKind::unsupported, "unsupported typestr '", excerpt(typestr),
         "' (stridex takes b1, i1-i8, u1-u8, f2, f4, f8, c8, c16 and V<n>)");
}

// ---------------------------------------------------------------------------------------------
// PEP 3118 buffer formats

std::string Dtype::buffer_format() const {
    const HostFormat* f = host_format_of(*this);
    if (f == nullptr) fail(ErrorKind::unsupported, "dtype ", name(), " has no PEP 3118 buffer format");
    return std::string(f->buffer_format);
}

Dtype Dtype::from_buffer_format(std::string_view format) {
    if (format.empty()) fail(ErrorKind::value, "empty buffer format");
    std::string_view body = format;
    bool native_sizes = true;  // '@' or no prefix: C sizes of this compiler
    bool foreign_order = false;
    if (std::string_view("@=<>!").find(body[0]) != std::string_view::npos) {
        native_sizes = body[0] == '@';
        // '!' is network order, i.e. big-endian.
        foreign_order = body[0] == kForeignOrder || (body[0] == '!' && kLittleEndian);
        body.remove_prefix(1);
    }
    std::optional<Dtype> found;
    if (body == "Zf") found = dtypes::complex64;
    if (body == "Zd") found = dtypes::complex128;
    for (const FormatCode& fc : kFormatCodes) {
        if (found || body.size() != 1 || fc.code != body[0]) continue;
        const int bytes = native_sizes ? fc.native_bytes : fc.standard_bytes;
        if (bytes == 0)
            fail(ErrorKind::unsupported, "buffer format '", excerpt(format), "': '", fc.code,
                 "' exists only in native mode (no prefix or '@')");
        found = make(fc.dtype_code, bytes * 8);
    }
    // Long double ('g', 'Zg'), structs, padding, repeat counts, pointers, strings...
    if (!found)
        fail(ErrorKind::unsupported, "unsupported buffer format '", excerpt(format),
             "' (stridex takes one of ? b B h H i I l L q Q n N e f d Zf Zd, with an optional prefix @ = < > !)");
    // Byte order means nothing for single bytes.
    if (foreign_order && found->itemsize() > 1)
        fail(ErrorKind::unsupported, "non-native byte order in buffer format '", excerpt(format), "' (this host is ",
             kLittleEndian ? "little" : "big", "-endian)");
    return *found;
}

}  // namespace stridex
