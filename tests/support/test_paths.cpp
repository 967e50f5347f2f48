#include "support/test_paths.h"

namespace ropegen::test {

const std::string& source_dir() {
  static const std::string dir = ROPEGEN_SOURCE_DIR;
  return dir;
}

std::string source_path(const std::string& relative) { return source_dir() + relative; }

const std::string& rope_gen_binary() {
  static const std::string binary = ROPEGEN_BINARY;
  return binary;
}

}  // namespace ropegen::test
