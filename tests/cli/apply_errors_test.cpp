// `rope-gen apply` on calls that do not fit the spec: exit 2, a message that
// names both shapes (or the offending value) and the fix, no output file.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <limits>

#include "atomic_file.h"
#include "npy.h"
#include "support/run_command.h"
#include "support/test_paths.h"

namespace ropegen {
namespace {

using ::testing::HasSubstr;

class ApplyErrors : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = test::make_temp_dir(); }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string path(const std::string& name) const { return dir_ + "/" + name; }
  std::string spec(const std::string& text) {
    test::write_text(path("spec.yaml"), text);
    return path("spec.yaml");
  }
  std::string floats(const std::string& name, const std::vector<int64_t>& shape) {
    int64_t n = 1;
    for (int64_t e : shape) n *= e;
    cli::write_file_atomically(path(name), cli::npy_bytes(std::vector<float>(n, 0.5f), shape));
    return path(name);
  }
  std::string ints(const std::string& name, const std::vector<int64_t>& shape, int64_t value) {
    int64_t n = 1;
    for (int64_t e : shape) n *= e;
    cli::write_file_atomically(path(name), cli::npy_bytes(std::vector<int64_t>(n, value), shape));
    return path(name);
  }
  // Runs `apply ARGS --out(-q) OUT`; expects exit 2, no output; the message.
  std::string rejected(const std::string& args, const char* out_flag = "--out") {
    const test::CommandResult r =
        test::run_command(ropegen::test::rope_gen_binary() + " apply " + args + " " + out_flag + " " + path("out.npy"));
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_FALSE(std::filesystem::exists(path("out.npy")));
    return r.err;
  }
  std::string dir_;
};

TEST_F(ApplyErrors, RopeShapeMistakeNamesBothShapesAndTheFix) {
  const std::string err = rejected(spec("name: r\nhead_dim: 8\n") + " --q " + floats("q.npy", {2, 5, 3, 4}), "--out-q");
  EXPECT_THAT(err, HasSubstr("q has shape (2, 5, 3, 4) but the spec's head_dim is 8: expected (2, 5, 3, 8)"));
  EXPECT_THAT(err, HasSubstr("cos/sin-sized data"));
}

TEST_F(ApplyErrors, LearnedPositionOutsideTheTable) {
  const std::string s = spec("name: l\nencoding: learned\ndim: 4\n");
  const std::string err = rejected(s + " --x " + floats("x.npy", {1, 3, 4}) + " --positions " + ints("p.npy", {1, 3}, 10) +
                                   " --table " + floats("t.npy", {8, 4}));
  EXPECT_THAT(err, HasSubstr("position 10 is outside the table: it has 8 rows (positions 0..7)"));
  EXPECT_THAT(rejected(s + " --x " + floats("x.npy", {1, 3, 4}) + " --positions " + ints("p.npy", {1, 3}, 1)),
              HasSubstr("pass it shaped (max_len, 4)"));
}

TEST_F(ApplyErrors, AlibiScoresNeedTheSpecsHeads) {
  const std::string err = rejected(spec("name: a\nencoding: alibi\nnum_heads: 8\n") + " --x " + floats("s.npy", {1, 4, 5, 5}));
  EXPECT_THAT(err, HasSubstr("x has shape (1, 4, 5, 5) but the spec has num_heads 8: expected (1, 8, 5, 5)"));
}

TEST_F(ApplyErrors, MultiAxisPositionsNeedTheirAxisDim) {
  const std::string s = spec("name: m\nhead_dim: 16\npositions: explicit\naxes: {sections: [2, 3, 3]}\n");
  const std::string err =
      rejected(s + " --q " + floats("q.npy", {2, 5, 3, 16}) + " --positions " + ints("p.npy", {2, 5}, 1), "--out-q");
  EXPECT_THAT(err, HasSubstr("positions have shape (2, 5) but q (2, 5, 3, 16) in layout bshd needs (2, 5, 3)"));
  EXPECT_THAT(err, HasSubstr("one id per axis"));
}

