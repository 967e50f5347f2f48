// rope-gen as a library user sees it: every public header, no Halide. Parses
// a spec, rotates a float32 q through ropegen::Runtime (JIT, memory cache
// only) and checks the rotated values against the formula.
#include <ropegen/call.h>
#include <ropegen/diagnostics.h>
#include <ropegen/from_hf.h>
#include <ropegen/kernel.h>
#include <ropegen/position_limits.h>
#include <ropegen/result.h>
#include <ropegen/rope_math.h>
#include <ropegen/rope_table.h>
#include <ropegen/ropegen_c.h>
#include <ropegen/runtime.h>
#include <ropegen/spec.h>
#include <ropegen/spec_io.h>
#include <ropegen/tensor.h>

#include <cmath>
#include <cstdio>

int main() {
  ropegen::Result<ropegen::RopeSpec> spec = ropegen::parse_spec(
      "name: consumer\n"
      "head_dim: 4\n"
      "pairing: half\n"
      "layout: bshd\n"
      "dtype: f32\n"
      "frequency: {scheme: lang, theta: 10000}\n",
      "consumer.yaml");
  if (!spec) {
    std::fputs(ropegen::format(spec.errors()).c_str(), stderr);
    return 1;
  }

  // q [B=1, S=2, H=1, D=4]: tokens at positions 0 and 1, rotated in place.
  float q[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  ropegen::Call call;
  call.q = ropegen::Tensor::dense(q, ropegen::ElementType::Float32, {1, 2, 1, 4});

  ropegen::Runtime runtime(ropegen::RuntimeOptions{});  // no cache_dir: memory only
  ropegen::Status status = runtime.run(*spec, call);
  if (!status) {
    std::fputs(ropegen::format(status.errors()).c_str(), stderr);
    return 1;
  }

  // Half pairing pairs dims (0, 2) and (1, 3); inv_freq = 10000^(-2i/4) =
  // {1, 0.01}. Position 0 is unchanged; at position 1 dim 0 becomes
  // x0 cos(1) - x2 sin(1) and dim 2 x2 cos(1) + x0 sin(1).
  const double expected[8] = {1, 2, 3, 4,
                              5 * std::cos(1.0) - 7 * std::sin(1.0), 6 * std::cos(0.01) - 8 * std::sin(0.01),
                              7 * std::cos(1.0) + 5 * std::sin(1.0), 8 * std::cos(0.01) + 6 * std::sin(0.01)};
  int failures = 0;
  for (int i = 0; i < 8; ++i) {
    if (std::fabs(q[i] - expected[i]) > 1e-5) {
      std::fprintf(stderr, "q[%d] = %.7f, expected %.7f\n", i, q[i], expected[i]);
      ++failures;
    }
  }
  std::printf("%s: q[4] = %.7f (x0 cos 1 - x2 sin 1 = %.7f)\n", failures ? "FAIL" : "PASS", q[4], expected[4]);
  return failures ? 1 : 0;
}
