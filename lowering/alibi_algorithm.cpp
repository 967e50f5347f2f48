// ALiBi: a per-head linear bias added to attention scores [B, H, Sq, Sk],
// seen as (key j, head h, query row s, batch b); query row s sits at
// position offset + s (decode with a KV cache), key j at j.
#include "lowering/constant_table.h"
#include "lowering/rope_algorithm.h"
#include "ropegen/rope_math.h"

namespace ropegen::lowering::detail {

using namespace Halide;

RopeAlgorithm build_alibi(const RopeSpec& spec, const KernelVariant& variant) {
  RopeAlgorithm a;
  a.variant = variant;
  a.q.input = a.make_input(Arg::Q, storage_type(spec.dtype), 4, true);
  a.use(Arg::Q);
  a.q.output = Func("out_x");
  a.use(Arg::Offset);
  const Expr slope = cast<float>(constant_table(alibi_slopes(spec.num_heads), "alibi_slope_table")(a.h));
  const Expr query = a.scalar(Arg::Offset) + a.s;
  const Expr key = cast<int64_t>(a.d);
  // Distances are exact in float32 up to 2^24 tokens.
  Expr bias;
  switch (spec.alibi_form) {
    case AlibiForm::Symmetric: bias = -slope * cast<float>(abs(query - key)); break;
    case AlibiForm::Causal: bias = -slope * cast<float>(query - key); break;
    case AlibiForm::Bloom: bias = slope * cast<float>(key); break;
  }
  const Expr x = load_as_float(a.q.input(a.d, a.h, a.s, a.b), spec.dtype);
  Expr out = strict_float(x + bias);
  // Causal: keys after the query keep their score bit for bit (the mask handles them).
  if (spec.alibi_form == AlibiForm::Causal) out = select(key <= query, out, x);
  a.q.output(a.d, a.h, a.s, a.b) = store_from_float(out, spec.dtype);
  return a;
}

}  // namespace ropegen::lowering::detail
