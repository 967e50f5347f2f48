# Package.FindPackageCxx (cmake -P): install the build into a fresh prefix,
# then configure, build and run tests/consumer/cxx, a project of its own that
# finds it with find_package(ropegen CONFIG REQUIRED). Checks on the way that
# ropegen::ropegen brings the installed include/ only: no Halide include
# directory and no source tree on the consumer's compile lines, no Halide on
# its link line.
#   -DBUILD_DIR= -DCONSUMER_DIR= -DWORK_DIR= -DGENERATOR= -DCXX= -DBUILD_TYPE=
#   -DHALIDE_INCLUDE_DIR= -DSOURCE_DIR= [-DCXX_FLAGS= -DEXE_LINKER_FLAGS= -DLAUNCHER=]
cmake_minimum_required(VERSION 3.28)
foreach(var BUILD_DIR CONSUMER_DIR WORK_DIR GENERATOR CXX HALIDE_INCLUDE_DIR SOURCE_DIR)
  if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
    message(FATAL_ERROR "find_package_test.cmake: -D${var}= is required")
  endif()
endforeach()

# step(<what> <command...>): run it, fail with its output if it fails.
function(step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${out}\n${err}")
  endif()
  message("${what}: ok")
  set(step_output "${out}${err}" PARENT_SCOPE)
endfunction()

set(prefix "${WORK_DIR}/prefix")
file(REMOVE_RECURSE "${WORK_DIR}")
step("install into ${prefix}" "${CMAKE_COMMAND}" --install "${BUILD_DIR}" --prefix "${prefix}")

# The exported target: the prefix's include/ only, and no link dependencies.
file(GLOB_RECURSE targets_file "${prefix}/*/ropegen-targets.cmake")
if(NOT targets_file)
  message(FATAL_ERROR "no ropegen-targets.cmake under ${prefix}")
endif()
file(READ "${targets_file}" exported)
if(NOT exported MATCHES "INTERFACE_INCLUDE_DIRECTORIES \"([^\"]*)\"")
  message(FATAL_ERROR "ropegen::ropegen has no INTERFACE_INCLUDE_DIRECTORIES in ${targets_file}")
endif()
if(NOT CMAKE_MATCH_1 STREQUAL "\${_IMPORT_PREFIX}/include")
  message(FATAL_ERROR "ropegen::ropegen's include directories are '${CMAKE_MATCH_1}', not the prefix's include/ alone")
endif()
if(exported MATCHES "INTERFACE_LINK_LIBRARIES|Halide|yaml|fmt::")
  message(FATAL_ERROR "ropegen::ropegen exports a dependency ('${CMAKE_MATCH_0}' in ${targets_file})")
endif()

set(options -G "${GENERATOR}" "-DCMAKE_PREFIX_PATH=${prefix}" "-DCMAKE_CXX_COMPILER=${CXX}"
    "-DCMAKE_BUILD_TYPE=${BUILD_TYPE}" -DCMAKE_EXPORT_COMPILE_COMMANDS=ON
    "-DCMAKE_CXX_FLAGS=${CXX_FLAGS}" "-DCMAKE_EXE_LINKER_FLAGS=${EXE_LINKER_FLAGS}")
if(LAUNCHER)
  list(APPEND options "-DCMAKE_CXX_COMPILER_LAUNCHER=${LAUNCHER}")
endif()
set(build "${WORK_DIR}/build")
step("configure the consumer" "${CMAKE_COMMAND}" -S "${CONSUMER_DIR}" -B "${build}" ${options})
step("build the consumer" "${CMAKE_COMMAND}" --build "${build}" --verbose)
set(build_log "${step_output}")

# What the consumer was compiled and linked with.
file(READ "${build}/compile_commands.json" commands)
string(REGEX MATCHALL "(-I|-isystem )[^ \"]+" include_flags "${commands}")
foreach(flag IN LISTS include_flags)
  string(REGEX REPLACE "^(-I|-isystem )" "" dir "${flag}")
  if(NOT dir STREQUAL "${prefix}/include")
    message(FATAL_ERROR "the consumer is compiled with ${flag}: only ${prefix}/include may be on its include path")
  endif()
endforeach()
foreach(forbidden "${HALIDE_INCLUDE_DIR}" "${SOURCE_DIR}/include")
  string(FIND "${commands}" "${forbidden}" at)
  if(NOT at EQUAL -1)
    message(FATAL_ERROR "the consumer's compile commands name ${forbidden}")
  endif()
endforeach()
if(build_log MATCHES "[Hh]alide")
  message(FATAL_ERROR "the consumer's build names Halide:\n${build_log}")
endif()

step("run the consumer" "${build}/ropegen_consumer")
message("${step_output}")
