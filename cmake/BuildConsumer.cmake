# ctest script: build examples/cpp-consumer against stridex the way a user would, then run it.
#   MODE=find_package     install stridex into WORK/prefix, then find_package(stridex CONFIG)
#   MODE=add_subdirectory the consumer adds the stridex source tree itself
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}")
  endif()
endfunction()

file(REMOVE_RECURSE ${WORK})
if(MODE STREQUAL "find_package")
  run(
    ${CMAKE_COMMAND}
    -S
    ${STRIDEX_SOURCE}
    -B
    ${WORK}/stridex-build
    -G
    ${GENERATOR}
    -DSTRIDEX_BUILD_TESTS=OFF
    -DCMAKE_INSTALL_PREFIX=${WORK}/prefix
  )
  run(${CMAKE_COMMAND} --build ${WORK}/stridex-build)
  run(${CMAKE_COMMAND} --install ${WORK}/stridex-build)
  run(
    ${CMAKE_COMMAND}
    -S
    ${CONSUMER_SOURCE}
    -B
    ${WORK}/consumer-build
    -G
    ${GENERATOR}
    -DCMAKE_PREFIX_PATH=${WORK}/prefix
  )
else()
  run(
    ${CMAKE_COMMAND}
    -S
    ${CONSUMER_SOURCE}
    -B
    ${WORK}/consumer-build
    -G
    ${GENERATOR}
    -DSTRIDEX_SOURCE_DIR=${STRIDEX_SOURCE}
  )
endif()
run(${CMAKE_COMMAND} --build ${WORK}/consumer-build)
run(${WORK}/consumer-build/cpp-consumer)
