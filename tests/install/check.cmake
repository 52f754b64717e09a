# Installs the build BUILD into a fresh prefix, then configures, builds and runs the outside
# project beside this file against it (ctest: Install.OutsideProjectUsesVerify).
set(prefix ${WORK}/prefix)
file(REMOVE_RECURSE ${WORK})
foreach(step
        "${CMAKE_COMMAND};--install;${BUILD};--prefix;${prefix}"
        "${CMAKE_COMMAND};-S;${SOURCE};-B;${WORK}/build;-DCMAKE_PREFIX_PATH=${prefix};-DCMAKE_BUILD_TYPE=Release"
        "${CMAKE_COMMAND};--build;${WORK}/build"
        "${WORK}/build/outside")
  execute_process(COMMAND ${step} RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message("${out}${err}")
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "outside project: '${step}' failed (${status})")
  endif()
endforeach()
