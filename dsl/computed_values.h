// The numbers a built spec yields, evaluated by rope_math (the one
// definition of the math) at the seq_len extremes that matter, must be
// usable: every frequency finite and in (0, kMaxInvFreq] (custom and
// constant may write 0: that pair is not rotated), the attention factor
// finite and > 0 as a float32 (the kernels multiply by it there). Absurd but
// finite keys (theta 5e-324, factor 1e-320, mscale -100) end here, each
// error at the key responsible.
#pragma once

#include <vector>

#include "ropegen/result.h"
#include "ropegen/spec.h"
#include "yaml_document.h"

namespace ropegen::dsl {

std::vector<Diagnostic> check_computed_values(const RopeSpec& spec, const YamlDocument& doc);

}  // namespace ropegen::dsl
