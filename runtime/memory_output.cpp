#include "memory_output.h"

#include <cerrno>
#include <cstring>

#include <sys/mman.h>
#include <sys/stat.h>

#include <fmt/format.h>

#include "runtime/fd_io.h"
#include "runtime/unique_fd.h"

namespace ropegen::runtime {

std::optional<Diagnostic> write_through_memory(const std::string& path,
                                               const std::function<void(const std::string& memory_path)>& produce) {
  auto fail = [&](const std::string& what) {
    return named_error(path, fmt::format("cannot write {}: {}: {}", path, what, std::strerror(errno)));
  };
  UniqueFd memory(::memfd_create("rope-gen-object", MFD_CLOEXEC));
  if (!memory.valid()) return fail("memfd_create");
  produce(fmt::format("/proc/self/fd/{}", memory.get()));
  struct stat st;
  if (::fstat(memory.get(), &st) != 0) return fail("fstat");
  std::string bytes(static_cast<size_t>(st.st_size), '\0');
  if (!read_at(memory.get(), bytes.data(), bytes.size(), 0)) return fail("read back");
  if (!write_new_file(path, bytes)) return fail("write");
  return std::nullopt;
}

}  // namespace ropegen::runtime
