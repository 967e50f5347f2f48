// Files built into rope-gen (cmake/embed_file.cmake, targets/aot/CMakeLists.txt)
// that every AOT library gets, so `rope-gen build` needs neither a compiler
// nor the source tree.
#pragma once

#include <cstddef>
#include <string_view>

namespace ropegen::embedded {

extern const unsigned char call_archive[];  // libropegen_call.a (call/), for the host's architecture
extern const std::size_t call_archive_size;
extern const unsigned char device_hooks_archive[];  // targets/aot/device_hooks: cuda_hooks.cpp.o, vulkan_hooks.cpp.o
extern const std::size_t device_hooks_archive_size;
extern const unsigned char ropegen_c_header[];  // include/ropegen/ropegen_c.h
extern const std::size_t ropegen_c_header_size;
extern const unsigned char ropegen_aot_header[];  // include/ropegen/ropegen_aot.h
extern const std::size_t ropegen_aot_header_size;

inline std::string_view bytes(const unsigned char* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

}  // namespace ropegen::embedded
