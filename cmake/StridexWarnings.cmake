# Warning and sanitizer flags, applied to stridex's own targets only (never to consumers).
function(stridex_set_warnings target)
  if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    target_compile_options(
      ${target}
      PRIVATE -Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wno-sign-conversion
    )
    if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
      # False positives of GCC 12 at -O2/-O3: -Wrestrict inside libstdc++'s std::string (GCC bug
      # 105329) and -Wmaybe-uninitialized through std::optional (GCC bug 80635). The sanitizer
      # build and the tests cover what the latter would find.
      target_compile_options(${target} PRIVATE -Wno-restrict -Wno-maybe-uninitialized)
    endif()
    if(STRIDEX_WERROR)
      target_compile_options(${target} PRIVATE -Werror)
    endif()
  endif()
endfunction()

if(STRIDEX_SANITIZE)
  # Applied globally so that the library, its tests and GoogleTest's main agree on the runtime.
  add_compile_options(-fsanitize=${STRIDEX_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_link_options(-fsanitize=${STRIDEX_SANITIZE})
endif()
