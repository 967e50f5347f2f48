#include "call/contract.h"

#include "abi/kernel_abi.h"

namespace ropegen::call {

ropegen_dtype dlpack_dtype(ElementType type) {
  switch (type) {
    case ElementType::Float32: return {ROPEGEN_DTYPE_FLOAT, 32, 1};
    case ElementType::Float16: return {ROPEGEN_DTYPE_FLOAT, 16, 1};
    case ElementType::BFloat16: return {ROPEGEN_DTYPE_BFLOAT, 16, 1};
    case ElementType::Int32: return {ROPEGEN_DTYPE_INT, 32, 1};
    case ElementType::Int64: return {ROPEGEN_DTYPE_INT, 64, 1};
    case ElementType::UInt8: return {ROPEGEN_DTYPE_UINT, 8, 1};
  }
  return {};
}

ElementType element_type_of(DType dtype) {
  return dtype == DType::F32 ? ElementType::Float32 : dtype == DType::F16 ? ElementType::Float16 : ElementType::BFloat16;
}

ropegen_contract call_contract(const RopeSpec& spec) {
  ropegen_contract c{};
  c.encoding = static_cast<int32_t>(spec.encoding);
  c.layout = static_cast<int32_t>(spec.layout);
  c.dtype = dlpack_dtype(element_type_of(spec.dtype));
  const bool rope = spec.encoding == Encoding::Rope;
  c.row_dim = rope ? spec.head_dim : spec.encoding == Encoding::Alibi ? 0 : spec.dim;
  c.num_heads = spec.encoding == Encoding::Alibi ? spec.num_heads : 0;
  c.rotary_offset = rope ? spec.rotary_offset : 0;
  c.rotary_dim = rope ? spec.rotary_dim : 0;
  c.pairing = static_cast<int32_t>(spec.pairing);
  c.output_pairing = static_cast<int32_t>(spec.output_pairing);
  c.explicit_positions = spec.positions == PositionsMode::Explicit && spec.encoding != Encoding::Alibi;
  c.position_axes = rope ? spec.axes.count() : 0;
  c.runtime_frequencies = rope && spec.frequency.scheme == FrequencyScheme::Runtime;
  c.table_frequencies = rope && spec.frequency.scheme == FrequencyScheme::Table;
  if (rope && spec.kv_cache.enabled) {
    c.kv_layout = 1 + static_cast<int32_t>(spec.kv_cache.layout);
    c.kv_page_size = spec.kv_cache.page_size;
    const KvCache& kv = spec.kv_cache;
    c.kv_dtype = dlpack_dtype(kv.is_fp8() ? ElementType::UInt8 : element_type_of(kv.float_dtype()));
    c.kv_fp8 = kv.dtype == KvDType::Fp8E4m3 ? 1 : kv.dtype == KvDType::Fp8E5m2 ? 2 : 0;
  }
  if (spec.has_fp8_output()) c.output_fp8 = spec.output_dtype == KvDType::Fp8E4m3 ? 1 : 2;
  if (spec.output_quant.enabled) c.output_quant_group = spec.output_quant.group;
  if (rope && spec.qk_norm.enabled) {
    c.qk_norm = 1 + static_cast<int32_t>(spec.qk_norm.type);
    c.qk_norm_weight = spec.qk_norm.has_weight();
  }
  return c;
}

KernelVariant kernel_variant(const ropegen_contract& contract, const Call& call) {
  KernelVariant v;
  const bool kv = has_kv_cache(contract);
  v.with_k = kv ? call.out_k.has_value() : call.k.has_value();
  v.with_v = kv && call.v.has_value();
  v.position_type = call.positions && call.positions->type == ElementType::Int64 ? IdType::Int64 : IdType::Int32;
  v.backward = call.backward;
  v.float32_norm_weights = contract.qk_norm_weight && element_type(contract) != ElementType::Float32 &&
                           call.q_norm_weight && call.q_norm_weight->type == ElementType::Float32;
  return v;
}

ropegen_contract kernel_contract(const ropegen_contract& contract, const KernelVariant& variant) {
  ropegen_contract c = contract;
  const abi::KernelPairing p = abi::kernel_pairing(static_cast<Pairing>(contract.pairing),
                                                   static_cast<Pairing>(contract.output_pairing), variant.backward);
  c.pairing = static_cast<int32_t>(p.read), c.output_pairing = static_cast<int32_t>(p.write);
  return c;
}

Encoding encoding(const ropegen_contract& c) { return static_cast<Encoding>(c.encoding); }

const char* encoding_name(const ropegen_contract& c) {
  switch (encoding(c)) {
    case Encoding::Rope: return "rope";
    case Encoding::Sinusoidal: return "sinusoidal";
    case Encoding::Learned: return "learned";
    case Encoding::Alibi: return "alibi";
  }
  return "?";
}

Layout tensor_layout(const ropegen_contract& c) {
  return abi::tensor_layout(encoding(c), static_cast<Layout>(c.layout));
}

ElementType element_type(const ropegen_contract& c) {
  if (c.dtype.code == ROPEGEN_DTYPE_BFLOAT) return ElementType::BFloat16;
  return c.dtype.bits == 16 ? ElementType::Float16 : ElementType::Float32;
}

bool has_kv_cache(const ropegen_contract& c) { return is_rope(c) && c.kv_layout != 0; }
KvLayout kv_layout(const ropegen_contract& c) { return static_cast<KvLayout>(c.kv_layout - 1); }
ElementType kv_element_type(const ropegen_contract& c) {
  if (c.kv_dtype.code == ROPEGEN_DTYPE_BFLOAT) return ElementType::BFloat16;
  if (c.kv_dtype.code == ROPEGEN_DTYPE_UINT) return ElementType::UInt8;
  return c.kv_dtype.bits == 16 ? ElementType::Float16 : ElementType::Float32;
}

const char* kv_fp8_name(const ropegen_contract& c) {
  return c.kv_fp8 == 1 ? "fp8_e4m3" : c.kv_fp8 == 2 ? "fp8_e5m2" : nullptr;
}

bool has_qk_norm(const ropegen_contract& c) { return is_rope(c) && c.qk_norm != 0; }
bool has_fp8_output(const ropegen_contract& c) { return is_rope(c) && c.output_fp8 != 0; }
const char* output_fp8_name(const ropegen_contract& c) {
  return c.output_fp8 == 1 ? "fp8_e4m3" : c.output_fp8 == 2 ? "fp8_e5m2" : nullptr;
}
ElementType output_element_type(const ropegen_contract& c) {
  return has_fp8_output(c) ? ElementType::UInt8 : element_type(c);
}
bool writes_rotary_view(const ropegen_contract& c) { return is_rope(c) && !has_qk_norm(c) && !has_fp8_output(c); }
bool has_pass_through(const ropegen_contract& c) { return writes_rotary_view(c) && c.rotary_dim < c.row_dim; }

}  // namespace ropegen::call

namespace ropegen {
KernelVariant kernel_variant(const RopeSpec& spec, const Call& call) {
  return call::kernel_variant(call::call_contract(spec), call);
}
}  // namespace ropegen
