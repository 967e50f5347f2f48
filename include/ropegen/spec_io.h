// Reading specs from YAML and writing their normalised form.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "ropegen/result.h"
#include "ropegen/spec.h"

namespace ropegen {

// The largest spec text accepted (real specs are a few hundred bytes; a
// longrope spec with 8192-entry lists is about 200 KiB).
constexpr size_t kMaxSpecBytes = size_t{1} << 20;

// What a spec may leave to its caller: a spec without a `dtype`, `layout`
// or `positions` key takes these, so one spec serves every tensor dtype,
// layout and way of passing positions (the PyTorch binding passes the
// call's). A key the spec sets wins. A layout the encoding has no use for is
// a diagnostic.
struct SpecDefaults {
  std::optional<DType> dtype;              // unset: f32
  std::optional<Layout> layout;            // unset: bshd (rope), bsd (sinusoidal, learned)
  std::optional<PositionsMode> positions;  // unset: implicit (learned: explicit)
};

// Parse and validate spec text; `file` is only used in diagnostics.
Result<RopeSpec> parse_spec(std::string_view yaml_text, const std::string& file, const SpecDefaults& defaults = {});
// Read a file and parse it. A missing or unreadable file, or one that is not
// a regular file (a directory, FIFO, device), is a diagnostic too.
Result<RopeSpec> load_spec(const std::string& path);

// The normalised spec: every field explicit, fixed key order, shortest
// round-trip numbers. Parsing it yields the same spec (a fixed point).
std::string to_yaml(const RopeSpec& spec);
// 16 hex digits identifying the normalised spec (XXH3 64 of to_yaml()).
std::string spec_hash(const RopeSpec& spec);

}  // namespace ropegen
