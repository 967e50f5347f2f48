#include "kernels/encoding_sweeps.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "abi/kernel_abi.h"
#include "call/contract.h"
#include "ropegen/spec_io.h"
#include "runtime/host_tensor.h"
#include "support/reference.h"
#include "support/sweep_subset.h"

namespace ropegen::test {
namespace {

using abi::Arg;

RopeSpec parse(const std::string& text) {
  Result<RopeSpec> spec = parse_spec(text, "case");
  if (!spec) throw std::invalid_argument(format(spec.errors()));
  return *spec;
}

int64_t elements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t e : shape) n *= e;
  return n;
}

// Deterministic data, already rounded to the spec's dtype so that the
// reference sees exactly what the kernel reads.
runtime::HostArray tensor(std::vector<int64_t> shape, DType dtype, uint32_t seed, double scale = 1.0) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal(0.0f, static_cast<float>(scale));
  std::vector<float> data(elements(shape));
  for (float& v : data) v = normal(gen);
  return runtime::HostArray::of_floats(std::move(shape), runtime::to_storage(data, dtype).to_float());
}

// qk_norm's per-head weight: [head_dim] values in [0.5, 1.5], rounded to `dtype`.
runtime::HostArray norm_weight(int64_t head_dim, DType dtype, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> near_one(0.5f, 1.5f);
  std::vector<float> data(head_dim);
  for (float& v : data) v = near_one(gen);
  return runtime::HostArray::of_floats({head_dim}, runtime::to_storage(data, dtype).to_float());
}

runtime::HostArray ids(std::vector<int64_t> shape, int64_t limit, bool int64, uint32_t seed) {
  std::mt19937 gen(seed);
  std::vector<int64_t> v(elements(shape));
  for (int64_t& x : v) x = std::uniform_int_distribution<int64_t>(0, limit - 1)(gen);
  return runtime::HostArray::of_ids(std::move(shape), std::move(v), int64);
}

ref::Tensor as_ref(const runtime::HostArray& t) {
  return {t.shape, std::vector<double>(t.floats.begin(), t.floats.end())};
}

// Sequence starts, as int64 ids.
runtime::HostArray starts(std::vector<int64_t> cu) {
  const int64_t n = static_cast<int64_t>(cu.size());
  return runtime::HostArray::of_ids({n}, std::move(cu));
}

void expect_near(const std::string& what, DType dtype, const std::vector<float>& got, const std::vector<double>& want,
                 double relaxed = 1.0) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int bad = 0;
  for (size_t i = 0; i < got.size() && bad < 5; ++i)
    if (!(std::abs(got[i] - want[i]) <= relaxed * tolerance(dtype, want[i])))
      ADD_FAILURE() << what << "[" << i << "] = " << got[i] << ", reference " << want[i], ++bad;
}

// seq_len as HF derives it when the call gives none: the largest position
// read + 1 (ids; or offset + the longest sequence, packed: by cu_seqlens).
int64_t hf_seq_len(const RopeSpec& spec, const runtime::ApplyRequest& r) {
  if (r.seq_len) return *r.seq_len;
  if (r[Arg::Positions]) return *std::max_element(r[Arg::Positions]->ints.begin(), r[Arg::Positions]->ints.end()) + 1;
  const abi::LayoutTraits& traits = abi::layout_traits(abi::tensor_layout(spec.encoding, spec.layout));
  int64_t longest = r[Arg::Q]->shape[traits.s];
  if (r[Arg::CuSeqlens]) {
    const std::vector<int64_t>& cu = r[Arg::CuSeqlens]->ints;
    longest = 0;
    for (size_t i = 0; i + 1 < cu.size(); ++i) longest = std::max(longest, cu[i + 1] - cu[i]);
  }
  return r.offset + longest;
}

