// The one test seam of _stridex: a recorder that stands in for the CUDA driver on the import path.
//
// On a machine without a GPU the stream contract cannot be watched at work: no ordering reaches a
// driver, and no pointer of a __cuda_array_interface__ is device memory. While a recorder is
// installed, every ordering the import path would make goes to it instead of cuda::order, and it
// may say which device a CUDA-array-interface pointer is on. Like cuda::DriverOverride, it is
// meant for single-threaded tests; the test-only module tests/python/ext/testing.cpp installs one
// through the capsule `_stridex._install_stream_recorder`.
//
// Plain data only (Device is a trivially copyable DLDevice): the recorder lives in another extension
// module, which carries its own copy of every C++ type (and of the C++ runtime, where it is linked
// statically), so nothing with a vtable or an exception may cross.
#pragma once

#include <cstdint>

#include "stridex/device.hpp"

namespace stridex::python {

// A null slot leaves that question to the driver.
struct StreamRecorder {
    void* context;
    // `consumer` is made to wait for the work queued so far on `producer`, on `device`.
    void (*order)(void* context, std::intptr_t producer, std::intptr_t consumer, Device device) noexcept;
    // The device of CUDA-array-interface memory at `ptr` (0: the current device): writes it to
    // `out` and returns true, or returns false to let the driver answer.
    bool (*device_of_pointer)(void* context, std::uintptr_t ptr, Device* out) noexcept;
};

// Installs `recorder` (nullptr: none, the driver again) and returns the one it replaces.
using InstallStreamRecorder = const StreamRecorder* (*)(const StreamRecorder* recorder) noexcept;

// The name of the capsule (module attribute `_install_stream_recorder`); it points at an
// InstallStreamRecorder.
inline constexpr char kStreamRecorderCapsule[] = "stridex._stridex.install_stream_recorder";

}  // namespace stridex::python
