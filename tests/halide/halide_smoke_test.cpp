// Halide from the PyPI wheel is usable through find_package(Halide): a tiny
// pipeline JIT-compiled for the host gives the exact values.
#include <Halide.h>
#include <gtest/gtest.h>

TEST(HalideSmoke, JitCompilesAndRunsOnHost) {
  Halide::Func f("f");
  Halide::Var x("x");
  f(x) = Halide::cast<float>(x) * 2.0f + 1.0f;
  f.vectorize(x, 8);
  Halide::Buffer<float> out = f.realize({37}, Halide::get_jit_target_from_environment());
  for (int i = 0; i < 37; ++i) EXPECT_EQ(out(i), 2.0f * i + 1.0f) << "at " << i;
}

TEST(HalideSmoke, VersionIs21) { EXPECT_EQ(HALIDE_VERSION_MAJOR, 21); }