TEST_F(ApplyErrors, FlagsThatDoNotBelongToTheEncoding) {
  EXPECT_THAT(rejected(spec("name: r\nhead_dim: 8\n") + " --x " + floats("x.npy", {1, 2, 1, 8})),
              HasSubstr("is a rope spec: pass --q"));
  EXPECT_THAT(rejected(spec("name: s\nencoding: sinusoidal\ndim: 8\n") + " --q " + floats("q.npy", {1, 2, 8}), "--out-q"),
              HasSubstr("is a sinusoidal spec: pass its tensor as --x"));
  const std::string runtime = spec("name: f\nhead_dim: 8\nfrequency: {scheme: runtime}\n");
  EXPECT_THAT(rejected(runtime + " --q " + floats("q.npy", {1, 2, 1, 8}), "--out-q"),
              HasSubstr("pass inv_freq shaped (4,)"));
  EXPECT_THAT(rejected(runtime + " --backward --q " + floats("q.npy", {1, 2, 1, 8}) + " --freqs " + floats("f.npy", {4}) +
                           " --out-freqs " + path("df.npy"),
                       "--out-q"),
              HasSubstr("needs the forward input saved_q"));
  EXPECT_FALSE(std::filesystem::exists(path("df.npy")));
}

TEST_F(ApplyErrors, CosSinCacheMistakesNameTheFlag) {
  const std::string table = spec("name: t\nhead_dim: 8\nlayout: thd\npositions: explicit\nfrequency: {scheme: table}\n");
  const std::string q = floats("q.npy", {3, 1, 8});
  EXPECT_EQ(rejected(table + " --q " + q + " --positions " + ints("p.npy", {3}, 1), "--out-q"),
            "--cos-sin-cache: error: the spec has `frequency: {scheme: table}`: pass cos_sin_cache, float32 shaped "
            "(max_pos, 8) (row p: cos of the 4 pairs at position p, then their sin)\n");
  EXPECT_EQ(rejected(table + " --q " + q + " --positions " + ints("p.npy", {3}, 9) + " --cos-sin-cache " +
                         floats("c.npy", {9, 8}),
                     "--out-q"),
            "--cos-sin-cache: error: position id 9 is outside cos_sin_cache: it has 9 rows (positions 0..8); pass a "
            "longer cache or smaller positions\n");
  EXPECT_THAT(rejected(table + " --q " + q + " --positions " + ints("p.npy", {3}, 1) + " --cos-sin-cache " +
                           floats("c.npy", {9, 4}),
                       "--out-q"),
              HasSubstr("--cos-sin-cache: error: cos_sin_cache has shape (9, 4) but must be (max_pos, 8)"));
  cli::write_file_atomically(path("c64.npy"), cli::npy_bytes(std::vector<int64_t>(72, 1), {9, 8}));
  EXPECT_EQ(
      rejected(table + " --q " + q + " --positions " + ints("p.npy", {3}, 1) + " --cos-sin-cache " + path("c64.npy"),
               "--out-q"),
      "error: --cos-sin-cache (" + path("c64.npy") +
          ") has dtype <i8; it must be float32 (np.float32) "
          "whatever the spec's dtype\n");
  EXPECT_EQ(rejected(spec("name: r\nhead_dim: 8\n") + " --q " + floats("q4.npy", {1, 3, 1, 8}) + " --cos-sin-cache " +
                         floats("c.npy", {9, 8}),
                     "--out-q"),
            "--cos-sin-cache: error: cos_sin_cache is for specs with `frequency: {scheme: table}`; this spec computes "
            "its cos and sin\n");
}

