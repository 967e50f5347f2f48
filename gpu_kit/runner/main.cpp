// kit_runner: the GPU kit's test and bench runner (gpu_kit/README.md). No
// Halide, no CUDA toolkit: the kit's libraries and the CUDA driver (dlopen)
// are all it needs. Without a CUDA device it runs the host half of the
// parity checks (the kit's libraries and data are whole) and says plainly
// that no CUDA kernel ran.
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>

#include "bench.h"
#include "cuda_driver.h"
#include "kit_case.h"
#include "parity.h"

namespace {

constexpr const char* kUsage =
    "usage: kit_runner parity|bench [--kit DIR] [--case ID] [--quick] [--json FILE] [--no-device] [--require-device]\n"
    "  parity    every case on the host and on CUDA device 0: against the float64 reference, bit for bit against the host\n"
    "  bench     the bench table (needs a CUDA device)\n"
    "  --kit DIR the kit (default: the directory above this program's)\n"
    "  --case ID parity of one case (cases/index.json)\n"
    "  --quick   bench: a few repetitions only\n"
    "  --json F  bench: the rows as JSON too\n"
    "  --no-device       do not use a CUDA device even if there is one\n"
    "  --require-device  exit 3 when there is no CUDA device\n";

std::string default_kit_dir() {
  char exe[PATH_MAX] = {};
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  std::string path = n > 0 ? std::string(exe, n) : ".";
  for (int up = 0; up < 2; ++up) path = path.substr(0, path.find_last_of('/') == std::string::npos ? 0 : path.find_last_of('/'));
  return path.empty() ? "." : path;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return std::fputs(kUsage, stderr), 2;
  const std::string mode = argv[1];
  std::string dir = default_kit_dir(), json;
  std::optional<int> only;
  bool quick = false, no_device = false, require_device = false;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--kit" && has_value) dir = argv[++i];
    else if (a == "--case" && has_value) only = std::atoi(argv[++i]);
    else if (a == "--json" && has_value) json = argv[++i];
    else if (a == "--quick") quick = true;
    else if (a == "--no-device") no_device = true;
    else if (a == "--require-device") require_device = true;
    else return std::fprintf(stderr, "kit_runner: unknown argument %s\n%s", a.c_str(), kUsage), 2;
  }
  if (mode != "parity" && mode != "bench") return std::fputs(kUsage, stderr), 2;

  std::string why_not = "--no-device";
  const kit::CudaDriver* cuda = no_device ? nullptr : kit::CudaDriver::load(why_not);
  if (cuda) std::printf("CUDA device 0: %s\n", cuda->description.c_str());
  else std::printf("No CUDA device: %s.\n", why_not.c_str());
  if (!cuda && require_device) return std::fputs("kit_runner: --require-device: no CUDA kernel ran\n", stderr), 3;
  try {
    if (mode == "bench") {
      if (!cuda) return std::printf("No bench without a CUDA device: no CUDA kernel ran.\n"), 0;
      return kit::run_bench(dir, *cuda, quick, json);
    }
    const std::vector<kit::KitCase> cases = kit::load_cases(dir, only);
    std::printf("%zu cases from %s\n", cases.size(), dir.c_str());
    return kit::run_parity(dir, cases, cuda);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kit_runner: %s\n", e.what());
    return 2;
  }
}
