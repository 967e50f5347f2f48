// One elementwise value of x, over n inputs, run on a target as the
// lowering tests check their conversions bit for bit: vectorised on CPUs
// over an odd extent (n - 3, so the vector tail runs too); on GPUs in tiles
// of 64 over whole tiles only (a bare 1-D gpu_tile loses its guarded tail
// on lavapipe; the kernels' own schedules are checked at odd sizes by the
// parity sweeps).
#pragma once

#include <vector>

#include <Halide.h>

namespace ropegen::test {

template <typename T>
std::vector<T> run_elementwise(const Halide::Expr& value, const Halide::Var& x, int n, const Halide::Target& target) {
  Halide::Func f("elementwise");
  Halide::Var xo("xo"), xi("xi");
  f(x) = value;
  if (target.has_gpu_feature())
    f.gpu_tile(x, xo, xi, 64, Halide::TailStrategy::GuardWithIf);
  else
    f.vectorize(x, target.natural_vector_size<float>() * 2, Halide::TailStrategy::GuardWithIf);
  const int extent = target.has_gpu_feature() ? n / 64 * 64 : n - 3;
  Halide::Buffer<T> out = f.realize({extent}, target);
  out.copy_to_host();
  return {out.data(), out.data() + out.width()};
}

}  // namespace ropegen::test
