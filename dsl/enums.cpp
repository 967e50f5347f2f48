// Spec-file spellings of the enums, and the reverse lookup used by the parser.
#include "enums.h"

namespace ropegen {

const char* to_string(Encoding v) {
  switch (v) {
    case Encoding::Rope: return "rope";
    case Encoding::Sinusoidal: return "sinusoidal";
    case Encoding::Learned: return "learned";
    case Encoding::Alibi: return "alibi";
  }
  return "?";
}
const char* to_string(Pairing v) { return v == Pairing::Half ? "half" : "interleaved"; }
const char* to_string(Layout v) {
  switch (v) {
    case Layout::BSHD: return "bshd";
    case Layout::BHSD: return "bhsd";
    case Layout::SBHD: return "sbhd";
    case Layout::THD: return "thd";
    case Layout::BSD: return "bsd";
    case Layout::SBD: return "sbd";
    case Layout::TD: return "td";
  }
  return "?";
}
const char* to_string(DType v) {
  switch (v) {
    case DType::F32: return "f32";
    case DType::F16: return "f16";
    case DType::BF16: return "bf16";
  }
  return "?";
}
const char* to_string(FrequencyScheme v) {
  switch (v) {
    case FrequencyScheme::Lang: return "lang";
    case FrequencyScheme::Pixel: return "pixel";
    case FrequencyScheme::Constant: return "constant";
    case FrequencyScheme::Custom: return "custom";
    case FrequencyScheme::Runtime: return "runtime";
    case FrequencyScheme::Table: return "table";
  }
  return "?";
}
const char* to_string(ScalingType v) {
  switch (v) {
    case ScalingType::None: return "none";
    case ScalingType::Linear: return "linear";
    case ScalingType::Ntk: return "ntk";
    case ScalingType::Dynamic: return "dynamic";
    case ScalingType::Yarn: return "yarn";
    case ScalingType::LongRope: return "longrope";
    case ScalingType::Llama3: return "llama3";
  }
  return "?";
}
const char* to_string(LongRopePolicy v) {
  switch (v) {
    case LongRopePolicy::PerCall: return "per_call";
    case LongRopePolicy::Long: return "long";
    case LongRopePolicy::Short: return "short";
  }
  return "?";
}
const char* layout_dims(Layout v) {
  switch (v) {
    case Layout::BSHD: return "[B, S, H, D]";
    case Layout::BHSD: return "[B, H, S, D]";
    case Layout::SBHD: return "[S, B, H, D]";
    case Layout::THD: return "[T, H, D]";
    case Layout::BSD: return "[B, S, D]";
    case Layout::SBD: return "[S, B, D]";
    case Layout::TD: return "[T, D]";
  }
  return "?";
}

const char* to_string(PositionsMode v) { return v == PositionsMode::Implicit ? "implicit" : "explicit"; }
const char* to_string(TableForm v) { return v == TableForm::Interleaved ? "interleaved" : "roformer"; }
const char* to_string(AlibiForm v) {
  switch (v) {
    case AlibiForm::Symmetric: return "symmetric";
    case AlibiForm::Causal: return "causal";
    case AlibiForm::Bloom: return "bloom";
  }
  return "?";
}

const char* to_string(KvLayout v) {
  switch (v) {
    case KvLayout::PagedNhd: return "paged_nhd";
    case KvLayout::PagedHnd: return "paged_hnd";
    case KvLayout::Contiguous: return "contiguous";
  }
  return "?";
}

const char* to_string(KvDType v) {
  switch (v) {
    case KvDType::F32: return "f32";
    case KvDType::F16: return "f16";
    case KvDType::BF16: return "bf16";
    case KvDType::Fp8E4m3: return "fp8_e4m3";
    case KvDType::Fp8E5m2: return "fp8_e5m2";
  }
  return "?";
}

const char* to_string(QkNormType v) { return v == QkNormType::Rms ? "rms" : "rms_one_plus"; }
const char* to_string(QkNormWeight v) { return v == QkNormWeight::PerHead ? "per_head" : "none"; }
const char* to_string(QuantScale v) { return v == QuantScale::Ue8m0 ? "ue8m0" : "float32"; }
const char* to_string(Fp8Scale v) { return v == Fp8Scale::Divide ? "divide" : "multiply"; }

std::optional<Layout> layout_named(const std::string& name) { return dsl::from_string<Layout>(name); }
std::optional<DType> dtype_named(const std::string& name) { return dsl::from_string<DType>(name); }

}  // namespace ropegen
