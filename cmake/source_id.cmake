# ROPEGEN_SOURCE_ID: a hash of the sources that decide what a kernel is (the
# spec's normalisation, the lowering, the schedules, the cache's entries and
# the argument binding). It is part of every kernel cache key, so rope-gen,
# the Python module and the test programs built from the same sources share
# their cached kernels (a release and a sanitizer build of one checkout too),
# and a build from changed sources never loads kernels of the old ones.
#
# Included: ropegen_source_id(<target>) gives <target> the generated header
# <ropegen_source_id.h>. Run with -P (at build time): writes that header from
# the list of files, and rewrites it only when the hash changes, so nothing
# recompiles when a rebuild changes no hashed file.
if(CMAKE_SCRIPT_MODE_FILE)
  file(STRINGS "${FILE_LIST}" files)
  set(lines "")
  foreach(f IN LISTS files)
    file(SHA256 "${ROOT}/${f}" h)
    string(APPEND lines "${f} ${h}\n")
  endforeach()
  string(SHA256 id "${lines}")
  string(SUBSTRING "${id}" 0 32 id)
  set(text "#pragma once\n#define ROPEGEN_SOURCE_ID \"${id}\"\n")
  set(old "")
  if(EXISTS "${OUT}")
    file(READ "${OUT}" old)
  endif()
  if(NOT old STREQUAL text)
    file(WRITE "${OUT}" "${text}")
  endif()
  file(TOUCH "${STAMP}")
  return()
endif()

function(ropegen_source_id target)
  set(dirs abi base call cmake dsl include lowering math runtime targets)
  set(globs "")
  foreach(d IN LISTS dirs)
    list(APPEND globs ${PROJECT_SOURCE_DIR}/${d}/*.cpp ${PROJECT_SOURCE_DIR}/${d}/*.h ${PROJECT_SOURCE_DIR}/${d}/*.c
      ${PROJECT_SOURCE_DIR}/${d}/*.cmake ${PROJECT_SOURCE_DIR}/${d}/CMakeLists.txt)
  endforeach()
  file(GLOB_RECURSE sources CONFIGURE_DEPENDS ${globs})
  list(APPEND sources ${PROJECT_SOURCE_DIR}/CMakeLists.txt)
  list(SORT sources)
  set(relative "")
  foreach(f IN LISTS sources)
    file(RELATIVE_PATH r ${PROJECT_SOURCE_DIR} ${f})
    list(APPEND relative ${r})
  endforeach()
  set(dir ${CMAKE_BINARY_DIR}/generated/source_id)
  list(JOIN relative "\n" text)
  file(CONFIGURE OUTPUT ${dir}/files.txt CONTENT "${text}\n")
  add_custom_command(OUTPUT ${dir}/stamp BYPRODUCTS ${dir}/ropegen_source_id.h
    COMMAND ${CMAKE_COMMAND} -DROOT=${PROJECT_SOURCE_DIR} -DFILE_LIST=${dir}/files.txt
      -DOUT=${dir}/ropegen_source_id.h -DSTAMP=${dir}/stamp -P ${PROJECT_SOURCE_DIR}/cmake/source_id.cmake
    DEPENDS ${sources} ${dir}/files.txt
    COMMENT "Hashing the kernel sources (ROPEGEN_SOURCE_ID)" VERBATIM)
  add_custom_target(${target}_source_id DEPENDS ${dir}/stamp)
  add_dependencies(${target} ${target}_source_id)
  target_include_directories(${target} PRIVATE ${dir})
endfunction()