ref::Call reference_call(const runtime::ApplyRequest& r, int64_t seq_len) {
  ref::Call call;
  if (r[Arg::Positions])
    call.positions = ref::Tensor{r[Arg::Positions]->shape,
                                 std::vector<double>(r[Arg::Positions]->ints.begin(), r[Arg::Positions]->ints.end())};
  call.offset = r.offset;
  if (r[Arg::CuSeqlens]) call.cu_seqlens = r[Arg::CuSeqlens]->ints;
  call.seq_len = seq_len;
  if (r[Arg::Freqs]) call.inv_freq.assign(r[Arg::Freqs]->floats.begin(), r[Arg::Freqs]->floats.end());
  if (r[Arg::Table]) call.table = as_ref(*r[Arg::Table]);
  if (r[Arg::CosSinCache]) call.cos_sin_cache = as_ref(*r[Arg::CosSinCache]);
  if (r[Arg::QNormWeight])
    call.q_norm_weight.assign(r[Arg::QNormWeight]->floats.begin(), r[Arg::QNormWeight]->floats.end());
  if (r[Arg::KNormWeight])
    call.k_norm_weight.assign(r[Arg::KNormWeight]->floats.begin(), r[Arg::KNormWeight]->floats.end());
  return call;
}

EncodingCase make(std::string spec, runtime::HostArray q, std::optional<runtime::HostArray> k = std::nullopt) {
  EncodingCase c;
  c.spec = std::move(spec);
  c.request[Arg::Q] = std::move(q);
  c.request[Arg::K] = std::move(k);
  return c;
}

}  // namespace

double tolerance(DType dtype, double want) {
  const double scale = std::max(1.0, std::abs(want));
  switch (dtype) {
    case DType::F32: return 4e-6 * scale;
    case DType::F16: return 2e-3 * scale;
    case DType::BF16: return 8e-3 * scale;
  }
  return 0;
}

EncodingCase as_encoding_case(const Case& c) {
  const RopeSpec spec = parse(c.spec_text());
  auto shape = [&](int heads) -> std::vector<int64_t> {
    if (c.layout == "bshd") return {c.B, c.S, heads, c.head_dim};
    if (c.layout == "bhsd") return {c.B, heads, c.S, c.head_dim};
    if (c.layout == "sbhd") return {c.S, c.B, heads, c.head_dim};
    return {c.S, heads, c.head_dim};  // thd: S = T
  };
  EncodingCase e;
  e.spec = c.spec_text();
  e.request[Arg::Q] = tensor(shape(c.H), spec.dtype, 11, 1.5);
  if (c.Hk) e.request[Arg::K] = tensor(shape(c.Hk), spec.dtype, 12, 1.5);
  if (c.explicit_positions) {
    std::vector<int64_t> ids_shape = {c.S};
    if (c.layout != "thd" && !c.shared_positions) ids_shape = c.layout == "sbhd" ? std::vector<int64_t>{c.S, c.B} : std::vector<int64_t>{c.B, c.S};
    e.request[Arg::Positions] = ids(ids_shape, 70000, c.int64_positions, 13);
  }
  if (!c.cu_seqlens.empty()) e.request[Arg::CuSeqlens] = starts(c.cu_seqlens);
  if (spec.qk_norm.has_weight()) {  // near one, as trained norms are
    e.request[Arg::QNormWeight] = norm_weight(c.head_dim, spec.dtype, 14);
    if (c.Hk) e.request[Arg::KNormWeight] = norm_weight(c.head_dim, spec.dtype, 15);
  }
  e.request.backward = c.backward;
  if (!c.output_dtype.empty()) {  // fp8 codes' scales (output_quant: per group, none given)
    if (!c.quant_group) e.request.q_scale = c.q_scale;
    e.request.k_scale = c.k_scale;
  }
  if (c.backward && spec.qk_norm.enabled) {  // the forward's inputs
    e.request[Arg::SavedQ] = tensor(shape(c.H), spec.dtype, 16, 1.5);
    if (c.Hk) e.request[Arg::SavedK] = tensor(shape(c.Hk), spec.dtype, 17, 1.5);
  }
  e.request.offset = c.offset;
  return e;
}

std::string EncodingCase::describe() const {
  return fmt::format("{}{}offset {}, q/x shape [{}]", spec, request.backward ? "backward, " : "", request.offset,
                     fmt::join(request[Arg::Q]->shape, ","));
}