TEST_F(ApplyErrors, KvCacheMistakesNameTheFlag) {
  const std::string kv = spec("name: kv\nhead_dim: 8\nlayout: thd\npositions: explicit\nkv_cache: {layout: contiguous}\n");
  const std::string args = kv + " --q " + floats("q.npy", {3, 1, 8}) + " --k " + floats("k.npy", {3, 1, 8}) +
                           " --positions " + ints("p.npy", {3}, 1) + " --k-cache " + floats("kc.npy", {4, 1, 8}) +
                           " --out-k-cache " + path("okc.npy");
  EXPECT_EQ(rejected(args + " --slot-mapping " + ints("s.npy", {3}, 4), "--out-q"),
            "--slot-mapping: error: slot_mapping[0] is 4, outside k_cache's 4 slots (0..3; negative: not appended)\n");
  EXPECT_FALSE(std::filesystem::exists(path("okc.npy")));
  EXPECT_EQ(rejected(args, "--out-q"),
            "--slot-mapping: error: the spec's kv_cache layout is contiguous: pass slot_mapping (int32 [T], a slot per "
            "token)\n");
  EXPECT_EQ(rejected(kv + " --q " + path("q.npy") + " --k " + path("k.npy") + " --positions " + path("p.npy") +
                         " --k-cache " + path("kc.npy"),
                     "--out-q"),
            "error: --k-cache and --out-k-cache go together (the cache is read, updated and written)\n");
  EXPECT_EQ(rejected(spec("name: r\nhead_dim: 8\n") + " --q " + floats("q4.npy", {1, 3, 1, 8}) + " --k-cache " +
                         path("kc.npy"),
                     "--out-q"),
            "error: --k-cache is for specs with a kv_cache section (the fused KV-cache append); `r` has none\n");
}

// Run-time frequencies that are not finite, or past the bound every spec's
// frequencies obey, would give NaN or no longer rotations: refused by value.
TEST_F(ApplyErrors, RuntimeFrequenciesMustBeFiniteAndBounded) {
  const std::string runtime = spec("name: f\nhead_dim: 8\nfrequency: {scheme: runtime}\n");
  const std::string q = floats("q.npy", {1, 2, 1, 8});
  for (auto [value, shown] : std::vector<std::pair<float, const char*>>{
           {std::numeric_limits<float>::quiet_NaN(), "nan"}, {INFINITY, "inf"}, {-2048.0f, "-2048"}}) {
    cli::write_file_atomically(path("f.npy"), cli::npy_bytes(std::vector<float>{0.5f, 0.25f, value, 0.125f}, {4}));
    EXPECT_THAT(rejected(runtime + " --q " + q + " --freqs " + path("f.npy"), "--out-q"),
                HasSubstr(std::string("freqs[2] is ") + shown + ": run-time frequencies must be finite and at most 1024"));
  }
}

// Not an error: an empty tensor (a zero dim) on any encoding is a no-op
// whose output has the input's shape.
TEST_F(ApplyErrors, EmptyTensorsAreNoOpsNotErrors) {
  auto apply = [&](const std::string& args, const char* out_flag, const std::vector<int64_t>& shape) {
    std::filesystem::remove(path("out.npy"));
    const test::CommandResult r =
        test::run_command(ropegen::test::rope_gen_binary() + " apply " + args + " " + out_flag + " " + path("out.npy"));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(cli::read_npy(path("out.npy")).shape, shape);
  };
  apply(spec("name: r\nhead_dim: 8\n") + " --q " + floats("q.npy", {2, 0, 3, 8}), "--out-q", {2, 0, 3, 8});
  apply(spec("name: t\nhead_dim: 8\nlayout: thd\n") + " --q " + floats("q.npy", {0, 3, 8}), "--out-q", {0, 3, 8});
  apply(spec("name: s\nencoding: sinusoidal\ndim: 6\n") + " --x " + floats("x.npy", {0, 5, 6}), "--out", {0, 5, 6});
  apply(spec("name: a\nencoding: alibi\nnum_heads: 2\n") + " --x " + floats("x.npy", {1, 2, 3, 0}), "--out", {1, 2, 3, 0});
}

}  // namespace
}  // namespace ropegen
