#include "golden_vectors.h"

#include "support/golden.h"

namespace ropegen::kit {

std::vector<std::pair<std::string, runtime::ApplyRequest>> golden_vectors() {
  std::vector<std::pair<std::string, runtime::ApplyRequest>> out;
  for (const test::GoldenCase& g : test::load_golden_cases()) {
    if (!g.has_tensors()) continue;
    runtime::ApplyRequest r;
    r.q = {g.q->shape, std::vector<float>(g.q->data.begin(), g.q->data.end())};
    if (g.k) r.k = runtime::HostTensor{g.k->shape, std::vector<float>(g.k->data.begin(), g.k->data.end())};
    if (g.positions)
      r.positions = runtime::HostPositions{g.positions->shape, std::vector<int64_t>(g.positions->data.begin(), g.positions->data.end()), true};
    if (!g.cu_seqlens.empty()) r.cu_seqlens = g.cu_seqlens;
    r.offset = g.offset;
    r.seq_len = g.seq_len;
    out.emplace_back(g.spec, std::move(r));
  }
  return out;
}

}  // namespace ropegen::kit