std::vector<EncodingCase> sweep_sinusoidal_and_learned() {
  std::vector<EncodingCase> out;
  uint32_t seed = 1;
  for (const char* layout : {"bsd", "sbd", "td"})
    for (int dim : {1, 9, 64, 130})
      for (const char* dtype : {"f32", "bf16"})
        for (const char* form : {"interleaved", "roformer"}) {
          const std::string spec = fmt::format("name: s\nencoding: sinusoidal\ndim: {}\nlayout: {}\ndtype: {}\ntable_form: {}\nbase: {}\n",
                                               dim, layout, dtype, form, dim == 64 ? 500.0 : 10000.0);
          const DType dt = parse(spec).dtype;
          const bool packed = std::string(layout) == "td";
          const std::vector<int64_t> shape = packed ? std::vector<int64_t>{11, dim} : std::vector<int64_t>{2, 5, dim};
          EncodingCase c = make(spec, tensor(shape, dt, seed++));
          if (packed)
            c.request[Arg::CuSeqlens] = starts({0, 4, 4, 11});
          else c.request.offset = dim % 2 ? 7 : 65533;  // across a 16-position block boundary
          out.push_back(std::move(c));
        }
  // Explicit ids ([B, S] int64, [S] shared int32), long positions.
  for (bool shared : {false, true}) {
    const std::string spec = "name: s\nencoding: sinusoidal\ndim: 48\npositions: explicit\n";
    EncodingCase c = make(spec, tensor({3, 4, 48}, DType::F32, seed++));
    c.request[Arg::Positions] = shared ? ids({4}, 1 << 20, false, seed++) : ids({3, 4}, 100000, true, seed++);
    out.push_back(std::move(c));
  }
  for (const char* layout : {"bsd", "sbd", "td"})
    for (bool explicit_ids : {true, false})
      for (const char* dtype : {"f32", "f16"}) {
        const std::string spec = fmt::format("name: l\nencoding: learned\ndim: 37\nlayout: {}\ndtype: {}\npositions: {}\n",
                                             layout, dtype, explicit_ids ? "explicit" : "implicit");
        const DType dt = parse(spec).dtype;
        const bool packed = std::string(layout) == "td";
        const std::vector<int64_t> shape = packed ? std::vector<int64_t>{6, 37} : std::vector<int64_t>{2, 3, 37};
        EncodingCase c = make(spec, tensor(shape, dt, seed++));
        c.request[Arg::Table] = tensor({20, 37}, dt, seed++);
        if (explicit_ids)
          c.request[Arg::Positions] =
              ids(packed ? std::vector<int64_t>{6} : std::vector<int64_t>{shape[0], shape[1]}, 20, false, seed++);
        else c.request.offset = 3;
        out.push_back(std::move(c));
      }
  return out;
}

std::vector<EncodingCase> sweep_alibi() {
  std::vector<EncodingCase> out;
  uint32_t seed = 100;
  for (const char* form : {"symmetric", "causal", "bloom"})
    for (int heads : {1, 5, 8, 12})
      for (auto [sq, sk, offset] : {std::tuple{1, 1, 0}, std::tuple{4, 7, 3}, std::tuple{3, 33, 30}, std::tuple{9, 9, 0}})
        for (const char* dtype : {"f32", "bf16"}) {
          const std::string spec = fmt::format("name: a\nencoding: alibi\nnum_heads: {}\nform: {}\ndtype: {}\n", heads, form, dtype);
          EncodingCase c = make(spec, tensor({2, heads, sq, sk}, parse(spec).dtype, seed++));
          c.request.offset = offset;
          out.push_back(std::move(c));
        }
  return out;
}

