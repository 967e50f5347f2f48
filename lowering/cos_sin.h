// cos and sin of every (pair, token): computed from the frequencies by the
// exact fixed-point angle reduction (trig.h), or read from the call's
// cos/sin cache (scheme table); xPos scales.
#pragma once

#include <Halide.h>

#include <string>
#include <utility>

#include "ropegen/rope_math.h"
#include "ropegen/spec.h"

namespace ropegen::lowering {

struct RopeAlgorithm;

// inv_freq (after scaling) and its fixed-point split, then reduced and
// cos_sin (times the attention factor), or cos_sin read from the cache.
void define_frequencies_and_cos_sin(const RopeSpec& spec, RopeAlgorithm& a, const RopeFrequencies& freqs);

// reduced and cos_sin Funcs (times `attention`) from a.position_id and
// a.quarter_turns (the fixed-point reduction) where defined, else from
// a.position and a.inv_freq, named with `prefix`.
std::pair<Halide::Func, Halide::Func> cos_sin_stages(const RopeAlgorithm& a, float attention,
                                                     const std::string& prefix);
void define_cos_sin(RopeAlgorithm& a, float attention);  // sets a.reduced, a.cos_sin
// Copies of the cos/sin stages (and the xPos scales) for a stage that a
// schedule places apart from the rotation's (one Func has one place): read
// from the call's cache with scheme table, else computed by the same
// arithmetic; named with `prefix`. reduced and xpos_scale may be undefined.
struct CosSinStages {
  Halide::Func reduced, cos_sin, xpos_scale;
};
CosSinStages own_cos_sin_stages(const RopeSpec& spec, RopeAlgorithm& a, const RopeFrequencies& freqs,
                                const std::string& prefix);
// cos/sin of pair r read from the cache (scheme table), named `name`.
Halide::Func cos_sin_from_cache(const RopeSpec& spec, RopeAlgorithm& a, const std::string& name);
// xPos scales (r, s, b) -> {query s_r^p, key s_r^-p}; `prefix` keeps the
// names of a second copy unique.
Halide::Func xpos_stage(const RopeSpec& spec, const RopeAlgorithm& a, const RopeFrequencies& freqs,
                        const std::string& prefix);

// The row of `table` (its dim 1: a cos/sin cache, a learned table) that
// position id `id` names, clamped into the table in the id's own type: no
// id reads outside it (ids the call could not check, on a device: see
// README.md), and bounds inference sees the rows a data-dependent id may reach.
Halide::Expr table_row(const Halide::Expr& id, const Halide::ImageParam& table);

}  // namespace ropegen::lowering
