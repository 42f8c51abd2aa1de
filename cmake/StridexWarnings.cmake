# Warning and sanitizer flags, applied to stridex's own targets only (never to consumers).
function(stridex_set_warnings target)
  if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow -Wconversion
      -Wno-sign-conversion)
    if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
      # GCC 12 reports -Wrestrict inside libstdc++'s std::string at -O2/-O3 (GCC bug 105329).
      target_compile_options(${target} PRIVATE -Wno-restrict)
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
