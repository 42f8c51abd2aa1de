// The kernel image: the fatbin container read entry by entry (synthetic images, each malformation
// refused by name), and the image this build embeds (cmake/StridexKernels.cmake) holding SASS for
// the default architectures its nvcc has, plus PTX of the newest.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <vector>

#include "expect_error.hpp"
#include "stridex/cuda/kernels.hpp"

namespace {

using stridex::ErrorKind;
using stridex::cuda::KernelImage;
using stridex::cuda::parse_fatbin;
using stridex::testing::throws_error;

template <typename T>
void put(std::vector<unsigned char>& bytes, std::size_t at, T value) {
    if (bytes.size() < at + sizeof value) bytes.resize(at + sizeof value);
    std::memcpy(bytes.data() + at, &value, sizeof value);
}

// A fatbin of entries (kind, arch, payload bytes), laid out as nvcc writes it.
std::vector<unsigned char> fatbin(const std::vector<std::array<int, 3>>& entries) {
    std::vector<unsigned char> bytes(16);
    put<std::uint32_t>(bytes, 0, 0xBA55ED50);
    put<std::uint16_t>(bytes, 4, 1);
    put<std::uint16_t>(bytes, 6, 16);
    for (const auto& [kind, arch, payload] : entries) {
        const std::size_t at = bytes.size();
        put<std::uint16_t>(bytes, at, static_cast<std::uint16_t>(kind));
        put<std::uint32_t>(bytes, at + 4, 64);
        put<std::uint64_t>(bytes, at + 8, static_cast<std::uint64_t>(payload));
        put<std::uint32_t>(bytes, at + 28, static_cast<std::uint32_t>(arch));
        bytes.resize(at + 64 + static_cast<std::size_t>(payload), 0xAB);
    }
    put<std::uint64_t>(bytes, 8, bytes.size() - 16);
    return bytes;
}

TEST(KernelImage, ReadsEveryEntryOfAFatbin) {
    const auto bytes = fatbin({{2, 90, 100}, {1, 120, 7}, {2, 75, 0}, {2, 120, 33}});
    const KernelImage image = parse_fatbin(bytes);
    EXPECT_EQ(image.bytes, bytes.size());
    EXPECT_EQ(image.sass, (std::vector<int>{75, 90, 120}));
    EXPECT_EQ(image.ptx, (std::vector<int>{120}));
}

TEST(KernelImage, RefusesWhatIsNoFatbin) {
    std::vector<unsigned char> bytes = fatbin({{2, 90, 8}});
    bytes[0] ^= 1;
    EXPECT_TRUE(throws_error([&] { parse_fatbin(bytes); }, ErrorKind::value, "without the magic 0xBA55ED50"));
    EXPECT_TRUE(throws_error([&] { parse_fatbin({}); }, ErrorKind::value, "0 bytes"));
}

TEST(KernelImage, RefusesEntriesRunningPastTheEnd) {
    std::vector<unsigned char> bytes = fatbin({{2, 90, 8}});
    put<std::uint64_t>(bytes, 16 + 8, 9);  // the payload one byte longer than what is there
    EXPECT_TRUE(throws_error([&] { parse_fatbin(bytes); }, ErrorKind::value, "entry at byte 16 runs past the end"));
    bytes = fatbin({{2, 90, 8}});
    put<std::uint64_t>(bytes, 8, bytes.size());  // entries said to run past the image
    EXPECT_TRUE(throws_error([&] { parse_fatbin(bytes); }, ErrorKind::value, "bytes of entries at byte 16"));
    bytes = fatbin({{2, 90, 8}});
    bytes.resize(bytes.size() + 8);
    put<std::uint64_t>(bytes, 8, bytes.size() - 16);  // 8 bytes after the entry: no room for a header
    EXPECT_TRUE(throws_error([&] { parse_fatbin(bytes); }, ErrorKind::value, "cut short"));
}

// The test command builds with the CUDA 13 toolkit: SASS for sm_75 to sm_120, PTX of sm_120.
TEST(KernelImage, ThisBuildEmbedsTheDefaultArchitectures) {
    const KernelImage image = stridex::cuda::kernel_image();
    ASSERT_GT(image.bytes, 0u) << "built without kernels";
    EXPECT_EQ(image.compiler.rfind("nvcc ", 0), 0u) << image.compiler;
    for (int arch : {75, 80, 86, 89, 90, 100, 120})
        EXPECT_NE(std::find(image.sass.begin(), image.sass.end(), arch), image.sass.end()) << "no sm_" << arch;
    ASSERT_FALSE(image.ptx.empty());
    EXPECT_EQ(image.ptx.back(), image.sass.back());  // PTX of the newest
}

}  // namespace