std::vector<EncodingCase> sweep_multi_axis_rope() {
  std::vector<EncodingCase> out;
  uint32_t seed = 200;
  struct Axes {
    const char* text;
    int axes;
  };
  const Axes variants[] = {{"{sections: [2, 3, 3]}", 3},
                           {"{sections: [4, 2, 2], interleaved: true}", 3},
                           {"{sections: [4, 4], per_axis_frequencies: true}", 2},
                           {"{sections: [5, 3], per_axis_frequencies: true, interleaved: true}", 2}};
  for (const Axes& a : variants)
    for (const char* layout : {"bshd", "sbhd", "thd"})
      for (const char* pairing : {"half", "interleaved"}) {
        const std::string spec = fmt::format("name: m\nhead_dim: 20\nrotary_dim: 16\npairing: {}\nlayout: {}\npositions: "
                                             "explicit\naxes: {}\nfrequency: {{theta: 1000000}}\n",
                                             pairing, layout, a.text);
        const bool packed = std::string(layout) == "thd";
        const std::vector<int64_t> q_shape = packed ? std::vector<int64_t>{7, 4, 20} : std::vector<int64_t>{2, 5, 4, 20};
        std::vector<int64_t> k_shape = q_shape;
        k_shape[packed ? 1 : 2] = 2;
        runtime::HostArray q = tensor(q_shape, DType::F32, seed++);
        EncodingCase c = make(spec, std::move(q), tensor(k_shape, DType::F32, seed++));
        std::vector<int64_t> pos_shape(q_shape.begin(), q_shape.end() - (packed ? 2 : 2));
        pos_shape.push_back(a.axes);
        c.request[Arg::Positions] = ids(pos_shape, 4096, pos_shape.size() == 3, seed++);
        out.push_back(std::move(c));
      }
  return out;
}

std::vector<EncodingCase> sweep_backward_and_runtime_frequencies() {
  std::vector<EncodingCase> out;
  uint32_t seed = 300;
  const char* specs[] = {
      "name: b\nhead_dim: 16\n",
      "name: b\nhead_dim: 24\nrotary_dim: 16\nrotary_offset: 4\npairing: interleaved\nlayout: sbhd\n",
      "name: b\nhead_dim: 24\nrotary_dim: 8\nrotary_offset: 16\npairing: interleaved\noutput_pairing: half\nlayout: thd\n",
      "name: b\nhead_dim: 16\nxpos: {scale_base: 16}\n",
      "name: b\nhead_dim: 32\ndtype: bf16\nscaling: {type: yarn, factor: 4, original_max_position: 32}\nlayout: bhsd\n",
      "name: b\nhead_dim: 16\npositions: explicit\naxes: {sections: [2, 3, 3]}\n",
      "name: b\nhead_dim: 16\nfrequency: {scheme: runtime}\n",
      "name: b\nhead_dim: 20\nrotary_dim: 12\npairing: interleaved\nfrequency: {scheme: runtime}\nxpos: {scale_base: 8}\n",
  };
  for (const char* text : specs)
    for (bool backward : {false, true}) {
      const RopeSpec spec = parse(text);
      const bool runtime_freqs = spec.frequency.scheme == FrequencyScheme::Runtime;
      if (!backward && !runtime_freqs) continue;  // the forward is the CPU/GPU kernel tests' job
      const bool packed = spec.layout == Layout::THD;
      std::vector<int64_t> q_shape = packed ? std::vector<int64_t>{7, 3, spec.head_dim} : std::vector<int64_t>{2, 5, 3, spec.head_dim};
      if (spec.layout == Layout::BHSD) std::swap(q_shape[1], q_shape[2]);
      std::vector<int64_t> k_shape = q_shape;
      k_shape[spec.layout == Layout::BSHD || spec.layout == Layout::SBHD ? 2 : 1] = 1;
      runtime::HostArray q = tensor(q_shape, spec.dtype, seed++);
      EncodingCase c = make(text, std::move(q), tensor(k_shape, spec.dtype, seed++));
      c.request.backward = backward;
      if (spec.axes.enabled()) c.request[Arg::Positions] = ids({2, 5, 3}, 64, false, seed++);
      if (packed) c.request[Arg::CuSeqlens] = starts({0, 3, 7});
      if (runtime_freqs) {
        c.request[Arg::Freqs] = tensor({spec.num_pairs()}, DType::F32, seed++, 0.3);
        if (backward) {
          c.request[Arg::SavedQ] = tensor(q_shape, spec.dtype, seed++);
          c.request[Arg::SavedK] = tensor(k_shape, spec.dtype, seed++);
        }
      }
      out.push_back(std::move(c));
    }
  // dL/d(inv_freq) summed over every level of its reduction (lowering's
  // d_freqs_levels): 4161 tokens a sequence = 65 groups of 64 and one
  // token, then a group of 64 groups and one of 2; bf16, so that host and
  // GPU read the same rounded inputs.
  const char* many_tokens = "name: b\nhead_dim: 8\ndtype: bf16\nfrequency: {scheme: runtime}\n";
  for (bool packed : {false, true}) {
    const std::vector<int64_t> q_shape = packed ? std::vector<int64_t>{4161, 2, 8} : std::vector<int64_t>{2, 4161, 2, 8};
    std::vector<int64_t> k_shape = q_shape;
    k_shape[packed ? 1 : 2] = 1;
    runtime::HostArray q = tensor(q_shape, DType::BF16, seed++);  // q's seed, then k's (arguments have no order)
    EncodingCase c = make(packed ? std::string(many_tokens) + "layout: thd\n" : many_tokens, std::move(q),
                          tensor(k_shape, DType::BF16, seed++));
    c.request.backward = true;
    if (packed) c.request[Arg::CuSeqlens] = starts({0, 100, 4161});
    c.request[Arg::Freqs] = tensor({4}, DType::F32, seed++, 0.3);
    c.request[Arg::SavedQ] = tensor(q_shape, DType::BF16, seed++);
    c.request[Arg::SavedK] = tensor(k_shape, DType::BF16, seed++);
    out.push_back(std::move(c));
  }
  return out;
}

