# The nanobind module _ropegen, from rope-gen's libraries (the targets of the
# parent project, already defined). Included by python/CMakeLists.txt (a
# standalone build: pip, the wheel) and by the parent project when
# ROPEGEN_PYTHON_MODULE is on (`make build`: the module from the objects the
# rest of the build compiled; `make python` then installs that file).
execute_process(COMMAND "${Python_EXECUTABLE}" -m nanobind --cmake_dir
                OUTPUT_VARIABLE nanobind_ROOT OUTPUT_STRIP_TRAILING_WHITESPACE)
find_package(nanobind CONFIG REQUIRED)
set(_ropegen_src ${CMAKE_CURRENT_LIST_DIR}/src)
nanobind_add_module(_ropegen ${_ropegen_src}/module.cpp ${_ropegen_src}/tensor_args.cpp
                    ${_ropegen_src}/from_hf_binding.cpp ${_ropegen_src}/explain_binding.cpp)
target_link_libraries(_ropegen PRIVATE ropegen_runtime ropegen_lowering ropegen_hf)
# Halide comes from the `halide` wheel installed next to the package.
set_target_properties(_ropegen PROPERTIES INSTALL_RPATH "$ORIGIN/../halide/lib64" BUILD_WITH_INSTALL_RPATH ON)
