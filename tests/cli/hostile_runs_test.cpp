// Hostile values for the runs themselves: positions past 2^32 or negative,
// offsets that overflow, targets this machine cannot run, sizes larger than
// its memory. Each is exit 2 and a sentence naming the value, never a crash,
// a hang or outputs that are no longer rotations.
#include <gmock/gmock.h>

#include <cmath>
#include <fstream>

#include "cli/cli_fixture.h"

namespace ropegen {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kLimit = int64_t{1} << 32;  // kMaxPosition
const std::string kRope = "name: r\nhead_dim: 8\n";

class Runs : public test::CliFixture {
 protected:
  // Exit 2 with `message`, and no output.
  void refused(const std::string& args, const std::string& message) {
    const test::CommandResult r = rope_gen(args + " " + path("out.npy"));
    EXPECT_EQ(r.exit_code, 2) << args << ": " << r.err;
    EXPECT_THAT(r.err, HasSubstr(message)) << args;
    EXPECT_FALSE(std::filesystem::exists(path("out.npy")));
  }
  std::string rope_q() {
    std::vector<float> q(1 * 4 * 1 * 8);
    for (size_t i = 0; i < q.size(); ++i) q[i] = std::sin(static_cast<float>(i) * 0.7f) + 0.1f;
    cli::write_file_atomically(path("q.npy"), cli::npy_bytes(q, {1, 4, 1, 8}));
    return path("q.npy");
  }
};

TEST_F(Runs, OffsetUpToTheLimitStillRotates) {
  const std::string q = rope_q();
  // Four tokens: the last one at position 2^32.
  const test::CommandResult r = rope_gen("apply " + spec("r.yaml", kRope) + " --q " + q + " --offset " +
                                         std::to_string(kLimit - 3) + " --out-q " + path("out.npy"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const cli::NpyArray in = cli::read_npy(q), out = cli::read_npy(path("out.npy"));
  ASSERT_EQ(out.data.size(), in.data.size());
  auto norm = [](const cli::NpyArray& a, int token) {
    double sum = 0;
    for (int d = 0; d < 8; ++d) sum += std::pow(reinterpret_cast<const float*>(a.data.data())[token * 8 + d], 2);
    return std::sqrt(sum);
  };
  for (int token = 0; token < 4; ++token) EXPECT_NEAR(norm(out, token), norm(in, token), 1e-5) << token;
}

TEST_F(Runs, ImplicitPositionsPastTheLimitOverflowingOrNegativeAreRefused) {
  const std::string rope = "apply " + spec("r.yaml", kRope) + " --q " + rope_q();
  refused(rope + " --offset " + std::to_string(kLimit - 2) + " --out-q",
          "position (offset + index) 4294967297 is out of range: positions must be in 0..2^32");
  refused(rope + " --offset 288230376151711744 --out-q", "is out of range");  // 2^58: no longer rotations
  refused(rope + " --offset 9223372036854775807 --out-q", "offset 9223372036854775807 + 4 tokens overflows int64");
  refused(rope + " --offset -1 --out-q", "position (offset + index) -1 is negative");
  const std::string sinusoidal =
      "apply " + spec("s.yaml", "name: s\nencoding: sinusoidal\ndim: 4\n") + " --x " + floats("x.npy", {1, 3, 4});
  refused(sinusoidal + " --offset " + std::to_string(kLimit) + " --out", "is out of range");
  // thd: the offset plus the longest sequence (3 tokens).
  const std::string thd = "apply " + spec("t.yaml", kRope + "layout: thd\n") + " --q " + floats("t.npy", {5, 1, 8}) +
                          " --cu-seqlens " + ints("cu.npy", {0, 2, 5}, {3});
  refused(thd + " --offset " + std::to_string(kLimit - 1) + " --out-q", "4294967297 is out of range");
}

TEST_F(Runs, LearnedTableBoundsSeeTheRealPosition) {
  // offset + index overflowed int64 and slipped past the table's bounds check.
  const std::string learned = "apply " + spec("l.yaml", "name: l\nencoding: learned\ndim: 4\npositions: implicit\n") + " --x " +
                              floats("x.npy", {1, 3, 4}) + " --table " + floats("table.npy", {8, 4});
  refused(learned + " --offset 9223372036854775807 --out", "overflows int64");
  refused(learned + " --offset 6 --out", "position 8 is outside the table: it has 8 rows");
}

TEST_F(Runs, AlibiQueryRowsAreRangeChecked) {
  const std::string alibi = "apply " + spec("a.yaml", "name: a\nencoding: alibi\nnum_heads: 2\n") + " --x " +
                            floats("s.npy", {1, 2, 3, 2});
  refused(alibi + " --offset " + std::to_string(kLimit - 1) + " --out", "4294967297 is out of range");
  refused(alibi + " --offset 9223372036854775806 --out", "overflows int64");
  refused(alibi + " --offset -5 --out", "is negative");
}

TEST_F(Runs, ExplicitIdsHaveTheSameRange) {
  const std::string rope = "apply " + spec("r.yaml", kRope + "positions: explicit\n") + " --q " + rope_q();
  refused(rope + " --positions " + ints("p.npy", {0, 1, 2, kLimit + 1}, {4}) + " --out-q",
          "position id 4294967297 is out of range: positions must be in 0..2^32");
  refused(rope + " --positions " + ints("n.npy", {0, -1, 2, 3}, {4}) + " --out-q", "position id -1 is negative");
  const std::string axes = "apply " + spec("m.yaml", "name: m\nhead_dim: 16\npositions: explicit\naxes: {sections: [2, 3, 3]}\n") +
                           " --q " + floats("mq.npy", {1, 2, 1, 16}) + " --positions " +
                           ints("mp.npy", {0, 0, 0, 1, kLimit + 1, 1}, {2, 3});
  refused(axes + " --out-q", "is out of range");
  refused("table " + spec("t.yaml", kRope) + " --positions " + ints("tp.npy", {kLimit + 1}, {1}) + " --out",
          "position 4294967297 is out of range");
}

// A target for another architecture than this machine's.
std::string foreign_target() {
#if defined(__x86_64__) || defined(__i386__)
  return "arm-64-linux";
#else
  return "x86-64-linux";
#endif
}

TEST_F(Runs, TargetsThisMachineCannotRunAreRefusedForRunsNotBuilds) {
  const std::string s = spec("r.yaml", kRope), q = rope_q();
  refused("apply " + s + " --q " + q + " --target " + foreign_target() + " --out-q",
          "target `" + foreign_target() + "` is for " + foreign_target() + " but this machine is");
  const test::CommandResult bench = rope_gen("bench " + s + " --shape 1,4,1 --target " + foreign_target());
  EXPECT_EQ(bench.exit_code, 2) << bench.err;
  EXPECT_THAT(bench.err, HasSubstr("its kernels cannot run here (`rope-gen build` still compiles for it)"));
  refused("apply " + s + " --q " + q + " --target x86-64-linux-sve2 --out-q", "target `x86-64-linux-sve2` is not valid");
  const test::CommandResult build = rope_gen("build " + s + " --targets " + foreign_target() + " -o " + path("lib"));
  EXPECT_EQ(build.exit_code, 0) << build.err;
}

TEST_F(Runs, CpuFeaturesThisMachineLacksAreRefused) {
#if !defined(__x86_64__)
  GTEST_SKIP() << "an x86-64 feature check";
#endif
  std::ifstream cpuinfo("/proc/cpuinfo");
  const std::string flags((std::istreambuf_iterator<char>(cpuinfo)), std::istreambuf_iterator<char>());
  if (flags.find("avx512_fp16") != std::string::npos) GTEST_SKIP() << "this CPU has Sapphire Rapids' avx512_fp16";
  refused("apply " + spec("r.yaml", kRope + "dtype: f16\n") + " --q " + rope_q() +
              " --target x86-64-linux-avx512_sapphirerapids --out-q",
          "needs CPU features this machine lacks (avx512_sapphirerapids");
}

TEST_F(Runs, SizesLargerThanMemoryOrInt64AreRefusedNamingThem) {
  const std::string s = spec("r.yaml", kRope);
  refused("table " + spec("w.yaml", "name: w\nhead_dim: 256\n") + " --max-pos 4294967297 --out",
          "--max-pos 4294967297: error: needs 4432406250504 bytes");
  refused("table " + s + " --max-pos 9223372036854775807 --out", "--max-pos must be in 1..2^32 + 1");
  for (const auto& [shape, message] : std::vector<std::pair<std::string, std::string>>{
           {"10000000,1000000,1000000", "10000000 x 1000000 x 1000000 x 8 elements overflow int64"},
           {"1,1000000000,1000", "needs 96004000000000 bytes"},
           {"1,3000000000,1", "must be at most 2^31 - 1"}}) {
    const test::CommandResult r = rope_gen("bench " + s + " --shape " + shape);
    EXPECT_EQ(r.exit_code, 2) << shape << ": " << r.err;
    EXPECT_THAT(r.err, HasSubstr(message)) << shape;
  }
}

// CLI11 alone saturated integers past int64 (strtoll) and let NaN through
// its ranges (bench --seconds nan crashed); --k-heads is 1 or more.
TEST_F(Runs, NumberFlagsPastInt64NotFiniteOrOutOfRangeAreRefused) {
  const std::string s = spec("r.yaml", kRope);
  refused("apply " + s + " --q " + rope_q() + " --offset 99999999999999999999 --out-q",
          "99999999999999999999 is beyond the 64-bit integers (-2^63..2^63-1)");
  refused("apply " + s + " --q " + rope_q() + " --offset -99999999999999999999 --out-q",
          "is beyond the 64-bit integers");
  for (const auto& [flags, message] : std::vector<std::pair<std::string, std::string>>{
           {"--seconds nan", "nan is not a finite number"},
           {"--seconds inf", "--seconds"},
           {"--seconds -1", "--seconds"},
           {"--k-heads 0", "--k-heads"},
           {"--k-heads -1", "--k-heads"},
           {"--passes 99999999999999999999", "--passes"}}) {
    const test::CommandResult r = rope_gen("bench " + s + " --shape 1,4,1 " + flags);
    EXPECT_EQ(r.exit_code, 2) << flags << ": " << r.err;
    EXPECT_THAT(r.err, HasSubstr(message)) << flags;
  }
}

}  // namespace
}  // namespace ropegen