// A cos/sin cache as engines keep it, rows for positions 0 .. rows-1, from
// the independent reference of `source`: a spec that computes them (its
// scaling and attention factor), float32 [rows, rotary_dim].
runtime::HostArray reference_cache(const std::string& source, int64_t rows) {
  const RopeSpec spec = parse(source);
  ref::Call call;
  call.positions = ref::Tensor{{rows}, {}};
  for (int64_t p = 0; p < rows; ++p) call.positions->data.push_back(static_cast<double>(p));
  const ref::Tensor t = ref::reference_table(spec, call);
  return runtime::HostArray::of_floats(t.shape, std::vector<float>(t.data.begin(), t.data.end()));
}

std::vector<EncodingCase> sweep_cos_sin_cache() {
  std::vector<EncodingCase> out;
  uint32_t seed = 400;
  // What the caches hold: each computed by the reference from a spec with
  // the case's dims and one of these (yarn and longrope: attention factor != 1).
  auto source = [](int pairs, int which) -> std::string {
    std::vector<int> short_f, long_f;
    for (int i = 0; i < pairs; ++i) short_f.push_back(1 + i % 3), long_f.push_back(4 + i);
    switch (which % 3) {
      case 0: return "frequency: {theta: 500000}\nscaling: {type: llama3, factor: 8, original_max_position: 64}\n";
      case 1: return "scaling: {type: yarn, factor: 8, original_max_position: 64, mscale: 1, mscale_all_dim: 0.5}\n";
      default:
        return fmt::format("scaling: {{type: longrope, factor: 16, original_max_position: 8, policy: long, "
                           "short_factor: [{}], long_factor: [{}]}}\n",
                           fmt::join(short_f, ", "), fmt::join(long_f, ", "));
    }
  };
  // The spec without frequency keys (`dims`), computing (+ source) and reading the cache.
  auto add = [&](const std::string& dims, int which, runtime::HostArray q, std::optional<runtime::HostArray> k,
                 int64_t rows) {
    const RopeSpec spec = parse(dims);
    EncodingCase c = make(dims + "frequency: {scheme: table}\n", std::move(q), std::move(k));
    c.request[Arg::CosSinCache] = reference_cache(dims + source(spec.num_pairs(), which), rows);
    out.push_back(std::move(c));
    return &out.back();
  };
  int which = 0;
  // layout x pairing x dtype; partial, offset, thd sequences.
  for (const char* layout : {"bshd", "bhsd", "sbhd", "thd"})
    for (const char* pairing : {"half", "interleaved"})
      for (const char* dtype : {"f32", "f16", "bf16"}) {
        const std::string dims = fmt::format("name: c\nhead_dim: 20\nrotary_dim: 12\nrotary_offset: 4\npairing: {}\n"
                                             "layout: {}\ndtype: {}\n", pairing, layout, dtype);
        const DType dt = parse(dims).dtype;
        const bool packed = std::string(layout) == "thd";
        std::vector<int64_t> q_shape = packed ? std::vector<int64_t>{7, 3, 20} : std::vector<int64_t>{2, 7, 3, 20};
        if (std::string(layout) == "bhsd") std::swap(q_shape[1], q_shape[2]);
        if (std::string(layout) == "sbhd") std::swap(q_shape[0], q_shape[1]);
        std::vector<int64_t> k_shape = q_shape;
        k_shape[std::string(layout) == "bhsd" || packed ? 1 : 2] = 1;
        runtime::HostArray q = tensor(q_shape, dt, seed++), k = tensor(k_shape, dt, seed++);
        EncodingCase* c = add(dims, which++, std::move(q), std::move(k), 12);
        if (packed) c->request[Arg::CuSeqlens] = starts({0, 3, 7});
        c->request.offset = 5;  // last position read: 5 + 6 = 11, the cache's last row
      }
  // Explicit int32 / int64 ids, per sequence or shared by the batch; q alone.
  for (const char* layout : {"bshd", "sbhd", "thd"})
    for (bool int64 : {false, true})
      for (bool shared : {false, true}) {
        const std::string dims = fmt::format("name: c\nhead_dim: 16\nlayout: {}\npositions: explicit\n", layout);
        const bool packed = std::string(layout) == "thd";
        if (packed && !shared) continue;
        std::vector<int64_t> q_shape = packed ? std::vector<int64_t>{9, 4, 16} : std::vector<int64_t>{2, 9, 4, 16};
        if (std::string(layout) == "sbhd") std::swap(q_shape[0], q_shape[1]);
        EncodingCase* c = add(dims, which++, tensor(q_shape, DType::F32, seed++), std::nullopt, 3000);
        std::vector<int64_t> id_shape = {9};
        if (!shared) id_shape = std::string(layout) == "sbhd" ? std::vector<int64_t>{9, 2} : std::vector<int64_t>{2, 9};
        c->request[Arg::Positions] = ids(id_shape, 3000, int64, seed++);
      }
  // Backward (rotation by -angle with the same cache), q and k, and odd sizes.
  for (const char* dims : {"name: c\nhead_dim: 16\n",
                           "name: c\nhead_dim: 24\nrotary_dim: 16\nrotary_offset: 4\npairing: interleaved\nlayout: sbhd\n"
                           "dtype: bf16\n",
                           "name: c\nhead_dim: 24\nrotary_dim: 8\nrotary_offset: 16\npairing: interleaved\n"
                           "output_pairing: half\nlayout: thd\ndtype: f16\n"})
    for (bool backward : {false, true}) {
      const RopeSpec spec = parse(dims);
      const bool packed = spec.layout == Layout::THD;
      std::vector<int64_t> q_shape = packed ? std::vector<int64_t>{7, 3, spec.head_dim} : std::vector<int64_t>{2, 5, 3, spec.head_dim};
      if (spec.layout == Layout::SBHD) std::swap(q_shape[0], q_shape[1]);
      std::vector<int64_t> k_shape = q_shape;
      k_shape[packed ? 1 : 2] = 2;
      runtime::HostArray q = tensor(q_shape, spec.dtype, seed++), k = tensor(k_shape, spec.dtype, seed++);
      EncodingCase* c = add(dims, which++, std::move(q), std::move(k), 40);
      c->request.backward = backward;
      c->request.offset = 30;
      if (packed) c->request[Arg::CuSeqlens] = starts({0, 3, 7});
    }
  // cos/sin of a token past 16 KiB: per thread, in registers, on GPUs.
  {
    runtime::HostArray q = tensor({1, 3, 2, 8192}, DType::F32, seed++), k = tensor({1, 3, 1, 8192}, DType::F32, seed++);
    add("name: c\nhead_dim: 8192\n", which++, std::move(q), std::move(k), 3);
  }
  for (auto [d, r, off] : {std::tuple{2, 2, 0}, std::tuple{130, 34, 96}}) {
    const std::string dims = fmt::format("name: c\nhead_dim: {}\nrotary_dim: {}\nrotary_offset: {}\n", d, r, off);
    add(dims, which++, tensor({1, 1, 1, d}, DType::F32, seed++), std::nullopt, 1);
    runtime::HostArray q = tensor({3, 1, 5, d}, DType::BF16, seed++), k = tensor({3, 1, 5, d}, DType::BF16, seed++);
    add(dims, which++, std::move(q), std::move(k), 1);
  }
  // Multi-axis: each pair reads the row of its own axis's position.
  for (const char* axes : {"{sections: [2, 3, 3]}", "{sections: [4, 2, 2], interleaved: true}"})
    for (const char* layout : {"bshd", "thd"}) {
      const std::string dims =
          fmt::format("name: c\nhead_dim: 20\nrotary_dim: 16\nlayout: {}\npositions: explicit\naxes: {}\n", layout, axes);
      const bool packed = std::string(layout) == "thd";
      const std::vector<int64_t> q_shape = packed ? std::vector<int64_t>{7, 4, 20} : std::vector<int64_t>{2, 5, 4, 20};
      std::vector<int64_t> k_shape = q_shape;
      k_shape[packed ? 1 : 2] = 2;
      // The cache's source is 1-D: cos/sin of pair r depend on its position, not its axis.
      runtime::HostArray q = tensor(q_shape, DType::F32, seed++), k = tensor(k_shape, DType::F32, seed++);
      EncodingCase c = make(dims + "frequency: {scheme: table}\n", std::move(q), std::move(k));
      c.request[Arg::CosSinCache] =
          reference_cache(fmt::format("name: c\nhead_dim: 20\nrotary_dim: 16\n{}", source(8, which++)), 500);
      c.request[Arg::Positions] =
          ids(packed ? std::vector<int64_t>{7, 3} : std::vector<int64_t>{2, 5, 3}, 500, !packed, seed++);
      out.push_back(std::move(c));
    }
  return out;
}

