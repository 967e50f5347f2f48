// The spec as far as a call's arguments are concerned. A JIT kernel makes
// it from its RopeSpec; an AOT library carries it in its generated header
// (ropegen_library), so the C entry checks calls exactly as the JIT does.
#pragma once

#include "ropegen/call.h"
#include "ropegen/ropegen_aot.h"
#include "ropegen/spec.h"

namespace ropegen::call {

ropegen_contract call_contract(const RopeSpec& spec);

// A backward kernel reads the gradient where the forward wrote
// (output_pairing) and writes where it read (pairing).
ropegen_contract kernel_contract(const ropegen_contract& contract, const KernelVariant& variant);
// The variant a call needs: k and v present, the ids' width, backward (a
// kv_cache spec's with_k means out_k is written too).
KernelVariant kernel_variant(const ropegen_contract& contract, const Call& call);

Encoding encoding(const ropegen_contract& c);
const char* encoding_name(const ropegen_contract& c);  // "rope", ...: the spec's spelling (call/ does not link dsl/)
// The layout of the call's tensors: the spec's, and bhsd for ALiBi's scores
// [B, H, Sq, Sk] (keys as the row, query rows as tokens).
Layout tensor_layout(const ropegen_contract& c);
ElementType element_type(const ropegen_contract& c);
// qk_norm: q and k normalised per head before the rotation. Its kernels
// and fp8 outputs' write whole rows (the dims outside the rotary range
// normalised or cast), every other rope kernel the rotary view
// (abi::rotary_view) and a copy the rest.
bool has_qk_norm(const ropegen_contract& c);
// output_dtype fp8: out_q and out_k hold uint8 codes of x / q_scale, x / k_scale
// (x times them with the spec's fp8_scale: multiply).
bool has_fp8_output(const ropegen_contract& c);
const char* output_fp8_name(const ropegen_contract& c);      // "fp8_e4m3", "fp8_e5m2"; nullptr: the spec's dtype
ElementType output_element_type(const ropegen_contract& c);  // out_q's and out_k's
bool writes_rotary_view(const ropegen_contract& c);
bool has_pass_through(const ropegen_contract& c);  // out of place: a copy of the dims past the rotary view
// The fused KV-cache append (spec section kv_cache): whether, its layout, the caches' type.
bool has_kv_cache(const ropegen_contract& c);
KvLayout kv_layout(const ropegen_contract& c);
ElementType kv_element_type(const ropegen_contract& c);
const char* kv_fp8_name(const ropegen_contract& c);  // "fp8_e4m3", "fp8_e5m2" (uint8 codes); nullptr: not fp8
inline bool is_rope(const ropegen_contract& c) { return encoding(c) == Encoding::Rope; }

// ElementType <-> DLPack codes.
ropegen_dtype dlpack_dtype(ElementType type);
// The tensor element type of a spec dtype.
ElementType element_type_of(DType dtype);

}  // namespace ropegen::call
