#include "golden_vectors.h"

#include "support/golden.h"

namespace ropegen::kit {

std::vector<std::pair<std::string, runtime::ApplyRequest>> golden_vectors() {
  std::vector<std::pair<std::string, runtime::ApplyRequest>> out;
  for (const test::GoldenCase& g : test::load_golden_cases()) {
    if (!g.has_tensors()) continue;
    runtime::ApplyRequest r;
    using runtime::HostArray;
    r[abi::Arg::Q] = HostArray::of_floats(g.q->shape, std::vector<float>(g.q->data.begin(), g.q->data.end()));
    if (g.k) r[abi::Arg::K] = HostArray::of_floats(g.k->shape, std::vector<float>(g.k->data.begin(), g.k->data.end()));
    if (g.positions)
      r[abi::Arg::Positions] = HostArray::of_ids(
          g.positions->shape, std::vector<int64_t>(g.positions->data.begin(), g.positions->data.end()));
    if (!g.cu_seqlens.empty())
      r[abi::Arg::CuSeqlens] = HostArray::of_ids({static_cast<int64_t>(g.cu_seqlens.size())}, g.cu_seqlens);
    r.offset = g.offset;
    r.seq_len = g.seq_len;
    out.emplace_back(g.spec, std::move(r));
  }
  return out;
}

}  // namespace ropegen::kit
