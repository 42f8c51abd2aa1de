// The one way the C++ tests check a failure: a stridex::Error of the expected kind whose message
// says what it should.
#pragma once

#include <gtest/gtest.h>

#include <string_view>

#include "stridex/error.hpp"

namespace stridex::testing {

// Runs f; succeeds if it throws a stridex::Error of `kind` whose message contains `needle`.
template <class F>
::testing::AssertionResult throws_error(F&& f, ErrorKind kind, std::string_view needle = {}) {
    try {
        f();
    } catch (const Error& e) {
        if (e.kind() != kind)
            return ::testing::AssertionFailure()
                   << "kind " << to_string(e.kind()) << " instead of " << to_string(kind) << ": " << e.what();
        if (std::string_view(e.what()).find(needle) == std::string_view::npos)
            return ::testing::AssertionFailure() << "message '" << e.what() << "' lacks '" << needle << "'";
        return ::testing::AssertionSuccess();
    } catch (const std::exception& e) {
        return ::testing::AssertionFailure() << "other exception: " << e.what();
    }
    return ::testing::AssertionFailure() << "nothing thrown, expected a " << to_string(kind) << " error";
}

// The same as an expectation that also hands back the error, for further checks of its text.
template <class F>
Error expect_error(F&& f, ErrorKind kind, std::string_view needle = {}) {
    try {
        f();
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), kind) << e.what();
        EXPECT_NE(std::string_view(e.what()).find(needle), std::string_view::npos) << e.what() << " lacks " << needle;
        return e;
    }
    ADD_FAILURE() << "nothing thrown, expected a " << to_string(kind) << " error containing '" << needle << "'";
    return Error(kind, "");
}

}  // namespace stridex::testing

#define EXPECT_ERROR(expr, kind, needle) \
    EXPECT_TRUE(::stridex::testing::throws_error([&] { (void)(expr); }, ::stridex::ErrorKind::kind, needle))
