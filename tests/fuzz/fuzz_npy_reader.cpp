// libFuzzer target: any bytes through the .npy reader must give an array or
// a CliError, never a crash, hang, huge allocation or other exception. An
// array that reads must hold exactly its shape's bytes and read back the
// same once written again.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "cli_error.h"
#include "npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  try {
    const ropegen::cli::NpyArray a = ropegen::cli::parse_npy(bytes, "fuzz.npy");
    const size_t item = a.dtype == "|u1" ? 1 : a.dtype == "<f4" || a.dtype == "<i4" ? 4 : 8;
    if (a.data.size() != static_cast<size_t>(a.elements()) * item) std::abort();
    if (a.dtype == "<i4" || a.dtype == "<i8") {
      const ropegen::cli::NpyInts ids = ropegen::cli::npy_ints(a, "fuzz.npy", "ids");
      const ropegen::cli::NpyArray again = ropegen::cli::parse_npy(ropegen::cli::npy_bytes(ids.values, ids.shape), "again.npy");
      if (again.shape != a.shape || again.elements() != a.elements()) std::abort();
    }
  } catch (const ropegen::cli::CliError&) {
  }
  return 0;
}
