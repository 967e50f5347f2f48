#include "kernels/kernel_case.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include <fmt/format.h>

#include "lowering/storage.h"
#include "ropegen/spec_io.h"
#include "ropegen/kernel.h"
#include "ropegen/runtime.h"
#include "call/contract.h"
#include "kernels/device_mirror.h"
#include "support/reference.h"

namespace ropegen::test {
namespace {

std::vector<int64_t> shape_of(const Case& c, int heads) {
  if (c.layout == "bshd") return {c.B, c.S, heads, c.head_dim};
  if (c.layout == "bhsd") return {c.B, heads, c.S, c.head_dim};
  if (c.layout == "sbhd") return {c.S, c.B, heads, c.head_dim};
  return {c.S, heads, c.head_dim};  // thd: S = T
}

// Values representable in the storage type, so the reference sees exactly the kernel's input.
float round_to(DType t, float v) {
  if (t == DType::F16) return static_cast<float>(Halide::float16_t(v));
  if (t == DType::BF16) return static_cast<float>(Halide::bfloat16_t(v));
  return v;
}

double tolerance(DType t, double ref) {
  const double rel = t == DType::F32 ? 1e-6 : t == DType::F16 ? std::ldexp(1.0, -11) : std::ldexp(1.0, -8);
  return 3e-6 + rel * std::abs(ref);
}

struct Tensor {
  std::vector<int64_t> shape;
  std::vector<float> values;   // exact (already rounded to the storage type)
  Halide::Buffer<> storage;    // dense, spec dtype, in the layout's own order
};

Tensor make_tensor(const RopeSpec& spec, std::vector<int64_t> shape, std::mt19937& rng) {
  Tensor t;
  t.shape = shape;
  int64_t n = 1;
  for (auto d : shape) n *= d;
  std::normal_distribution<float> dist(0.0f, 1.5f);
  const Halide::Type type = lowering::storage_type(spec.dtype);
  std::vector<int> extents(shape.rbegin(), shape.rend());  // Halide order: innermost first
  t.storage = Halide::Buffer<>(type, extents);
  for (int64_t i = 0; i < n; ++i) {
    const float v = round_to(spec.dtype, dist(rng));
    t.values.push_back(v);
    if (spec.dtype == DType::F32) static_cast<float*>(t.storage.data())[i] = v;
    else if (spec.dtype == DType::F16) static_cast<Halide::float16_t*>(t.storage.data())[i] = Halide::float16_t(v);
    else static_cast<Halide::bfloat16_t*>(t.storage.data())[i] = Halide::bfloat16_t(v);
  }
  return t;
}

double element(const Halide::Buffer<>& b, DType t, int64_t i) {
  if (t == DType::F32) return static_cast<const float*>(b.data())[i];
  if (t == DType::F16) return static_cast<double>(static_cast<const Halide::float16_t*>(b.data())[i]);
  return static_cast<double>(static_cast<const Halide::bfloat16_t*>(b.data())[i]);
}

// fp8 codes against the float64 reference's: the code of every value the
// kernel's float32 rotation can have computed (within the f32 tolerance of
// the reference) divided by scale, rounded once, saturated (the codes
// between those of the interval's ends, rounding being monotone).
void check_codes(const RopeSpec& spec, const ref::Tensor& want, const Halide::Buffer<>& out, float scale,
                 const char* what) {
  const KvDType format = spec.output_dtype;
  auto ordered = [](uint8_t code) { return code & 0x80 ? -(code & 0x7f) : (code & 0x7f); };
  int bad = 0;
  for (size_t i = 0; i < want.data.size() && bad < 5; ++i) {
    const uint8_t got = static_cast<const uint8_t*>(out.data())[i];
    const double x = want.data[i], tol = tolerance(DType::F32, x);
    const int lo = ordered(ref::fp8_code(format, static_cast<float>(x - tol), scale, spec.fp8_scale));
    const int hi = ordered(ref::fp8_code(format, static_cast<float>(x + tol), scale, spec.fp8_scale));
    if (ordered(got) < lo || ordered(got) > hi) {
      ADD_FAILURE() << what << "[" << i << "] = fp8 code 0x" << std::hex << int{got} << std::dec << " ("
                    << ref::fp8_value(format, got) << "), reference " << x << " and scale " << scale << " ("
                    << to_string(spec.fp8_scale) << ") -> code 0x" << std::hex
                    << int{ref::fp8_code(format, static_cast<float>(x), scale, spec.fp8_scale)} << std::dec;
      ++bad;
    }
  }
}

// output_quant: each group's scale from the float64 reference's absmax
// (the scales of absmax -+ the f32 tolerance bracket it: float32 rotation
// may move a group's absmax across a power of two), then the codes as
// check_codes' with the kernel's own scale.
void check_group_codes(const RopeSpec& spec, const ref::Tensor& want, const Halide::Buffer<>& out,
                       const Halide::Buffer<float>& scales, const char* what) {
  const int group = spec.output_quant.group;
  const float inverse_max = 1.0f / (spec.output_dtype == KvDType::Fp8E4m3 ? 448.0f : 57344.0f);
  auto scale_of = [&](double absmax) {
    float s = static_cast<float>(std::max(absmax, 1e-10)) * inverse_max;
    if (spec.output_quant.scale == QuantScale::Ue8m0) s = std::exp2(std::ceil(std::log2(s)));
    return s;
  };
  int bad = 0;
  for (size_t g = 0; g * group < want.data.size() && bad < 5; ++g) {
    double absmax = 0;
    for (int i = 0; i < group; ++i) absmax = std::max(absmax, std::abs(want.data[g * group + i]));
    const double tol = tolerance(DType::F32, absmax);
    const float got = scales.data()[g];
    if (got < scale_of(absmax - tol) * (1 - 1e-6f) || got > scale_of(absmax + tol) * (1 + 1e-6f)) {
      ADD_FAILURE() << what << " group " << g << ": scale " << got << ", reference absmax " << absmax << " -> "
                    << scale_of(absmax);
      ++bad;
      continue;
    }
    const ref::Tensor values{{group},
                             std::vector<double>(want.data.begin() + g * group, want.data.begin() + (g + 1) * group)};
    Halide::Buffer<> codes(Halide::UInt(8), group);
    std::memcpy(codes.data(), static_cast<const uint8_t*>(out.data()) + g * group, group);
    check_codes(spec, values, codes, got, what);
  }
}

CaseOutputs run_case_or_throw(const Case& c, const Halide::Target& target, Memory memory) {
  SCOPED_TRACE(c.describe());
  CaseOutputs outputs;
  Result<RopeSpec> parsed = parse_spec(c.spec_text(), "case");
  if (!parsed.ok()) {
    ADD_FAILURE() << format(parsed.errors());
    return outputs;
  }
  const RopeSpec spec = *parsed;
  std::mt19937 rng(1234);

  Tensor q = make_tensor(spec, shape_of(c, c.H), rng);
  std::optional<Tensor> k;
  if (c.Hk) k = make_tensor(spec, shape_of(c, c.Hk), rng);

  ref::Call call;
  call.offset = c.offset;
  call.cu_seqlens = c.cu_seqlens;
  std::vector<int64_t> pos_shape, pos_values;
  if (c.explicit_positions) {
    if (c.layout == "thd" || c.shared_positions) pos_shape = {c.S};
    else if (c.layout == "sbhd") pos_shape = {c.S, c.B};
    else pos_shape = {c.B, c.S};
    int64_t n = 1;
    for (auto d : pos_shape) n *= d;
    std::uniform_int_distribution<int64_t> pd(0, 70000);
    for (int64_t i = 0; i < n; ++i) pos_values.push_back(i % 3 == 0 ? i : pd(rng));
    call.positions = ref::Tensor{pos_shape, std::vector<double>(pos_values.begin(), pos_values.end())};
  }

  // seq_len as HF takes it: max position + 1.
  int64_t seq_len = 0;
  if (c.explicit_positions) {
    for (auto p : pos_values) seq_len = std::max(seq_len, p + 1);
  } else if (c.layout == "thd") {
    for (size_t i = 0; i + 1 < c.cu_seqlens.size(); ++i)
      seq_len = std::max(seq_len, c.offset + c.cu_seqlens[i + 1] - c.cu_seqlens[i]);
  } else {
    seq_len = c.offset + c.S;
  }
  call.seq_len = seq_len;

  KernelVariant variant;
  variant.with_k = k.has_value();
  variant.position_type = c.int64_positions ? IdType::Int64 : IdType::Int32;
  variant.backward = c.backward;
  variant.float32_norm_weights = c.float32_norm_weights;

  const Halide::Type type = lowering::storage_type(spec.dtype);
  const ElementType element_type = ropegen::call::element_type(ropegen::call::call_contract(spec));
  auto tensor = [&](const Halide::Buffer<>& storage, const std::vector<int64_t>& shape) {
    return ropegen::Tensor::dense(const_cast<void*>(static_cast<const void*>(storage.data())), element_type, shape.data(),
                                  static_cast<int>(shape.size()));
  };
  // fp8 outputs: uint8 codes, out of place.
  const bool fp8 = spec.has_fp8_output();
  const Halide::Type out_type = fp8 ? Halide::UInt(8) : type;
  auto output = [&](const Tensor& in) {
    Halide::Buffer<> out = c.in_place ? in.storage : Halide::Buffer<>(out_type, in.storage.number_of_elements());
    return out;
  };
  auto output_tensor = [&](const Halide::Buffer<>& storage, const std::vector<int64_t>& shape) {
    return fp8 ? ropegen::Tensor::dense(const_cast<void*>(static_cast<const void*>(storage.data())), ElementType::UInt8,
                                        shape.data(), static_cast<int>(shape.size()))
               : tensor(storage, shape);
  };
  Call rc;
  rc.q = tensor(q.storage, q.shape);
  Halide::Buffer<> out_q_storage = output(q);
  rc.out_q = output_tensor(out_q_storage, q.shape);
  Halide::Buffer<> out_k_storage;
  if (k) {
    rc.k = tensor(k->storage, k->shape);
    out_k_storage = output(*k);
    rc.out_k = output_tensor(out_k_storage, k->shape);
  }
  if (fp8 && !c.quant_group) rc.q_scale = c.q_scale;
  if (fp8) rc.k_scale = c.k_scale;
  // output_quant: q's group scales, q's shape with head_dim / group last.
  Halide::Buffer<float> out_scales;
  std::vector<int64_t> scales_shape = q.shape;
  if (c.quant_group) {
    scales_shape.back() = c.head_dim / c.quant_group;
    out_scales = Halide::Buffer<float>(static_cast<int>(q.storage.number_of_elements() / c.quant_group));
    rc.out_scales = ropegen::Tensor::dense(out_scales.data(), ElementType::Float32, scales_shape.data(),
                                           static_cast<int>(scales_shape.size()));
  }
  std::vector<int32_t> pos32(pos_values.begin(), pos_values.end());
  std::vector<int64_t> pos64 = pos_values;
  if (c.explicit_positions)
    rc.positions = ropegen::Tensor::dense(c.int64_positions ? static_cast<void*>(pos64.data()) : pos32.data(),
                                          c.int64_positions ? ElementType::Int64 : ElementType::Int32, pos_shape.data(),
                                          static_cast<int>(pos_shape.size()));
  // qk_norm's weights, one [head_dim] vector each for q and k.
  std::optional<Tensor> q_weight, k_weight;
  if (spec.qk_norm.has_weight()) {
    RopeSpec weight_spec = spec;  // the weights' storage
    if (c.float32_norm_weights) weight_spec.dtype = DType::F32;
    auto weight = [&](ref::Call& reference, std::vector<double> ref::Call::*field) {
      Tensor w = make_tensor(weight_spec, {c.head_dim}, rng);
      std::uniform_real_distribution<float> near_one(0.5f, 1.5f);
      for (int64_t i = 0; i < c.head_dim; ++i) {
        w.values[i] = round_to(weight_spec.dtype, near_one(rng));
        if (weight_spec.dtype == DType::F32) static_cast<float*>(w.storage.data())[i] = w.values[i];
        else if (spec.dtype == DType::F16)
          static_cast<Halide::float16_t*>(w.storage.data())[i] = Halide::float16_t(w.values[i]);
        else static_cast<Halide::bfloat16_t*>(w.storage.data())[i] = Halide::bfloat16_t(w.values[i]);
      }
      reference.*field = std::vector<double>(w.values.begin(), w.values.end());
      return w;
    };
    const ElementType weight_type = c.float32_norm_weights ? ElementType::Float32 : element_type;
    auto weight_tensor = [&](Tensor& w) {
      return ropegen::Tensor::dense(w.storage.data(), weight_type, w.shape.data(), static_cast<int>(w.shape.size()));
    };
    q_weight = weight(call, &ref::Call::q_norm_weight);
    rc.q_norm_weight = weight_tensor(*q_weight);
    if (k) {
      k_weight = weight(call, &ref::Call::k_norm_weight);
      rc.k_norm_weight = weight_tensor(*k_weight);
    }
  }
  // The backward of qk_norm reads the forward's inputs.
  std::optional<Tensor> saved_q, saved_k;
  if (c.backward && spec.qk_norm.enabled) {
    saved_q = make_tensor(spec, q.shape, rng);
    rc.saved_q = tensor(saved_q->storage, saved_q->shape);
    if (k) {
      saved_k = make_tensor(spec, k->shape, rng);
      rc.saved_k = tensor(saved_k->storage, saved_k->shape);
    }
  }
  // ... and with a weight writes the weights' gradients.
  Halide::Buffer<float> d_q_weight, d_k_weight;
  if (c.backward && spec.qk_norm.has_weight()) {
    d_q_weight = Halide::Buffer<float>(c.head_dim);
    rc.d_q_norm_weight = ropegen::Tensor::dense(d_q_weight.data(), ElementType::Float32, {c.head_dim});
    if (k) {
      d_k_weight = Halide::Buffer<float>(c.head_dim);
      rc.d_k_norm_weight = ropegen::Tensor::dense(d_k_weight.data(), ElementType::Float32, {c.head_dim});
    }
  }
  std::vector<int32_t> cu(c.cu_seqlens.begin(), c.cu_seqlens.end());
  const bool device = memory == Memory::Device;
  if (device && cu.empty() && c.layout == "thd") cu = {0, c.S};  // device calls pass the starts the kernels read
  if (!cu.empty()) rc.cu_seqlens = ropegen::Tensor::dense(cu.data(), ElementType::Int32, {static_cast<int64_t>(cu.size())});
  rc.offset = c.offset;
  rc.seq_len = seq_len;
  rc.backward = c.backward;
  if (device) {
    DeviceMirror mirror(target);
    for (const Halide::Buffer<>* b : {&q.storage, &out_q_storage})
      if (!c.in_place || b == &q.storage) mirror.add(b->data(), b->size_in_bytes());
    if (k) {
      mirror.add(k->storage.data(), k->storage.size_in_bytes());
      if (!c.in_place) mirror.add(out_k_storage.data(), out_k_storage.size_in_bytes());
    }
    if (c.explicit_positions && c.int64_positions) mirror.add(pos64.data(), pos64.size() * 8);
    if (c.explicit_positions && !c.int64_positions) mirror.add(pos32.data(), pos32.size() * 4);
    if (!cu.empty()) mirror.add(cu.data(), cu.size() * 4);
    for (const std::optional<Tensor>* w : {&q_weight, &k_weight, &saved_q, &saved_k})
      if (*w) mirror.add((*w)->storage.data(), (*w)->storage.size_in_bytes());
    for (const Halide::Buffer<float>* d : {&d_q_weight, &d_k_weight, &out_scales})
      if (d->defined()) mirror.add(d->data(), d->size_in_bytes());
    run_kernel(spec, variant, target, mirror.on_device(rc));
    mirror.copy_back();
  } else {
    run_kernel(spec, variant, target, rc);
  }

  auto as_ref = [](const Tensor& t) {
    return ref::Tensor{t.shape, std::vector<double>(t.values.begin(), t.values.end())};
  };
  auto check = [&](const Tensor& in, const std::optional<Tensor>& saved, const Halide::Buffer<>& out, bool is_key,
                   const char* what) {
    const ref::Tensor x = as_ref(in);
    const std::optional<ref::Tensor> forward_input = saved ? std::optional(as_ref(*saved)) : std::nullopt;
    const ref::Tensor want =
        c.backward ? ref::reference_backward(spec, x, forward_input ? &*forward_input : nullptr, is_key, call).dx
                   : ref::reference_apply(spec, x, is_key, call);
    int bad = 0;
    if (fp8 && c.quant_group && !is_key) return check_group_codes(spec, want, out, out_scales, what);
    if (fp8) return check_codes(spec, want, out, is_key ? c.k_scale : c.q_scale, what);
    for (size_t i = 0; i < want.data.size() && bad < 5; ++i) {
      const double got = element(out, spec.dtype, static_cast<int64_t>(i));
      if (!(std::abs(got - want.data[i]) <= tolerance(spec.dtype, want.data[i]))) {
        ADD_FAILURE() << what << "[" << i << "] = " << got << ", reference " << want.data[i];
        ++bad;
      }
    }
  };
  check(q, saved_q, out_q_storage, false, "q");
  if (k) check(*k, saved_k, out_k_storage, true, "k");
  // The weights' gradients: float32 sums over every row of float64 terms.
  auto check_weight_gradient = [&](const Tensor& in, const Tensor& saved, const Halide::Buffer<float>& got, bool is_key,
                                   const char* what) {
    const ref::Tensor forward_input = as_ref(saved);
    const ref::Gradients want = ref::reference_backward(spec, as_ref(in), &forward_input, is_key, call);
    for (int i = 0; i < c.head_dim; ++i)
      EXPECT_NEAR(got(i), want.d_norm_weight[i], 1e-5 * std::max(1.0, std::abs(want.d_norm_weight[i])))
          << what << "[" << i << "]";
  };
  if (d_q_weight.defined()) check_weight_gradient(q, *saved_q, d_q_weight, false, "d_q_norm_weight");
  if (d_k_weight.defined()) check_weight_gradient(*k, *saved_k, d_k_weight, true, "d_k_norm_weight");
  outputs.dtype = spec.dtype;
  outputs.q = out_q_storage;
  outputs.k = out_k_storage;
  outputs.d_q_norm_weight = d_q_weight;
  outputs.d_k_norm_weight = d_k_weight;
  outputs.out_scales = out_scales;
  return outputs;
}

}  // namespace

std::string Case::spec_text() const {
  return fmt::format(
             "name: t\nhead_dim: {}\nrotary_dim: {}\nrotary_offset: {}\npairing: {}\nlayout: {}\n"
             "dtype: {}\npositions: {}\n{}{}{}{}{}",
             head_dim, rotary_dim, rotary_offset, pairing, layout, dtype, explicit_positions ? "explicit" : "implicit",
             scaling, xpos, output_pairing.empty() ? "" : "output_pairing: " + output_pairing + "\n", qk_norm,
             output_dtype.empty() ? "" : "output_dtype: " + output_dtype + "\n") +
         (quant_group ? fmt::format("output_quant: {{group: {}, scale: {}}}\n", quant_group,
                                    float32_scales ? "float32" : "ue8m0")
                      : "") +
         (multiply_scales ? "fp8_scale: multiply\n" : "");
}

std::string Case::describe() const {
  return fmt::format("{}{} {} {} D={} R={} off={} B={} S={} H={} Hk={} pos={}{}{} offset={} in_place={} | {}{}{}{}{}",
                     backward ? "backward " : "", layout, pairing, dtype, head_dim, rotary_dim, rotary_offset, B, S, H,
                     Hk, explicit_positions ? "explicit" : "implicit", shared_positions ? "[S]" : "",
                     int64_positions ? " i64" : "", offset, in_place, scaling, xpos, qk_norm,
                     float32_norm_weights ? " (float32 weights)" : "",
                     output_dtype.empty()
                         ? ""
                         : fmt::format(" output_dtype {} q_scale {} k_scale {}", output_dtype, q_scale, k_scale)) +
         (quant_group ? fmt::format(" output_quant group {}{}", quant_group, float32_scales ? " float32" : "") : "") +
         (multiply_scales ? " fp8_scale multiply" : "");
}

CaseOutputs run_case(const Case& c, const Halide::Target& target, Memory memory) {
  try {
    return run_case_or_throw(c, target, memory);
  } catch (const Halide::Error& e) {
    ADD_FAILURE() << c.describe() << "\nHalide error: " << e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << c.describe() << "\nexception: " << e.what();
  }
  return {};
}

int64_t ulp_distance(DType dtype, const Halide::Buffer<>& a, const Halide::Buffer<>& b, int64_t i) {
  // Map the bits to a line on which neighbouring values are neighbouring
  // integers: sign-magnitude -> two's complement.
  auto ordered = [&](const Halide::Buffer<>& buf) -> int64_t {
    if (buf.type().bits() == 8) {
      const uint8_t code = static_cast<const uint8_t*>(buf.data())[i];
      return code & 0x80 ? -(code & 0x7f) : (code & 0x7f);
    }
    if (dtype == DType::F32) {
      int32_t bits;
      std::memcpy(&bits, static_cast<const float*>(buf.data()) + i, 4);
      return bits < 0 ? int64_t{INT32_MIN} - bits : bits;
    }
    const int16_t bits = static_cast<const int16_t*>(buf.data())[i];
    return bits < 0 ? int64_t{INT16_MIN} - bits : bits;
  };
  return std::abs(ordered(a) - ordered(b));
}

ropegen::Tensor host_tensor(const void* data, ElementType type, const std::vector<int64_t>& shape,
                            const std::vector<int64_t>& strides) {
  ropegen::Tensor t = ropegen::Tensor::dense(const_cast<void*>(data), type, shape.data(), static_cast<int>(shape.size()));
  for (size_t i = 0; i < strides.size(); ++i) t.strides[i] = strides[i];
  return t;
}

void run_kernel(const RopeSpec& spec, const KernelVariant& variant, const Halide::Target& target,
                const Call& call) {
  Result<std::shared_ptr<Kernel>> kernel = Runtime::process().get(spec, variant, target.to_string());
  ASSERT_TRUE(kernel.ok()) << format(kernel.errors());
  const Status run = (*kernel)->run(call);
  ASSERT_TRUE(run.ok()) << format(run.errors());
}

}  // namespace ropegen::test
