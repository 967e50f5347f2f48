// base/cuda_driver_api.h: the table and its loader, built as C99 (pedantic,
// as the C test drivers are) and as C++, run against the tests' stub CUDA
// driver (tests/aot/stub_libcuda.c) found through LD_LIBRARY_PATH.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "support/run_command.h"
#include "support/test_paths.h"

namespace ropegen::base {
namespace {

using test::run_command;

const std::string kSource = ropegen::test::source_dir();

// The stub driver built into `dir` as `name` (its soname too).
void build_stub(const std::string& dir, const std::string& name) {
  const auto r = run_command("cc -std=c99 -Wall -Wextra -Wno-unused-parameter -Werror -shared -fPIC -Wl,-soname," +
                             name + " " + kSource + "/tests/aot/stub_libcuda.c -o " + dir + "/" + name);
  ASSERT_EQ(r.exit_code, 0) << r.err;
}

// The probe's output with only `dir` on the library path.
std::string probe(const std::string& exe, const std::string& dir, int options) {
  const auto r = run_command("env LD_LIBRARY_PATH=" + dir + " " + exe + " " + std::to_string(options));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return r.out;
}

// Whether this machine has a CUDA driver of its own (found without LD_LIBRARY_PATH).
bool system_has_libcuda_so_1() {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib) dlclose(lib);
  return lib != nullptr;
}

class CudaDriverApi : public ::testing::TestWithParam<const char*> {};

TEST_P(CudaDriverApi, LoadsEveryEntryTheDriverHasAndNamesTheFirstNeededOneItLacks) {
  const std::string dir = test::make_temp_dir();
  const std::string exe = dir + "/probe";
  const auto built = run_command(std::string(GetParam()) + " -Wall -Wextra -pedantic -Werror -I " + kSource + " " +
                                 kSource + "/tests/base/cuda_driver_api_probe.c -o " + exe + " -ldl");
  ASSERT_EQ(built.exit_code, 0) << built.err;

  const std::string with_so_1 = dir + "/so1", with_so = dir + "/so", empty = dir + "/empty";
  for (const auto& d : {with_so_1, with_so, empty}) ASSERT_EQ(run_command("mkdir " + d).exit_code, 0);
  build_stub(with_so_1, "libcuda.so.1");
  build_stub(with_so, "libcuda.so");

  const std::string loaded =
      "ok=1 library=yes missing=- cuMemAlloc_v2=yes cuEventCreate=no devices=2\n"
      "ok=0 library=yes missing=cuDriverGetVersion cuMemAlloc_v2=yes cuEventCreate=no devices=-1\n";
  EXPECT_EQ(probe(exe, with_so_1, 0), loaded);
  if (!system_has_libcuda_so_1()) {  // else this machine's own libcuda.so.1 answers first
    const std::string none =
        "ok=0 library=no missing=- cuMemAlloc_v2=no cuEventCreate=no devices=-1\n"
        "ok=0 library=no missing=- cuMemAlloc_v2=no cuEventCreate=no devices=-1\n";
    EXPECT_EQ(probe(exe, with_so, 1), loaded) << "libcuda.so after libcuda.so.1 when asked";
    EXPECT_EQ(probe(exe, with_so, 0), none) << "libcuda.so only when asked";
    EXPECT_EQ(probe(exe, empty, 1), none);
  }
  std::filesystem::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(C99AndCxx, CudaDriverApi,
                         ::testing::Values("cc -std=c99", "c++ -std=c++17 -x c++ -Wold-style-cast"),
                         [](const auto& info) { return info.index == 0 ? "C99" : "Cxx17"; });

}  // namespace
}  // namespace ropegen::base
