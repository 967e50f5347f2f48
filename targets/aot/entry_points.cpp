#include "entry_points.h"

#include "targets/schedule.h"

namespace ropegen::targets::aot {

std::vector<EntryPoint> entry_points(const RopeSpec& spec) {
  std::vector<EntryPoint> out;
  const bool explicit_positions = spec.positions == PositionsMode::Explicit;
  // qk_norm weights come in the spec's dtype or (mixed precision) float32:
  // an f16 or bf16 spec's library has entries for both.
  const bool float32_weights_too = spec.qk_norm.has_weight() && spec.dtype != DType::F32;
  auto add = [&](const std::string& base, bool with_k, bool backward, bool with_v = false) {
    for (bool f32_weights : {false, true}) {
      if (f32_weights && !float32_weights_too) continue;
      const std::string name = base + (f32_weights ? "_wf32" : "");
      KernelVariant v{with_k, IdType::Int32, backward, with_v, f32_weights};
      if (!explicit_positions) {
        out.push_back({name, EntryPoint::Kind::Rope, v, false});
        continue;
      }
      // Callers hold ids as int32 or int64; the kernel reads either width
      // directly rather than making the caller convert.
      out.push_back({name + "_i32", EntryPoint::Kind::Rope, v, true});
      v.position_type = IdType::Int64;
      out.push_back({name + "_i64", EntryPoint::Kind::Rope, v, true});
    }
  };
  if (spec.encoding != Encoding::Rope) {
    add(spec.name + "_apply", false, false);
    return out;
  }
  if (spec.kv_cache.enabled) {
    // The fused append (kernel_variant: v and out_k given or not); it has no backward.
    for (bool with_v : {false, true})
      for (bool with_k : {false, true})
        add(spec.name + "_append" + (with_v ? "_v" : "") + (with_k ? "_out_k" : ""), with_k, false, with_v);
  } else {
    // fp8 outputs' backward (the inverse rotation) is not through a norm or
    // into run-time frequencies' gradient; output_quant takes q alone
    // (call/fp8_checks refuses the others).
    const bool fp8_backward =
        !spec.has_fp8_output() || (!spec.qk_norm.enabled && spec.frequency.scheme != FrequencyScheme::Runtime);
    for (bool backward : {false, true})
      for (bool with_k : {false, true})
        if ((!backward || fp8_backward) && !(with_k && spec.output_quant.enabled))
          add(spec.name + (with_k ? "_qk" : "_q") + (backward ? "_backward" : ""), with_k, backward);
  }
  if (spec.has_pass_through()) out.push_back({spec.name + "_pass_through", EntryPoint::Kind::PassThrough, {}, false});
  return out;
}

Halide::Module compile_entry(const RopeSpec& spec, const EntryPoint& entry, const std::string& fn_name,
                             const Halide::Target& target) {
  if (entry.kind == EntryPoint::Kind::PassThrough) {
    lowering::PassThroughCopy copy = lowering::build_pass_through_copy(spec);
    schedule_pass_through(copy, spec, target);
    return Halide::Pipeline(copy.output).compile_to_module({copy.input}, fn_name, target);
  }
  lowering::RopeAlgorithm algorithm = scheduled_algorithm(spec, entry.variant, target);
  return Halide::Pipeline(algorithm.outputs()).compile_to_module(algorithm.arguments(), fn_name, target);
}

}  // namespace ropegen::targets::aot
