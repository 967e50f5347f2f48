#include "tensor_view.h"

#include <stdexcept>
#include <string>

#include "lowering/rope_algorithm.h"

namespace ropegen::runtime {
namespace {

// A dim of a positions buffer; never truncated.
halide_dimension_t dim(int64_t extent, int64_t stride) {
  int64_t span = 0;
  if (extent > INT32_MAX || stride > INT32_MAX || __builtin_mul_overflow(extent, stride, &span) || span > INT32_MAX)
    throw std::invalid_argument("positions: " + std::to_string(extent) + " ids " + std::to_string(stride) +
                                " apart are more than a kernel call can address (2^31-1)");
  return halide_dimension_t(0, static_cast<int32_t>(extent), static_cast<int32_t>(stride));
}

}  // namespace

std::vector<int64_t> dense_strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (int i = static_cast<int>(shape.size()) - 2; i >= 0; --i) strides[i] = strides[i + 1] * shape[i + 1];
  return strides;
}

TensorView logical_tensor(void* data, Halide::Type type, Layout layout, const std::vector<int64_t>& shape,
                          const std::vector<int64_t>& strides) {
  std::vector<int64_t> n = shape, st = strides;
  if (lowering::with_heads(layout) != layout) {  // one head: its stride never matters
    n.insert(n.end() - 1, 1);
    st.insert(st.end() - 1, 0);
    layout = lowering::with_heads(layout);
  }
  if (layout == Layout::THD) n.insert(n.begin(), 1), st.insert(st.begin(), 0);  // one batch
  // The layout's dims that are (d, h, s, b), as indices into n / st (bshd order after the above).
  std::array<int, 4> order{};
  switch (layout) {
    case Layout::BHSD: order = {3, 1, 2, 0}; break;
    case Layout::SBHD: order = {3, 2, 0, 1}; break;
    default: order = {3, 2, 1, 0}; break;  // bshd, thd as [1, T, H, D]
  }
  TensorView v;
  v.data = data, v.type = type;
  for (int i = 0; i < 4; ++i) v.extent[i] = n[order[i]], v.stride[i] = st[order[i]];
  return v;
}

Halide::Buffer<> logical_positions(void* data, Halide::Type type, Layout layout, const std::vector<int64_t>& shape,
                                   int64_t batch, int axes) {
  layout = lowering::with_heads(layout);
  // Multi-axis ids have a trailing axis dim: every token's ids are `axes` apart.
  const int64_t unit = axes > 0 ? axes : 1;
  const std::vector<int64_t> tokens(shape.begin(), shape.end() - (axes > 0 ? 1 : 0));
  std::vector<halide_dimension_t> dims;
  if (axes > 0) dims.push_back(dim(axes, 1));
  if (tokens.size() == 1) {
    // [S] shared by every sequence: the batch dim has stride 0.
    dims.push_back(dim(tokens[0], unit)), dims.push_back(dim(layout == Layout::THD ? 1 : batch, 0));
  } else if (layout == Layout::SBHD) {
    dims.push_back(dim(tokens[0], tokens[1] * unit)), dims.push_back(dim(tokens[1], unit));
  } else {
    dims.push_back(dim(tokens[1], unit)), dims.push_back(dim(tokens[0], tokens[1] * unit));
  }
  return Halide::Buffer<>(type, data, static_cast<int>(dims.size()), dims.data());
}

Halide::Buffer<> rotary_view(const Halide::Buffer<>& t, const RopeSpec& spec) {
  const int half = spec.num_pairs(), d_stride = t.dim(0).stride();
  halide_dimension_t dims[5];
  if (spec.output_pairing == Pairing::Interleaved) {
    dims[0] = halide_dimension_t(0, 2, d_stride), dims[1] = halide_dimension_t(0, half, 2 * d_stride);
  } else {
    dims[0] = halide_dimension_t(0, half, d_stride), dims[1] = halide_dimension_t(0, 2, half * d_stride);
  }
  for (int i = 1; i < 4; ++i) dims[i + 1] = halide_dimension_t(t.dim(i).min(), t.dim(i).extent(), t.dim(i).stride());
  auto* base = static_cast<uint8_t*>(const_cast<void*>(static_cast<const void*>(t.data()))) +
               static_cast<int64_t>(spec.rotary_offset) * d_stride * t.type().bytes();
  return Halide::Buffer<>(t.type(), base, 5, dims);
}

Halide::Buffer<> dim_range_view(const Halide::Buffer<>& t, int first, int count) {
  halide_dimension_t dims[4];
  dims[0] = halide_dimension_t(0, count, t.dim(0).stride());
  for (int i = 1; i < 4; ++i) dims[i] = halide_dimension_t(t.dim(i).min(), t.dim(i).extent(), t.dim(i).stride());
  auto* base = static_cast<uint8_t*>(const_cast<void*>(static_cast<const void*>(t.data()))) +
               static_cast<int64_t>(first) * t.dim(0).stride() * t.type().bytes();
  return Halide::Buffer<>(t.type(), base, 4, dims);
}

}  // namespace ropegen::runtime
