// The float32 -> bfloat16 store, bit for bit, on every CPU path and on
// Vulkan, against the instruction's definition (Intel SDM, VCVTNEPS2BF16:
// round to nearest even, denormal inputs to a zero of their sign, NaN made
// quiet), written here from that text and not from lowering/.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <Halide.h>

#include "kernels/gpu_parity.h"
#include "support/run_elementwise.h"
#include "lowering/storage.h"

namespace ropegen {
namespace {

uint16_t vcvtneps2bf16(uint32_t x) {
  const uint32_t exponent = x & 0x7f800000u, mantissa = x & 0x007fffffu;
  if (exponent == 0) return static_cast<uint16_t>((x >> 16) & 0x8000u);           // zero or denormal
  if (exponent == 0x7f800000u && mantissa == 0) return static_cast<uint16_t>(x >> 16);  // infinity
  if (exponent == 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);    // NaN, quieted
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

// Every top half with low halves that decide the rounding (ties, just above
// and below), plus random words: every class of input, both signs.
std::vector<uint32_t> inputs() {
  std::vector<uint32_t> words;
  for (uint32_t high = 0; high < 0x10000u; ++high)
    for (uint32_t low : {0x0000u, 0x0001u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu}) words.push_back(high << 16 | low);
  std::mt19937 random(7);
  for (int i = 0; i < 100000; ++i) words.push_back(random());
  return words;
}

std::vector<uint16_t> run(const std::vector<uint32_t>& words, const Halide::Target& target,
                          lowering::Bf16Rounding rounding) {
  const int n = static_cast<int>(words.size());
  Halide::Buffer<float> in(n);
  std::memcpy(in.data(), words.data(), words.size() * sizeof(uint32_t));
  in.set_host_dirty();  // written through data(): a GPU run must copy it over
  Halide::Var x("x");
  return test::run_elementwise<uint16_t>(lowering::store_from_float(in(x), DType::BF16, rounding), x, n, target);
}

void expect_instruction_bits(const std::string& what, const Halide::Target& target,
                             lowering::Bf16Rounding rounding = lowering::Bf16Rounding::InstructionWhereAvailable) {
  SCOPED_TRACE(what + ": " + target.to_string());
  const std::vector<uint32_t> words = inputs();
  std::vector<uint16_t> got;
  try {
    got = run(words, target, rounding);
  } catch (const Halide::Error& e) {
    FAIL() << e.what();
  }
  int64_t wrong = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const uint16_t want = vcvtneps2bf16(words[i]);
    if (got[i] != want && ++wrong <= 5)
      ADD_FAILURE() << "at " << i << std::hex << ": f32 0x" << words[i] << ": got 0x" << got[i] << ", want 0x" << want;
  }
  EXPECT_EQ(wrong, 0) << "of " << got.size() << " words";
}

TEST(Bf16Store, MatchesTheInstructionOnEveryCpuPath) {
  const Halide::Target host = Halide::get_host_target();
  if (host.has_feature(Halide::Target::AVX512_Zen4))
    expect_instruction_bits("the instruction", host);
  else
    std::printf("[  NOTE    ] no AVX512-BF16 here: the instruction path is not run\n");
  // The same rounding in integer ops: on CPUs without the instruction, and
  // where a store may be scalar.
  expect_instruction_bits("a CPU without it", Halide::Target(host.os, host.arch, host.bits));
  expect_instruction_bits("integer ops", host, lowering::Bf16Rounding::IntegerOps);
}

TEST(Bf16Store, VulkanGivesTheSameBits) {
  ROPEGEN_REQUIRE_GPU(vulkan, "vulkan");
  expect_instruction_bits("vulkan", *vulkan.target);
}

}  // namespace
}  // namespace ropegen
