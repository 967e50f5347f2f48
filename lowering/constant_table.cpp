#include "constant_table.h"

namespace ropegen::lowering {

Halide::Buffer<double> constant_table(const std::vector<double>& values, const std::string& name) {
  const int n = static_cast<int>(values.size());
  Halide::Buffer<double> t((n + kTableRowEntries - 1) / kTableRowEntries * kTableRowEntries, name);
  t.fill(0.0);
  for (int i = 0; i < n; ++i) t(i) = values[i];
  return t;
}

Halide::Buffer<float> constant_table_f32(const std::vector<float>& values, const std::string& name) {
  constexpr int kEntries = 256 / sizeof(float);
  const int n = static_cast<int>(values.size());
  Halide::Buffer<float> t((n + kEntries - 1) / kEntries * kEntries, name);
  t.fill(0.0f);
  for (int i = 0; i < n; ++i) t(i) = values[i];
  return t;
}

Halide::Expr f64_constant(double value, const std::string& name) { return constant_table({value}, name)(Halide::Expr(0)); }

}  // namespace ropegen::lowering
