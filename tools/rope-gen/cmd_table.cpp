// rope-gen table SPEC (--max-pos N | --positions P.npy) [--seq-len N] [--kernel-bits] --out T.npy
// (alibi: rope-gen table SPEC --out T.npy, the slopes)
#include <iostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "atomic_file.h"
#include "cli_error.h"
#include "commands.h"
#include "npy.h"
#include "output_files.h"
#include "runtime/host_memory.h"
#include "runtime/kernel_table.h"
#include "ropegen/position_limits.h"
#include "ropegen/rope_table.h"
#include "ropegen/runtime.h"
#include "ropegen/spec_io.h"

namespace ropegen::cli {
namespace {

struct TableOptions {
  std::string spec, positions, out;
  std::optional<int64_t> max_pos, seq_len;
  bool kernel_bits = false;
};

void run_table(const TableOptions& o) {
  const RopeSpec spec = unwrap(load_spec(o.spec));
  check_outputs({{"--out", o.out}});
  const int axes = spec.axes.count();
  std::vector<int64_t> positions;
  if (o.max_pos) {
    if (*o.max_pos < 1 || *o.max_pos - 1 > kMaxPosition)
      fail(fmt::format("--max-pos must be in 1..{0} + 1 (positions 0..{0})", kMaxPositionText));
    // The ids and the float32 table, before either is allocated.
    const int64_t columns = spec.encoding == Encoding::Rope ? spec.rotary_dim : spec.dim;
    unwrap(runtime::host_bytes_for({{*o.max_pos, 8 * std::max(axes, 1)}, {*o.max_pos, 4 * int64_t{columns}}},
                                   fmt::format("--max-pos {}", *o.max_pos)));
    // Multi-axis: every axis at the same position.
    for (int64_t p = 0; p < *o.max_pos; ++p) positions.insert(positions.end(), std::max(axes, 1), p);
  } else if (!o.positions.empty()) {
    const NpyInts ids = read_npy_ints(o.positions, "positions");
    if (axes == 0 && ids.shape.size() != 1) fail(fmt::format("{}: positions must be 1-D [N]", o.positions));
    if (axes > 0 && (ids.shape.size() != 2 || ids.shape[1] != axes))
      fail(fmt::format("{}: positions of a multi-axis spec must be [N, {}] (one id per axis)", o.positions, axes));
    positions = ids.values;
  } else if (spec.encoding != Encoding::Alibi) {
    fail("give --max-pos N or --positions P.npy");
  }
  if (o.seq_len && *o.seq_len < 1) fail("--seq-len must be >= 1");
  RopeTable t = unwrap(rope_table(spec, positions, o.seq_len));
  if (o.kernel_bits) {
    if (spec.encoding != Encoding::Rope) fail("--kernel-bits is for rope specs (the cos/sin cache)");
    t.values = unwrap(runtime::kernel_table(Runtime::process(), spec, positions, t.seq_len));
    t.layout += " (the kernel's float32 values)";
  }
  const bool slopes = spec.encoding == Encoding::Alibi;
  const std::vector<int64_t> shape = slopes ? std::vector<int64_t>{t.columns} : std::vector<int64_t>{t.rows, t.columns};
  write_file_atomically(o.out, npy_bytes(t.values, shape));
  nlohmann::ordered_json j;
  j["name"] = spec.name;
  j["rows"] = t.rows;
  j["columns"] = t.columns;
  j["shape"] = shape;
  j["layout"] = t.layout;
  if (spec.encoding == Encoding::Rope) {
    j["attention_factor"] = t.attention_factor;
    j["seq_len"] = t.seq_len;
  }
  j["out"] = o.out;
  std::cout << j.dump() << "\n";
}

}  // namespace

void add_table_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("table", "Write a spec's table: rope the cos/sin cache engines take (vLLM, FlashInfer), "
                                          "float32 [N, rotary_dim] = [cos | sin] x attention factor; sinusoidal [N, dim]; "
                                          "alibi the slopes [num_heads]");
  auto o = std::make_shared<TableOptions>();
  cmd->add_option("SPEC", o->spec, "spec file (YAML)")->required();
  auto* max_pos = cmd->add_option("--max-pos", o->max_pos, "rows for positions 0 .. N-1");
  auto* pos = cmd->add_option("--positions", o->positions, "rows for these positions (int32/int64 .npy [N]; multi-axis [N, n_axes])");
  max_pos->excludes(pos);
  cmd->add_option("--seq-len", o->seq_len, "run-time sequence length for dynamic / longrope (default: max position + 1)");
  cmd->add_option("--out", o->out, "the table (.npy, float32)")->required();
  cmd->add_flag("--kernel-bits", o->kernel_bits,
                "rope: the computing kernel's own float32 cos/sin instead of float64 values rounded once, so that a "
                "`frequency: {scheme: table}` kernel reading the table gives the computing kernel's bits");
  cmd->callback([o] { run_table(*o); });
}

}  // namespace ropegen::cli
