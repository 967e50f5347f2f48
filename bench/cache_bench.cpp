// How long a kernel takes to obtain at each level of ropegen::Runtime's
// cache, for one spec (medians over --runs):
//   cold           empty cache: Halide compiles the kernel and its runtime, links, loads
//   cold_kernel    a new kernel in a cache that already holds Halide's runtime object
//   jit            a JitKernel, as apply used to compile one per call (for comparison)
//   warm_get       Runtime::get in a new process whose cache has the entry (check + dlopen)
//   warm_process   that whole process: start, get, exit
//   hot            Runtime::get on a kernel this Runtime already handed out
// One JSON line. build/bench/cache_bench SPEC [--runs N]; it re-runs itself
// (same binary, hence same cache keys) for the new-process numbers.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <unistd.h>

#include <fmt/format.h>

#include "ropegen/runtime.h"
#include "ropegen/spec_io.h"
#include "runtime/jit_kernel.h"

namespace {

using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

ropegen::RopeSpec load(const std::string& path) {
  ropegen::Result<ropegen::RopeSpec> spec = ropegen::load_spec(path);
  if (!spec) {
    std::fputs(ropegen::format(spec.errors()).c_str(), stderr);
    std::exit(2);
  }
  return spec.value();
}

double timed_get(ropegen::Runtime& runtime, const ropegen::RopeSpec& spec) {
  const auto start = Clock::now();
  auto kernel = runtime.get(spec, {});
  const double took = since(start);
  if (!kernel) {
    std::fputs(ropegen::format(kernel.errors()).c_str(), stderr);
    std::exit(1);
  }
  return took;
}

std::string temp_dir() {
  std::string tmpl = (fs::temp_directory_path() / "rope-gen-cache-bench-XXXXXX").string();
  if (!mkdtemp(tmpl.data())) std::exit(1);
  return tmpl;
}

}  // namespace

int main(int argc, char** argv) {
  using ropegen::Runtime;
  using ropegen::RuntimeOptions;
  if (argc == 4 && std::string(argv[1]) == "--load") {  // the child: one warm get in a fresh process
    const ropegen::RopeSpec spec = load(argv[3]);
    Runtime runtime(RuntimeOptions{argv[2], uint64_t{1} << 30});
    std::printf("%.9f\n", timed_get(runtime, spec));
    return runtime.counters().disk_hits == 1 ? 0 : 1;
  }
  if (argc != 2 && !(argc == 4 && std::string(argv[2]) == "--runs")) {
    std::fprintf(stderr, "usage: %s SPEC [--runs N]\n", argv[0]);
    return 2;
  }
  const std::string spec_path = argv[1];
  const int runs = argc == 4 ? std::max(1, std::atoi(argv[3])) : 5;
  const ropegen::RopeSpec spec = load(spec_path);
  ropegen::RopeSpec renamed = spec;  // another kernel: same code, another key

  std::vector<double> cold, cold_kernel, jit, warm_get, warm_process, hot;
  const std::string dir = temp_dir();
  for (int i = 0; i < runs; ++i) {
    const std::string cache = dir + "/cold" + std::to_string(i);
    Runtime runtime(RuntimeOptions{cache, uint64_t{1} << 30});
    cold.push_back(timed_get(runtime, spec));
    renamed.name = spec.name + "_" + std::to_string(i);
    cold_kernel.push_back(timed_get(runtime, renamed));
    const auto start = Clock::now();
    ropegen::runtime::JitKernel kernel(spec, {}, Halide::get_host_target());
    jit.push_back(since(start));
  }
  const std::string warm_cache = dir + "/cold0";  // holds the spec's entry
  for (int i = 0; i < runs; ++i) {
    const auto start = Clock::now();
    FILE* child = popen(fmt::format("'/proc/{}/exe' --load '{}' '{}'", getpid(), warm_cache, spec_path).c_str(), "r");
    double seconds = -1;
    if (!child || std::fscanf(child, "%lf", &seconds) != 1 || pclose(child) != 0) {
      std::fprintf(stderr, "the warm-load child failed\n");
      return 1;
    }
    warm_process.push_back(since(start));
    warm_get.push_back(seconds);
  }
  Runtime runtime(RuntimeOptions{warm_cache, uint64_t{1} << 30});
  timed_get(runtime, spec);
  for (int batch = 0; batch < 21; ++batch) {
    const int calls = 10000;
    const auto start = Clock::now();
    for (int i = 0; i < calls; ++i)
      if (!runtime.get(spec, {})) return 1;
    hot.push_back(since(start) / calls);
  }
  fs::remove_all(dir);

  const double ms = 1e3, us = 1e6;
  std::printf(
      "{\"spec\": \"%s\", \"runs\": %d, \"cold_ms\": %.1f, \"cold_kernel_ms\": %.1f, \"jit_ms\": %.1f, "
      "\"warm_get_ms\": %.3f, \"warm_process_ms\": %.1f, \"hot_us\": %.2f, \"cold_over_warm\": %.0f, "
      "\"cold_kernel_over_warm\": %.0f}\n",
      spec.name.c_str(), runs, median(cold) * ms, median(cold_kernel) * ms, median(jit) * ms, median(warm_get) * ms,
      median(warm_process) * ms, median(hot) * us, median(cold) / median(warm_get),
      median(cold_kernel) / median(warm_get));
  return 0;
}
