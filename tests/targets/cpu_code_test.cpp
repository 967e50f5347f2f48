// The shape of the CPU schedule, read from Halide's lowered statement of
// llama3-8B's q + k kernel: k computed in q's parallel loops, and one
// cos/sin stage, shared by both.
#include <gtest/gtest.h>

#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "ropegen/spec_io.h"
#include "targets/device_code.h"

namespace ropegen {
namespace {

// Names of the stages whose production contains `part`.
std::set<std::string> produced(const std::string& stmt, const std::string& part) {
  std::set<std::string> names;
  const std::regex produce("produce ([A-Za-z0-9_$.]+) \\{");
  for (auto it = std::sregex_iterator(stmt.begin(), stmt.end(), produce); it != std::sregex_iterator(); ++it)
    if ((*it)[1].str().find(part) != std::string::npos) names.insert((*it)[1].str());
  return names;
}

const char* const kLlama3 = "scaling: {type: llama3, factor: 8, original_max_position: 8192}\n";

std::string llama3_code(const std::string& dtype, const std::string& frequency, const char* target,
                        targets::PipelineCode kind) {
  const RopeSpec spec = parse_spec("name: l\nhead_dim: 128\ndtype: " + dtype + "\n" + frequency, "llama3.yaml").value();
  lowering::KernelVariant variant;
  variant.with_k = true;
  Result<std::string> code = targets::pipeline_code(spec, variant, Halide::Target(target), kind);
  EXPECT_TRUE(code.ok()) << (code.ok() ? "" : code.errors().front().message);
  return code.ok() ? code.value() : "";
}

std::string llama3_stmt(const std::string& dtype, const std::string& frequency = kLlama3) {
  const std::string stmt = llama3_code(dtype, frequency, "x86-64-linux-avx512_zen4", targets::PipelineCode::LoweredStmt);
  // Funcs built again in one process get suffixes ($1, ...): dropped.
  return std::regex_replace(stmt, std::regex("\\$[0-9]+"), "");
}

TEST(CpuCode, KComputedWithQSharesOneCosSin) {
  for (const char* dtype : {"bf16", "f32"}) {
    SCOPED_TRACE(dtype);
    const std::string stmt = llama3_stmt(dtype);
    // Parallel loops become closures named after their loop: batch groups,
    // then a sequence's tiles, both q's with k's fused in; none of k's own.
    // (Closure names spell out_q$1 as out_q_1 or out_q__1.)
    EXPECT_TRUE(std::regex_search(stmt, std::regex("par_for_out_q[_0-9]*_s0_b_fused_bo_par_for_out_q[_0-9]*_s0_s_fused_so")))
        << stmt;
    EXPECT_EQ(stmt.find("par_for_out_k"), std::string::npos) << stmt;
    EXPECT_EQ(produced(stmt, "cos_sin"), std::set<std::string>{"cos_sin"}) << stmt;
    EXPECT_EQ(produced(stmt, "reduced"), std::set<std::string>{"reduced"});
    EXPECT_EQ(produced(stmt, "out_k"), std::set<std::string>{"out_k"});
  }
}

// Frequency scheme table: the same loops, no angle reduction at all; the
// cache's rows read where they are used (1-D positions), or gathered once per
// tile into the shared cos/sin stage (multi-axis: a row per pair).
TEST(CpuCode, CosSinCacheReadInPlaceOrGatheredPerTile) {
  for (const char* dtype : {"bf16", "f32"}) {
    for (const char* axes : {"", "positions: explicit\naxes: {sections: [16, 24, 24]}\n"}) {
      SCOPED_TRACE(std::string(dtype) + " " + axes);
      const std::string stmt = llama3_stmt(dtype, std::string("frequency: {scheme: table}\n") + axes);
      EXPECT_TRUE(std::regex_search(stmt, std::regex("par_for_out_q[_0-9]*_s0_b_fused_bo_par_for_out_q[_0-9]*_s0_s_fused_so")))
          << stmt;
      EXPECT_EQ(stmt.find("par_for_out_k"), std::string::npos) << stmt;
      EXPECT_EQ(produced(stmt, "cos_sin"), *axes ? std::set<std::string>{"cos_sin"} : std::set<std::string>{}) << stmt;
      EXPECT_EQ(produced(stmt, "reduced"), std::set<std::string>{});
      EXPECT_EQ(produced(stmt, "inv_freq"), std::set<std::string>{});
      EXPECT_NE(stmt.find("cos_sin_cache["), std::string::npos) << stmt;
    }
  }
}

// Tiles follow the pool's size (targets/cpu_schedule.cpp, tokens_per_tile)
// as an argument: read inside the pipeline, it was read once per use, and
// the tile's loops and its cos/sin allocation could see different values
// if another thread resized the pool during the call.
TEST(CpuCode, PoolSizeIsAnArgumentNotReadInside) {
  for (const char* dtype : {"bf16", "f32"}) {
    SCOPED_TRACE(dtype);
    const std::string stmt = llama3_stmt(dtype);
    EXPECT_EQ(stmt.find("halide_get_num_threads"), std::string::npos) << stmt;
    EXPECT_NE(stmt.find("pool_threads"), std::string::npos) << stmt;
  }
}

// bf16 stores: vcvtne2ps2bf16 (32 floats to 32 bf16 per instruction) where
// the CPU has AVX512-BF16, the integer rounding and a narrowing move elsewhere.
TEST(CpuCode, Bf16StoresUseTheInstructionWhereTheCpuHasIt) {
  // An Intel host target names avx512_sapphirerapids, not avx512_zen4 (the
  // instruction was missed there: Halide's target queries see only the
  // features named, not those its x86 code generator implies).
  for (const char* target : {"x86-64-linux-avx512_zen4", "x86-64-linux-avx512_zen5", "x86-64-linux-avx512_sapphirerapids",
                             "x86-64-linux-avx-avx2-avx512-avx512_cannonlake-avx512_sapphirerapids-avx512_skylake-"
                             "avxvnni-f16c-fma-sse41"}) {
    SCOPED_TRACE(target);
    const std::string code = llama3_code("bf16", kLlama3, target, targets::PipelineCode::Assembly);
    EXPECT_NE(code.find("vcvtne2ps2bf16"), std::string::npos);
  }
  const std::string skylake = llama3_code("bf16", kLlama3, "x86-64-linux-avx512_skylake", targets::PipelineCode::Assembly);
  EXPECT_EQ(skylake.find("vcvtne"), std::string::npos);
  EXPECT_NE(skylake.find("vpmovdw"), std::string::npos);
}

// Whether a line of `assembly` has a packed single FMA instruction on `reg` registers.
bool has_vector_fma(const std::string& assembly, const std::string& reg) {
  std::istringstream lines(assembly);
  for (std::string line; std::getline(lines, line);) {
    const size_t at = line.find("\tvf");
    if (at == std::string::npos || line.find(reg) == std::string::npos) continue;
    const std::string op = line.substr(at + 1, line.find('\t', at + 1) - at - 1);
    if ((op.rfind("vfmadd", 0) == 0 || op.rfind("vfmsub", 0) == 0 || op.rfind("vfnm", 0) == 0) &&
        op.size() > 2 && op.compare(op.size() - 2, 2, "ps") == 0)
      return true;
  }
  return false;
}

// The rotation's multiply-adds (lowering/fma.h): vector FMA instructions
// where the CPU has them, nowhere a call to the C library's fmaf (what LLVM
// makes of its intrinsic on a CPU without them, one call per lane); the
// float64 emulation on SSE-only x86.
TEST(CpuCode, RotationUsesVectorFmaWhereTheCpuHasIt) {
  for (const char* dtype : {"bf16", "f32"}) {
    SCOPED_TRACE(dtype);
    const std::string zen4 = llama3_code(dtype, kLlama3, "x86-64-linux-avx512_zen4", targets::PipelineCode::Assembly);
    EXPECT_TRUE(has_vector_fma(zen4, "%zmm"));
    EXPECT_EQ(zen4.find("fmaf"), std::string::npos);
    const std::string avx2 = llama3_code(dtype, kLlama3, "x86-64-linux-avx-avx2-f16c-fma-sse41", targets::PipelineCode::Assembly);
    EXPECT_TRUE(has_vector_fma(avx2, "%ymm"));
    EXPECT_EQ(avx2.find("fmaf"), std::string::npos);
    const std::string sse41 = llama3_code(dtype, kLlama3, "x86-64-linux-sse41", targets::PipelineCode::Assembly);
    EXPECT_EQ(sse41.find("fma"), std::string::npos);
    EXPECT_NE(sse41.find("addpd"), std::string::npos);  // the emulation's float64 sums
  }
}

// qk_norm (Qwen3's heads, bf16, q and k): per row, the float64 partial
// sums of squares are one vector (eight lanes), 1 / rms is computed for
// eight rows at once (a vector across rows), the rotation's pairs and the
// whole-row stores are vectors, and k still runs in q's parallel loops.
TEST(CpuCode, QkNormRowsAreVectorised) {
  const RopeSpec spec = parse_spec("name: q\nhead_dim: 128\nrotary_dim: 64\ndtype: bf16\n"
                                   "qk_norm: {eps: 1.0e-6}\n", "qwen3.yaml").value();
  lowering::KernelVariant variant;
  variant.with_k = true;
  Result<std::string> code = targets::pipeline_code(spec, variant, Halide::Target("x86-64-linux-avx512_zen4"),
                                                    targets::PipelineCode::LoweredStmt);
  ASSERT_TRUE(code.ok());
  const std::string stmt = std::regex_replace(code.value(), std::regex("\\$[0-9]+"), "");
  for (const char* stage : {"q_square_sums", "k_square_sums", "q_inv_rms", "k_inv_rms"})
    EXPECT_TRUE(
        std::regex_search(stmt, std::regex(std::string(stage) + "\\[ramp\\([^\\]]*, 1, 8\\)( aligned[^\\]]*)?\\] = ")))
        << stage;
  for (const char* stage : {"rotated_q", "rotated_k", "out_q", "out_k"})
    EXPECT_TRUE(std::regex_search(stmt, std::regex(std::string(stage) + "\\[ramp\\([^\\]]*, 1, 16\\)( aligned[^\\]]*)?\\] = ")))
        << stage;
  EXPECT_EQ(stmt.find("par_for_out_k"), std::string::npos) << stmt;
}

}  // namespace
}  // namespace ropegen
