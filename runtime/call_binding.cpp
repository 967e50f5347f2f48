#include "call_binding.h"

#include <stdexcept>

#include "runtime/tensor_view.h"

namespace ropegen::runtime {
namespace {

// The copies that complete an out-of-place call on a partial-rotary spec:
// the dims before and after the rotary range, where there are any.
void add_pass_through(const RopeSpec& spec, const Halide::Buffer<>& in, const Halide::Buffer<>& out,
                      std::vector<PassThroughArguments>& copies) {
  if (!spec.has_pass_through() || in.data() == out.data()) return;  // in place: nothing to copy
  const int first_after = spec.rotary_offset + spec.rotary_dim;
  for (auto [first, count] : {std::pair{0, spec.rotary_offset}, std::pair{first_after, spec.head_dim - first_after}})
    if (count > 0) copies.push_back({dim_range_view(in, first, count), dim_range_view(out, first, count)});
}

// Halide may make an output's argument name unique with a `$n` tail.
std::string_view base_name(std::string_view name) { return name.substr(0, name.find('$')); }

}  // namespace

std::vector<Halide::Buffer<>> RopeArguments::outputs() const {
  std::vector<Halide::Buffer<>> out = {out_q};
  if (out_k.defined()) out.push_back(out_k);
  if (d_freqs.defined()) out.push_back(d_freqs);
  return out;
}

// Names as lowering/rope_algorithm.cpp gives the ImageParams, Params and
// output Funcs.
std::optional<ArgumentSource> rope_argument(std::string_view name) {
  name = base_name(name);
  ArgumentSource s;
  if (name == "q" || name == "x") s.rope_buffer = &RopeArguments::q;
  else if (name == "k") s.rope_buffer = &RopeArguments::k;
  else if (name == "positions") s.rope_buffer = &RopeArguments::positions;
  else if (name == "cu_seqlens") s.rope_buffer = &RopeArguments::cu_seqlens;
  else if (name == "table") s.rope_buffer = &RopeArguments::table;
  else if (name == "freqs") s.rope_buffer = &RopeArguments::freqs;
  else if (name == "saved_q") s.rope_buffer = &RopeArguments::saved_q;
  else if (name == "saved_k") s.rope_buffer = &RopeArguments::saved_k;
  else if (name == "d_freqs") s.rope_buffer = &RopeArguments::d_freqs;
  else if (name == "out_q" || name == "out_x") s.rope_buffer = &RopeArguments::out_q;
  else if (name == "out_k") s.rope_buffer = &RopeArguments::out_k;
  else if (name == "offset") s.rope_scalar = &RopeArguments::offset;
  else if (name == "seq_len") s.rope_scalar = &RopeArguments::seq_len;
  else return std::nullopt;
  return s;
}

std::optional<ArgumentSource> pass_through_argument(std::string_view name) {
  name = base_name(name);
  ArgumentSource s;
  if (name == "pass_in") s.copy_buffer = &PassThroughArguments::in;
  else if (name == "pass_out") s.copy_buffer = &PassThroughArguments::out;
  else return std::nullopt;
  return s;
}

BoundCall bind_call(const RopeSpec& spec, const lowering::KernelVariant& variant, const BufferCall& call) {
  // Writing a pair elsewhere than it was read would overwrite other pairs' inputs.
  if (spec.output_pairing != spec.pairing &&
      (call.q.data() == call.out_q.data() || (call.k.defined() && call.k.data() == call.out_k.data())))
    throw std::invalid_argument("a spec whose output_pairing differs from its pairing cannot run in place");
  BoundCall bound;
  RopeArguments& a = bound.rope;
  // Rope writes the rotary part (pass-through copies do the rest); the
  // other encodings write their whole tensor.
  const bool rope = spec.encoding == Encoding::Rope;
  a.q = call.q;
  a.out_q = rope ? rotary_view(call.out_q, spec) : call.out_q;
  if (variant.with_k) {
    a.k = call.k;
    a.out_k = rotary_view(call.out_k, spec);
  }
  a.positions = call.positions;
  a.cu_seqlens = call.cu_seqlens;
  a.table = call.table;
  a.freqs = call.freqs;
  a.saved_q = call.saved_q;
  a.saved_k = call.saved_k;
  a.d_freqs = call.d_freqs;
  a.offset = call.offset;
  a.seq_len = call.seq_len;
  add_pass_through(spec, call.q, call.out_q, bound.pass_through);
  if (variant.with_k) add_pass_through(spec, call.k, call.out_k, bound.pass_through);
  return bound;
}

}  // namespace ropegen::runtime
