# The copy kernels (src/cuda/kernels/copy_kernels.cu), compiled by nvcc into one fatbin that is
# embedded in stridex_cuda and loaded through the driver API at run time: no CUDA runtime, no
# link-time CUDA dependency. Every build carries them unless STRIDEX_CUDA_KERNELS is OFF: without
# them a GPU copy of a transposed or permuted layout is refused (docs/copy.md, "Kernel image").
#
# Which nvcc (the first found):
#   1. STRIDEX_NVCC;
#   2. in a wheel build (scikit-build-core), the nvcc of the PyPI package nvidia-cuda-nvcc in the
#      Python environment that builds it: pyproject.toml makes it a build requirement on Linux, so
#      `pip install .`, the sdist and the release wheels compile the same image on a machine
#      without a CUDA toolkit;
#   3. a CUDA toolkit's: CUDA_PATH, CUDA_HOME, /usr/local/cuda, PATH.
# None found and STRIDEX_CUDA_KERNELS ON: a configure error that says how to get one or opt out.
#
# Defines `stridex_copy_fatbin_cpp` (the generated source to compile into stridex_cuda) and
# `stridex_kernels_compiler` ("nvcc 13.0.88", empty without kernels).

option(STRIDEX_CUDA_KERNELS "Embed the CUDA copy kernels (needs nvcc; OFF builds without them)" ON)
set(
  STRIDEX_CUDA_ARCHITECTURES
  ""
  CACHE STRING
  "SASS targets of the copy kernels, e.g. 80;90 (empty: each of STRIDEX_DEFAULT_CUDA_ARCHITECTURES this nvcc has); PTX of the last is added"
)
set(STRIDEX_NVCC "" CACHE FILEPATH "nvcc for the copy kernels (empty: found as cmake/StridexKernels.cmake says)")

# The GPUs users run, oldest first: Volta (CUDA 12 toolkits only; CUDA 13 dropped it), Turing,
# A100, Ampere consumer and A10, Ada, Hopper, Blackwell datacenter (B200, GB200), Blackwell consumer
# and RTX PRO. A GPU of the same major version and a higher minor one runs the SASS below it
# (sm_87 and sm_88 run sm_86's, sm_103 sm_100's, sm_121 sm_120's); newer majors JIT the PTX of the last.
set(
  STRIDEX_DEFAULT_CUDA_ARCHITECTURES
  70
  75
  80
  86
  89
  90
  100
  120
)

set(stridex_copy_fatbin_cpp ${CMAKE_CURRENT_BINARY_DIR}/stridex_copy_fatbin.cpp)
set(stridex_kernels_compiler "")

if(STRIDEX_CUDA_KERNELS AND NOT STRIDEX_NVCC AND SKBUILD AND Python_EXECUTABLE)
  # The nvidia-* wheels share the namespace package `nvidia`; CUDA 13's nvcc lives in nvidia/cu13/bin.
  execute_process(
    COMMAND
      ${Python_EXECUTABLE} -c
      "import importlib.util, os\nspec = importlib.util.find_spec('nvidia')\nfor d in (spec.submodule_search_locations or []) if spec else []:\n    p = os.path.join(d, 'cu13', 'bin', 'nvcc')\n    if os.path.isfile(p):\n        print(p)\n        break"
    OUTPUT_VARIABLE pypi_nvcc
    OUTPUT_STRIP_TRAILING_WHITESPACE
    ERROR_QUIET
  )
  if(pypi_nvcc)
    set(STRIDEX_NVCC "${pypi_nvcc}")
  endif()
endif()
if(STRIDEX_CUDA_KERNELS AND NOT STRIDEX_NVCC)
  find_program(STRIDEX_NVCC_FOUND nvcc HINTS ENV CUDA_PATH ENV CUDA_HOME /usr/local/cuda PATH_SUFFIXES bin)
  if(STRIDEX_NVCC_FOUND)
    set(STRIDEX_NVCC "${STRIDEX_NVCC_FOUND}")
  endif()
endif()
if(STRIDEX_CUDA_KERNELS AND NOT STRIDEX_NVCC)
  message(
    FATAL_ERROR
    "stridex: no nvcc for the CUDA copy kernels. Without them a GPU copy of a transposed or permuted "
    "layout is refused. Give one (-DSTRIDEX_NVCC=/path/to/nvcc, or a CUDA toolkit on PATH or in CUDA_PATH; "
    "`pip install nvidia-cuda-nvcc~=13.0.0 nvidia-cuda-crt~=13.0.0 nvidia-nvvm~=13.0.0 nvidia-cuda-runtime~=13.0.0` "
    "brings one that a wheel build finds), or build without them: -DSTRIDEX_CUDA_KERNELS=OFF."
  )
