// Enum <-> spelling tables, so the schema's allowed values and the parser's
// lookups come from one list per enum.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ropegen/spec.h"

namespace ropegen::dsl {

template <typename E>
struct EnumValues;  // specialised below: static constexpr E all[]

template <> struct EnumValues<Encoding> {
  static constexpr Encoding all[] = {Encoding::Rope, Encoding::Sinusoidal, Encoding::Learned, Encoding::Alibi};
};
template <> struct EnumValues<Pairing> { static constexpr Pairing all[] = {Pairing::Half, Pairing::Interleaved}; };
template <> struct EnumValues<Layout> {
  static constexpr Layout all[] = {Layout::BSHD, Layout::BHSD, Layout::SBHD, Layout::THD,
                                   Layout::BSD,  Layout::SBD,  Layout::TD};
};
template <> struct EnumValues<DType> { static constexpr DType all[] = {DType::F32, DType::F16, DType::BF16}; };
template <> struct EnumValues<FrequencyScheme> {
  static constexpr FrequencyScheme all[] = {FrequencyScheme::Lang, FrequencyScheme::Pixel,
                                            FrequencyScheme::Constant, FrequencyScheme::Custom,
                                            FrequencyScheme::Runtime, FrequencyScheme::Table};
};
template <> struct EnumValues<ScalingType> {
  static constexpr ScalingType all[] = {ScalingType::None, ScalingType::Linear, ScalingType::Ntk,
                                        ScalingType::Dynamic, ScalingType::Yarn, ScalingType::LongRope,
                                        ScalingType::Llama3};
};
template <> struct EnumValues<LongRopePolicy> {
  static constexpr LongRopePolicy all[] = {LongRopePolicy::PerCall, LongRopePolicy::Long, LongRopePolicy::Short};
};
template <> struct EnumValues<PositionsMode> {
  static constexpr PositionsMode all[] = {PositionsMode::Implicit, PositionsMode::Explicit};
};

template <> struct EnumValues<TableForm> { static constexpr TableForm all[] = {TableForm::Interleaved, TableForm::Roformer}; };
template <> struct EnumValues<AlibiForm> {
  static constexpr AlibiForm all[] = {AlibiForm::Symmetric, AlibiForm::Causal, AlibiForm::Bloom};
};
template <> struct EnumValues<KvLayout> {
  static constexpr KvLayout all[] = {KvLayout::PagedNhd, KvLayout::PagedHnd, KvLayout::Contiguous};
};
template <> struct EnumValues<KvDType> {
  static constexpr KvDType all[] = {KvDType::F32, KvDType::F16, KvDType::BF16, KvDType::Fp8E4m3, KvDType::Fp8E5m2};
};

template <> struct EnumValues<QkNormType> { static constexpr QkNormType all[] = {QkNormType::Rms, QkNormType::RmsOnePlus}; };
template <> struct EnumValues<QkNormWeight> {
  static constexpr QkNormWeight all[] = {QkNormWeight::PerHead, QkNormWeight::None};
};
template <> struct EnumValues<QuantScale> { static constexpr QuantScale all[] = {QuantScale::Ue8m0, QuantScale::Float32}; };
template <> struct EnumValues<Fp8Scale> { static constexpr Fp8Scale all[] = {Fp8Scale::Divide, Fp8Scale::Multiply}; };

template <typename E>
std::vector<std::string> spellings() {
  std::vector<std::string> out;
  for (E e : EnumValues<E>::all) out.emplace_back(to_string(e));
  return out;
}

template <typename E>
std::optional<E> from_string(const std::string& s) {
  for (E e : EnumValues<E>::all)
    if (s == to_string(e)) return e;
  return std::nullopt;
}

}  // namespace ropegen::dsl
