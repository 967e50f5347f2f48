// qk_norm's float64 reference and its gradient: the formulas, row by row,
// in long double.
#include <cmath>
#include <stdexcept>

#include "reference.h"

namespace ropegen::ref {

namespace {

void check_rows(const RopeSpec& spec, const Tensor& x, const std::vector<double>& weight) {
  const size_t d = static_cast<size_t>(spec.head_dim);
  if (x.shape.empty() || static_cast<size_t>(x.shape.back()) != d || x.data.size() % d != 0)
    throw std::invalid_argument("reference_qk_norm: rows must be head_dim long");
  if (spec.qk_norm.has_weight() && weight.size() != d)
    throw std::invalid_argument("reference_qk_norm: the weight must be [head_dim]");
}

long double inverse_rms(const RopeSpec& spec, const double* row) {
  long double squares = 0;
  for (int i = 0; i < spec.head_dim; ++i) squares += static_cast<long double>(row[i]) * row[i];
  return 1.0L / std::sqrt(squares / spec.head_dim + static_cast<long double>(spec.qk_norm.eps));
}

long double weight_factor(const RopeSpec& spec, const std::vector<double>& weight, size_t i) {
  if (!spec.qk_norm.has_weight()) return 1;
  return spec.qk_norm.type == QkNormType::RmsOnePlus ? 1.0L + weight[i] : weight[i];
}

}  // namespace

Tensor reference_qk_norm(const RopeSpec& spec, const Tensor& x, const std::vector<double>& weight) {
  check_rows(spec, x, weight);
  const size_t d = static_cast<size_t>(spec.head_dim);
  Tensor out = x;
  for (size_t row = 0; row < x.data.size(); row += d) {
    const long double inv_rms = inverse_rms(spec, &x.data[row]);
    for (size_t i = 0; i < d; ++i)
      out.data[row + i] = static_cast<double>(x.data[row + i] * inv_rms * weight_factor(spec, weight, i));
  }
  return out;
}

NormGradients reference_qk_norm_backward(const RopeSpec& spec, const Tensor& x, const Tensor& d_normed,
                                         const std::vector<double>& weight) {
  check_rows(spec, x, weight);
  if (d_normed.shape != x.shape) throw std::invalid_argument("reference_qk_norm_backward: shapes differ");
  const size_t d = static_cast<size_t>(spec.head_dim);
  NormGradients out{x, {}};
  std::vector<long double> d_weight(d);
  for (size_t row = 0; row < x.data.size(); row += d) {
    const long double inv_rms = inverse_rms(spec, &x.data[row]);
    long double dot = 0;  // g . x
    for (size_t i = 0; i < d; ++i) dot += d_normed.data[row + i] * weight_factor(spec, weight, i) * x.data[row + i];
    for (size_t i = 0; i < d; ++i) {
      const long double g = d_normed.data[row + i] * weight_factor(spec, weight, i);
      out.dx.data[row + i] = static_cast<double>(inv_rms * (g - x.data[row + i] * inv_rms * inv_rms * dot / d));
      d_weight[i] += d_normed.data[row + i] * x.data[row + i] * inv_rms;
    }
  }
  if (spec.qk_norm.has_weight()) out.d_weight.assign(d_weight.begin(), d_weight.end());
  return out;
}

}  // namespace ropegen::ref
