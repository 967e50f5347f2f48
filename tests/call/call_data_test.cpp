// call/prepare_call on the data a call's tensors point to: a null pointer
// where there are elements is refused naming the argument (for every
// tensor argument of the table); an empty tensor's view gets an address
// when the call has work (Halide takes a null buffer for a bounds query and
// computes nothing); an offset next to explicit ids, which the kernels would
// drop, is refused; positions past kMaxPosition (2^32) are refused.
#include <gtest/gtest.h>

#include <vector>

#include "abi/arguments.h"
#include "call/prepare_call.h"
#include "ropegen/spec_io.h"

namespace ropegen {
namespace {

using abi::Arg;

RopeSpec spec_from(const std::string& text) { return parse_spec(text, "test").value(); }

std::string messages(const RopeSpec& spec, const Call& call) {
  const Result<call::PreparedCall> p = call::prepare_call(spec, call);
  return p ? "" : format(p.errors());
}

// Valid calls that between them give every tensor argument of the table:
// a paged KV append, a contiguous one with out_k, a backward with run-time
// frequencies, a cos/sin cache, a learned table, a packed call, qk_norm
// and its backward.
struct Calls {
  std::vector<float> f = std::vector<float>(4096, 0.25f);
  std::vector<int32_t> pos = {4, 5, 6, 0}, pages = {2, 0, 1}, starts = {0, 2, 3}, requests = {0, 0, 0, 1};
  std::vector<int32_t> cu = {0, 1, 4}, places = {0, 1, 2, 0}, slots = {3, -1, 11, 0};
  float* at(int i) { return f.data() + i * 256; }
  std::vector<std::pair<RopeSpec, Call>> all() {
    const std::string kv = "name: kv\nhead_dim: 8\nlayout: thd\npositions: explicit\n";
    std::vector<std::pair<RopeSpec, Call>> out;
    Call c;
    c.q = Tensor::dense(at(0), ElementType::Float32, {4, 2, 8});
    c.k = Tensor::dense(at(1), ElementType::Float32, {4, 1, 8});
    c.v = Tensor::dense(at(2), ElementType::Float32, {4, 1, 6});
    c.positions = Tensor::dense(pos.data(), ElementType::Int32, {4});
    c.k_cache = Tensor::dense(at(3), ElementType::Float32, {3, 4, 1, 8});
    c.v_cache = Tensor::dense(at(4), ElementType::Float32, {3, 4, 1, 6});
    c.kv_indices = Tensor::dense(pages.data(), ElementType::Int32, {3});
    c.kv_indptr = Tensor::dense(starts.data(), ElementType::Int32, {3});
    c.batch_indices = Tensor::dense(requests.data(), ElementType::Int32, {4});
    c.cache_positions = Tensor::dense(places.data(), ElementType::Int32, {4});
    out.emplace_back(spec_from(kv + "kv_cache: {layout: paged_nhd, page_size: 4}\n"), c);
    Call s = c;
    s.kv_indices.reset(), s.kv_indptr.reset(), s.batch_indices.reset(), s.cache_positions.reset();
    s.k_cache = Tensor::dense(at(3), ElementType::Float32, {12, 1, 8});
    s.v_cache = Tensor::dense(at(4), ElementType::Float32, {12, 1, 6});
    s.slot_mapping = Tensor::dense(slots.data(), ElementType::Int32, {4});
    s.out_k = Tensor::dense(at(5), ElementType::Float32, {4, 1, 8});
    out.emplace_back(spec_from(kv + "kv_cache: {layout: contiguous}\n"), s);
    Call b;
    b.q = Tensor::dense(at(0), ElementType::Float32, {1, 4, 2, 8});
    b.out_q = Tensor::dense(at(1), ElementType::Float32, {1, 4, 2, 8});
    b.k = Tensor::dense(at(2), ElementType::Float32, {1, 4, 1, 8});
    b.out_k = Tensor::dense(at(3), ElementType::Float32, {1, 4, 1, 8});
    b.freqs = Tensor::dense(at(4), ElementType::Float32, {4});
    b.saved_q = Tensor::dense(at(5), ElementType::Float32, {1, 4, 2, 8});
    b.saved_k = Tensor::dense(at(6), ElementType::Float32, {1, 4, 1, 8});
    b.d_freqs = Tensor::dense(at(7), ElementType::Float32, {4});
    b.backward = true;
    out.emplace_back(spec_from("name: r\nhead_dim: 8\nfrequency: {scheme: runtime}\n"), b);
    Call t;
    t.q = Tensor::dense(at(0), ElementType::Float32, {4, 2, 8});
    t.cu_seqlens = Tensor::dense(cu.data(), ElementType::Int32, {3});
    t.cos_sin_cache = Tensor::dense(at(1), ElementType::Float32, {8, 8});
    out.emplace_back(spec_from("name: t\nhead_dim: 8\nlayout: thd\nfrequency: {scheme: table}\n"), t);
    Call l;
    l.q = Tensor::dense(at(0), ElementType::Float32, {1, 4, 8});
    l.table = Tensor::dense(at(1), ElementType::Float32, {8, 8});
    out.emplace_back(spec_from("name: l\nencoding: learned\ndim: 8\npositions: implicit\n"), l);
    Call n;
    n.q = Tensor::dense(at(0), ElementType::Float32, {1, 4, 2, 8});
    n.k = Tensor::dense(at(1), ElementType::Float32, {1, 4, 1, 8});
    n.q_norm_weight = Tensor::dense(at(2), ElementType::Float32, {8});
    n.k_norm_weight = Tensor::dense(at(3), ElementType::Float32, {8});
    out.emplace_back(spec_from("name: n\nhead_dim: 8\nqk_norm: {eps: 1.0e-6}\n"), n);
    Call nb = n;  // its backward: the forward's inputs and the weights' gradients
    nb.out_q = Tensor::dense(at(4), ElementType::Float32, {1, 4, 2, 8});
    nb.out_k = Tensor::dense(at(5), ElementType::Float32, {1, 4, 1, 8});
    nb.saved_q = Tensor::dense(at(6), ElementType::Float32, {1, 4, 2, 8});
    nb.saved_k = Tensor::dense(at(7), ElementType::Float32, {1, 4, 1, 8});
    nb.d_q_norm_weight = Tensor::dense(at(8), ElementType::Float32, {8});
    nb.d_k_norm_weight = Tensor::dense(at(9), ElementType::Float32, {8});
    nb.backward = true;
    out.emplace_back(spec_from("name: n\nhead_dim: 8\nqk_norm: {eps: 1.0e-6}\n"), nb);
    Call g;  // fp8 codes with a scale per group of 4 dims
    g.q = Tensor::dense(at(0), ElementType::Float32, {1, 4, 2, 8});
    g.out_q = Tensor::dense(at(1), ElementType::UInt8, {1, 4, 2, 8});
    g.out_scales = Tensor::dense(at(2), ElementType::Float32, {1, 4, 2, 2});
    out.emplace_back(spec_from("name: g\nhead_dim: 8\noutput_dtype: fp8_e4m3\noutput_quant: {group: 4}\n"), g);
    return out;
  }
};

TEST(CallData, EveryTensorArgumentWithElementsButNoDataIsRefusedByName) {
  Calls calls;
  abi::ByTensor<bool> seen;
  for (auto& [spec, call] : calls.all()) {
    ASSERT_EQ(messages(spec, call), "");
    const bool single = spec.encoding != Encoding::Rope;
    for (Arg arg : abi::kTensorArgs) {
      const abi::ArgumentInfo& a = abi::info(arg);
      if (!a.call_tensor || !(call.*a.call_tensor)) continue;
      seen[arg] = true;
      Call broken = call;
      (broken.*a.call_tensor)->data = nullptr;
      const std::string name = abi::user_name(a.arg, single);
      EXPECT_NE(messages(spec, broken).find(name + ": error: " + name + " has "), std::string::npos)
          << name << ": " << messages(spec, broken);
      EXPECT_NE(messages(spec, broken).find("elements but no data (a null pointer)"), std::string::npos) << name;
    }
  }
  for (Arg arg : abi::kTensorArgs) {
    if (abi::info(arg).call_tensor) {
      EXPECT_TRUE(seen[arg]) << abi::info(arg).name;
    }
  }
}

TEST(CallData, EmptyTensorsOfACallWithWorkGetAnAddress) {
  const RopeSpec spec = spec_from("name: r\nhead_dim: 8\n");
  std::vector<float> q(2 * 3 * 8);
  Call c;
  c.q = Tensor::dense(q.data(), ElementType::Float32, {1, 2, 3, 8});
  c.k = Tensor::dense(nullptr, ElementType::Float32, {1, 2, 0, 8});  // 0 heads: torch's data is null
  c.out_k = Tensor::dense(nullptr, ElementType::Float32, {1, 2, 0, 8});
  Result<call::PreparedCall> p = call::prepare_call(spec, c);
  ASSERT_TRUE(p.ok()) << format(p.errors());
  EXPECT_TRUE((*p)[Arg::K].empty());
  EXPECT_NE((*p)[Arg::K].data, nullptr);
  EXPECT_NE((*p)[Arg::OutK].data, nullptr);
  // Nothing to do: the views stay as given (no kernel runs).
  c.q = Tensor::dense(nullptr, ElementType::Float32, {1, 0, 3, 8});
  c.k = c.out_k = Tensor::dense(nullptr, ElementType::Float32, {1, 0, 2, 8});
  p = call::prepare_call(spec, c);
  ASSERT_TRUE(p.ok()) << format(p.errors());
  EXPECT_EQ((*p)[Arg::Q].data, nullptr);
}

TEST(CallData, AnOffsetNextToPositionIdsIsRefused) {
  const RopeSpec spec = spec_from("name: r\nhead_dim: 8\nlayout: thd\npositions: explicit\n");
  std::vector<float> q(2 * 8);
  std::vector<int32_t> ids = {3, 4};
  Call c;
  c.q = Tensor::dense(q.data(), ElementType::Float32, {2, 1, 8});
  c.positions = Tensor::dense(ids.data(), ElementType::Int32, {2});
  EXPECT_EQ(messages(spec, c), "");
  c.offset = 5;
  EXPECT_EQ(messages(spec, c), "offset: error: offset (5) is for implicit positions (offset + index); with position "
                               "ids, add it to the ids (or pass offset 0)\n");
}

TEST(CallData, PositionsPastTwoToThe32AreRefused) {
  const RopeSpec spec = spec_from("name: r\nhead_dim: 8\nlayout: thd\n");
  std::vector<float> q(2 * 8);
  Call c;
  c.q = Tensor::dense(q.data(), ElementType::Float32, {2, 1, 8});
  c.offset = (int64_t{1} << 32) - 1;  // the last token at 2^32
  EXPECT_EQ(messages(spec, c), "");
  c.offset += 1;
  EXPECT_EQ(messages(spec, c),
            "offset: error: position (offset + index) 4294967297 is out of range: positions must be in 0..2^32 "
            "(4294967296; past it the float64 angle loses accuracy); the offset is 4294967296\n");
}

}  // namespace
}  // namespace ropegen
