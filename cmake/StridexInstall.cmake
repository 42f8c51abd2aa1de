# `cmake --install` layout: headers, the static library, and a CMake package so that consumers
# write find_package(stridex CONFIG) and link stridex::stridex (or stridex::core alone), or from C
# stridex::c (libstridex_c, where it was built).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# A release wheel's extension is compiled by zig's clang against libc++ for the glibc 2.28 floor
# (tools/build-wheels), but the static libraries the wheel ships for C++ consumers must link with
# their g++ and libstdc++. So the release tool builds and installs those once with the host's
# compiler and names that tree here, and the wheel installs it in place of this build's libraries.
set(
  STRIDEX_CXX_PACKAGE_DIR
  ""
  CACHE PATH
  "Install this tree (headers, libraries, CMake package) instead of this build's"
)
if(STRIDEX_CXX_PACKAGE_DIR)
  install(DIRECTORY ${STRIDEX_CXX_PACKAGE_DIR}/ DESTINATION .)
  return()
endif()

install(DIRECTORY include/stridex DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS stridex_core stridex_cuda stridex EXPORT stridexTargets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
if(TARGET stridex_c) # the C API: stridex::c
  install(TARGETS stridex_c EXPORT stridexTargets LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
endif()
install(EXPORT stridexTargets NAMESPACE stridex:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/stridex)
configure_package_config_file(
  cmake/stridexConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/stridexConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/stridex
)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/stridexConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(
  FILES ${CMAKE_CURRENT_BINARY_DIR}/stridexConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/stridexConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/stridex
)
