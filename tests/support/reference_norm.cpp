// qk_norm's float64 reference: the formula, row by row, in long double.
#include <cmath>
#include <stdexcept>

#include "reference.h"

namespace ropegen::ref {

Tensor reference_qk_norm(const RopeSpec& spec, const Tensor& x, const std::vector<double>& weight) {
  const QkNorm& norm = spec.qk_norm;
  const size_t d = static_cast<size_t>(spec.head_dim);
  if (x.shape.empty() || static_cast<size_t>(x.shape.back()) != d || x.data.size() % d != 0)
    throw std::invalid_argument("reference_qk_norm: rows must be head_dim long");
  if (norm.has_weight() && weight.size() != d)
    throw std::invalid_argument("reference_qk_norm: the weight must be [head_dim]");
  Tensor out = x;
  for (size_t row = 0; row < x.data.size(); row += d) {
    long double squares = 0;
    for (size_t i = 0; i < d; ++i) squares += static_cast<long double>(x.data[row + i]) * x.data[row + i];
    const long double inv_rms = 1.0L / std::sqrt(squares / d + static_cast<long double>(norm.eps));
    for (size_t i = 0; i < d; ++i) {
      long double w = 1;
      if (norm.has_weight()) w = norm.type == QkNormType::RmsOnePlus ? 1.0L + weight[i] : weight[i];
      out.data[row + i] = static_cast<double>(x.data[row + i] * inv_rms * w);
    }
  }
  return out;
}

}  // namespace ropegen::ref