ReferenceOutputs reference_outputs(const EncodingCase& c) {
  const RopeSpec spec = parse(c.spec);
  const runtime::ApplyRequest& r = c.request;
  const ref::Call call = reference_call(r, hf_seq_len(spec, r));
  ReferenceOutputs want;
  switch (spec.encoding) {
    case Encoding::Sinusoidal:
    case Encoding::Learned: want.out_q = ref::reference_add_positions(spec, as_ref(*r[Arg::Q]), call).data; break;
    case Encoding::Alibi: want.out_q = ref::reference_alibi(spec, as_ref(*r[Arg::Q]), r.offset).data; break;
    case Encoding::Rope: {
      std::vector<double> d_freqs(spec.num_pairs(), 0.0);
      auto rotate = [&](const runtime::HostArray& in, const std::optional<runtime::HostArray>& saved, bool is_key) {
        if (!r.backward) return ref::reference_apply(spec, as_ref(in), is_key, call).data;
        const ref::Tensor saved_ref = saved ? as_ref(*saved) : ref::Tensor{};
        ref::Gradients g = ref::reference_backward(spec, as_ref(in), saved ? &saved_ref : nullptr, is_key, call);
        for (size_t i = 0; i < g.d_inv_freq.size(); ++i) d_freqs[i] += g.d_inv_freq[i];
        if (!g.d_norm_weight.empty()) (is_key ? want.d_k_norm_weight : want.d_q_norm_weight) = g.d_norm_weight;
        return std::move(g.dx.data);
      };
      want.out_q = rotate(*r[Arg::Q], r[Arg::SavedQ], false);
      if (r[Arg::K]) want.out_k = rotate(*r[Arg::K], r[Arg::SavedK], true);
      if (r.backward && r[Arg::Freqs]) want.d_freqs = std::move(d_freqs);
      break;
    }
  }
  return want;
}

