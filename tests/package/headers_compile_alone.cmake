# Package.HeadersCompileAlone (cmake -P): every public header compiles on its
# own with include/ as the only project include path (no Halide, no source
# tree), and pulls in nothing of fmt, yaml-cpp, nlohmann/json or Halide (they
# sit in /usr/include, so the compiler's list of opened files is checked too).
# C++ headers as C++17; ropegen_c.h and ropegen_aot.h also as strict C99.
#   -DCXX=... -DCC=... -DINCLUDE_DIR=<source>/include -DWORK_DIR=<scratch>
cmake_minimum_required(VERSION 3.28)
foreach(var CXX CC INCLUDE_DIR WORK_DIR)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "headers_compile_alone.cmake: -D${var}= is required")
  endif()
endforeach()

file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")
file(GLOB headers RELATIVE "${INCLUDE_DIR}" "${INCLUDE_DIR}/ropegen/*.h")
list(SORT headers)
if(NOT headers)
  message(FATAL_ERROR "no headers under ${INCLUDE_DIR}/ropegen")
endif()

set(failed "")
# compile(<label> <header> <source suffix> <compiler> <flags...>)
function(compile label header suffix compiler)
  string(MAKE_C_IDENTIFIER "${header}_${label}" stem)
  set(source "${WORK_DIR}/${stem}.${suffix}")
  file(WRITE "${source}" "#include \"${header}\"\n")
  # -H lists every file the compiler opens, on stderr.
  execute_process(COMMAND "${compiler}" ${ARGN} -fsyntax-only -H "-I${INCLUDE_DIR}" "${source}"
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  # The compiler's messages without -H's list of files and its advice on include guards.
  string(REGEX REPLACE "Multiple include guards may be useful for:.*" "" messages "${err}")
  string(REGEX REPLACE "(^|\n)\\.+ [^\n]*" "" messages "${messages}")
  set(why "")
  if(NOT rc EQUAL 0)
    set(why "does not compile")
  elseif(err MATCHES "\\.+ [^\n]*[/\\](fmt|yaml-cpp|nlohmann|Halide[A-Za-z]*\\.h|dlpack)[^\n]*")
    set(why "includes ${CMAKE_MATCH_1}: ${CMAKE_MATCH_0}")
  endif()
  if(why)
    message("FAIL ${header} (${label}): ${why}\n${messages}")
    set(failed ${failed} "${header} (${label})" PARENT_SCOPE)
  else()
    message("ok   ${header} (${label})")
  endif()
endfunction()

set(strict -Wall -Wextra -pedantic -Werror)
foreach(header IN LISTS headers)
  compile("c++17" "${header}" cpp "${CXX}" -x c++ -std=c++17 ${strict})
endforeach()
compile("c99" ropegen/ropegen_c.h c "${CC}" -x c -std=c99 ${strict})
compile("c99" ropegen/ropegen_aot.h c "${CC}" -x c -std=c99 ${strict})

if(failed)
  list(JOIN failed "\n  " failed)
  message(FATAL_ERROR "public headers that do not compile alone:\n  ${failed}")
endif()
