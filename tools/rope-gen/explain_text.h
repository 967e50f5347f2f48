// `rope-gen explain` without --json: the explanation as aligned text.
#pragma once

#include <string>

#include "ropegen/rope_explain.h"

namespace ropegen::cli {

std::string explanation_text(const Explanation& e);

}  // namespace ropegen::cli
