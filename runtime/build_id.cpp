#include "build_id.h"

#include <cstdint>
#include <cstring>

#include <elf.h>
#include <link.h>

#include <fmt/format.h>

namespace ropegen::runtime {
namespace {

struct Search {
  uintptr_t address;  // inside the object we are looking for
  std::string id;
};

bool contains(const dl_phdr_info* info, uintptr_t address) {
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    const uintptr_t start = info->dlpi_addr + ph.p_vaddr;
    if (ph.p_type == PT_LOAD && address >= start && address < start + ph.p_memsz) return true;
  }
  return false;
}

int find_build_id(dl_phdr_info* info, size_t, void* data) {
  auto* search = static_cast<Search*>(data);
  if (!contains(info, search->address)) return 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_NOTE) continue;
    const char* p = reinterpret_cast<const char*>(info->dlpi_addr + ph.p_vaddr);
    const char* end = p + ph.p_memsz;
    while (p + sizeof(ElfW(Nhdr)) <= end) {
      ElfW(Nhdr) note;
      std::memcpy(&note, p, sizeof note);
      const char* name = p + sizeof note;
      const char* desc = name + ((note.n_namesz + 3) & ~3u);
      if (note.n_type == NT_GNU_BUILD_ID && note.n_namesz == 4 && std::memcmp(name, "GNU", 4) == 0) {
        for (uint32_t j = 0; j < note.n_descsz; ++j) search->id += fmt::format("{:02x}", static_cast<unsigned char>(desc[j]));
        return 1;
      }
      p = desc + ((note.n_descsz + 3) & ~3u);
    }
  }
  return 1;  // our object, without a build id
}

}  // namespace

const std::string& code_build_id() {
  static const std::string id = [] {
    Search search{reinterpret_cast<uintptr_t>(&find_build_id), {}};
    dl_iterate_phdr(find_build_id, &search);
    return search.id.empty() ? std::string("none") : search.id;
  }();
  return id;
}

}  // namespace ropegen::runtime
