// The file format of one disk-cache entry: the shared object exactly as the
// linker wrote it, then the key's text (the ABI tag), then a 32-byte
// trailer: payload size, tag size, checksum of payload + tag, magic. ELF
// loaders read only what the headers point at, so the tail does not disturb
// dlopen, and one file per entry means one atomic rename publishes it.
// A file is loaded only after check_entry has read all of it, from the
// descriptor that is then loaded (trusted_path).
#pragma once

#include <optional>
#include <string>

#include "ropegen/diagnostics.h"

namespace ropegen::runtime {

// Appends the tag and trailer to a finished shared object, makes it
// private (0600, whatever the umask: a group-writable entry is refused)
// and syncs it to disk. A write error (a full disk) is a diagnostic.
std::optional<Diagnostic> seal_entry(const std::string& path, const std::string& tag);

struct EntryCheck {
  enum class Status { Ok, Absent, Damaged, Foreign };
  Status status = Status::Absent;
  std::string why;  // for Damaged and Foreign: what was wrong
};

// Reads the whole open file `fd`: its size, magic, checksum, and that it
// was sealed with `expected_tag`. With `payload`, an Ok entry's content
// (without the tag and trailer) is stored there.
EntryCheck check_entry(int fd, const std::string& expected_tag, std::string* payload = nullptr);

// The tag from the trailer alone, without checking the payload (listing):
// nullopt if the file has no well-formed trailer.
std::optional<std::string> read_entry_tag(const std::string& path);

}  // namespace ropegen::runtime
