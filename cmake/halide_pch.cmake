# Halide.h (with fmt) parsed once per build into a precompiled header that
# the libraries built on Halide reuse: Halide.h alone is about 3 s of every
# file that includes it. GCC takes the header only where the flags match
# (these libraries are all position independent: package/ bundles them);
# a file that cannot use it compiles from the headers themselves.
add_library(ropegen_halide_pch OBJECT ${CMAKE_CURRENT_LIST_DIR}/halide_pch.cpp)
set_target_properties(ropegen_halide_pch PROPERTIES POSITION_INDEPENDENT_CODE ON)
target_link_libraries(ropegen_halide_pch PRIVATE Halide::Halide fmt::fmt)
target_precompile_headers(ropegen_halide_pch PRIVATE <Halide.h> <fmt/format.h>)

function(ropegen_halide_precompiled name)
  target_link_libraries(${name} PRIVATE Halide::Halide fmt::fmt)
  target_precompile_headers(${name} REUSE_FROM ropegen_halide_pch)
endfunction()