std::optional<runtime::ApplyResult> run_encoding_case(const EncodingCase& c, const std::string& target) {
  SCOPED_TRACE(c.describe());
  const RopeSpec spec = parse(c.spec);
  runtime::ApplyRequest r = c.request;
  r.target = target;
  Result<runtime::ApplyResult> result = runtime::apply_on_host(spec, r);
  if (!result) {
    ADD_FAILURE() << format(result.errors());
    return std::nullopt;
  }
  const ReferenceOutputs want = reference_outputs(c);
  const bool rope = spec.encoding == Encoding::Rope;
  const std::string d = r.backward ? "d" : "";
  auto floats = [&](Arg a) { return (*result)[a] ? (*result)[a]->floats : std::vector<float>{}; };
  expect_near(rope ? d + "q" : "x", spec.dtype, result->out_q(), want.out_q);
  if (want.out_k) expect_near(d + "k", spec.dtype, floats(Arg::OutK), *want.out_k);
  // A sum over every row: float32 terms accumulated in float64.
  if (want.d_freqs) expect_near("d_freqs", DType::F32, floats(Arg::DFreqs), *want.d_freqs, kSumTolerance);
  if (want.d_q_norm_weight)
    expect_near("d_q_norm_weight", DType::F32, floats(Arg::DQNormWeight), *want.d_q_norm_weight, kSumTolerance);
  if (want.d_k_norm_weight)
    expect_near("d_k_norm_weight", DType::F32, floats(Arg::DKNormWeight), *want.d_k_norm_weight, kSumTolerance);
  return std::move(result).value();
}