endif()

if(STRIDEX_CUDA_KERNELS)
  execute_process(
    COMMAND ${STRIDEX_NVCC} --version
    OUTPUT_VARIABLE nvcc_version
    RESULT_VARIABLE nvcc_status
    ERROR_QUIET
  )
  if(NOT nvcc_status EQUAL 0 OR NOT nvcc_version MATCHES "V([0-9]+\\.[0-9]+\\.[0-9]+)")
    message(FATAL_ERROR "stridex: ${STRIDEX_NVCC} --version failed or named no version: ${nvcc_version}")
  endif()
  set(stridex_kernels_compiler "nvcc ${CMAKE_MATCH_1}")
  set(archs ${STRIDEX_CUDA_ARCHITECTURES})
  if(NOT archs)
    # The default list, less what this nvcc cannot build (CUDA 13 has no sm_70, CUDA 12 before 12.8
    # no sm_100 or sm_120).
    execute_process(COMMAND ${STRIDEX_NVCC} --list-gpu-code OUTPUT_VARIABLE codes ERROR_QUIET)
    string(REGEX MATCHALL "sm_[0-9]+" codes "${codes}")
    foreach(arch IN LISTS STRIDEX_DEFAULT_CUDA_ARCHITECTURES)
      if("sm_${arch}" IN_LIST codes)
        list(APPEND archs ${arch})
      endif()
    endforeach()
    if(NOT archs)
      message(FATAL_ERROR "stridex: ${STRIDEX_NVCC} builds none of ${STRIDEX_DEFAULT_CUDA_ARCHITECTURES}")
    endif()
  endif()
  set(fatbin ${CMAKE_CURRENT_BINARY_DIR}/stridex_copy_kernels.fatbin)
  set(gencode "")
  foreach(arch IN LISTS archs)
    list(APPEND gencode -gencode arch=compute_${arch},code=sm_${arch})
    set(last_arch ${arch})
  endforeach()
  list(APPEND gencode -gencode arch=compute_${last_arch},code=compute_${last_arch})
  # -compress-all: the SASS of eight architectures is 5 MB as is, under 1 MB compressed; the driver
  # decompresses it in cuModuleLoadData.
  add_custom_command(
    OUTPUT ${fatbin}
    COMMAND
      ${STRIDEX_NVCC} -std=c++17 -O3 -fatbin -Xfatbin=-compress-all ${gencode} -o ${fatbin}
      ${CMAKE_CURRENT_SOURCE_DIR}/src/cuda/kernels/copy_kernels.cu
    DEPENDS src/cuda/kernels/copy_kernels.cu src/cuda/kernels/copy_abi.h
    COMMENT "nvcc: copy kernels for sm_${archs}"
    VERBATIM
  )
  add_custom_command(
    OUTPUT ${stridex_copy_fatbin_cpp}
    COMMAND
      ${CMAKE_COMMAND} -DINPUT=${fatbin} -DOUTPUT=${stridex_copy_fatbin_cpp} -DSYMBOL=copy_fatbin -P
      ${CMAKE_CURRENT_SOURCE_DIR}/cmake/EmbedFile.cmake
    DEPENDS ${fatbin} cmake/EmbedFile.cmake
    VERBATIM
  )
  message(STATUS "stridex: copy kernels compiled by ${STRIDEX_NVCC} (${stridex_kernels_compiler}) for sm_${archs}")
else()
  add_custom_command(
    OUTPUT ${stridex_copy_fatbin_cpp}
    COMMAND
      ${CMAKE_COMMAND} -DINPUT= -DOUTPUT=${stridex_copy_fatbin_cpp} -DSYMBOL=copy_fatbin -P
      ${CMAKE_CURRENT_SOURCE_DIR}/cmake/EmbedFile.cmake
    DEPENDS cmake/EmbedFile.cmake
    VERBATIM
  )
  message(
    STATUS
    "stridex: STRIDEX_CUDA_KERNELS=OFF: no copy kernels, device copies use driver memcpy where layouts allow"
  )
endif()