void run_encoding_sweep(const std::vector<EncodingCase>& cases, const std::string& target, bool against_host) {
  int differing = 0;
  for (const EncodingCase& c : sweep_subset(cases)) {
    const std::optional<runtime::ApplyResult> got = run_encoding_case(c, target);
    if (!got || !against_host) continue;
    const std::optional<runtime::ApplyResult> host = run_encoding_case(c, "host");
    if (!host) continue;
    auto floats = [](const runtime::ApplyResult& r, Arg a) { return r[a] ? r[a]->floats : std::vector<float>{}; };
    bool same = true;
    for (Arg a : {Arg::OutQ, Arg::OutK, Arg::DFreqs}) same = same && floats(*got, a) == floats(*host, a);
    if (!same && differing++ < 5) ADD_FAILURE() << target << " differs from the host's bits: " << c.describe();
  }
}

double adjoint_error(const std::string& spec_text, const std::string& target) {
  const RopeSpec spec = parse(spec_text);
  runtime::ApplyRequest forward;
  forward[Arg::Q] = tensor({2, 6, 3, spec.head_dim}, spec.dtype, 7);
  forward.target = target;
  runtime::ApplyRequest backward = forward;
  backward[Arg::Q] = tensor(forward[Arg::Q]->shape, spec.dtype, 8);
  backward.backward = true;
  backward.seq_len = forward.seq_len = 6;
  Result<runtime::ApplyResult> y = runtime::apply_on_host(spec, forward), dx = runtime::apply_on_host(spec, backward);
  if (!y || !dx) throw std::runtime_error(format(y ? dx.errors() : y.errors()));
  double lhs = 0, rhs = 0, norm = 0;
  const std::vector<float>&x = forward[Arg::Q]->floats, &g = backward[Arg::Q]->floats;
  for (size_t i = 0; i < y->out_q().size(); ++i) {
    lhs += static_cast<double>(y->out_q()[i]) * g[i];
    rhs += static_cast<double>(x[i]) * dx->out_q()[i];
    norm += std::abs(static_cast<double>(y->out_q()[i]) * g[i]);
  }
  return std::abs(lhs - rhs) / norm;
}

}  // namespace ropegen::test
