// rope-gen check / freqs, called exactly as users and outside tests do (from-hf: from_hf_test.cpp).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "atomic_file.h"
#include "npy.h"
#include "ropegen/spec_io.h"
#include "support/run_command.h"
#include "support/test_paths.h"

namespace ropegen {
namespace {

using ::testing::HasSubstr;
using test::run_command;

const std::string kTool = ropegen::test::rope_gen_binary();
const std::string kExamples = ropegen::test::source_path("/examples");

class Cli : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = test::make_temp_dir(); }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string path(const std::string& name) const { return dir_ + "/" + name; }
  std::string spec_file(const std::string& text) {
    const std::string p = path("spec.yaml");
    test::write_text(p, text);
    return p;
  }
  std::string dir_;
};

// The float32 elements of an .npy file the tool wrote.
std::vector<float> floats(const std::string& file) {
  const cli::NpyArray a = cli::read_npy(file);
  std::vector<float> out(a.data.size() / 4);
  std::memcpy(out.data(), a.data.data(), a.data.size());
  return out;
}

TEST_F(Cli, CheckPrintsTheNormalisedSpec) {
  const auto r = run_command(kTool + " check " + kExamples + "/llama3_8b.yaml");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("name: llama3_8b\nencoding: rope\nhead_dim: 128\nrotary_dim: 128\nrotary_offset: 0\n"));
  EXPECT_THAT(r.out, HasSubstr("scaling:\n  type: llama3\n  factor: 8\n  original_max_position: 8192\n"
                               "  low_freq_factor: 1\n  high_freq_factor: 4\n"));
}

TEST_F(Cli, InvalidSpecExitsTwoWithFileLineColumn) {
  const std::string spec = spec_file("name: a\nhead_dim: 128\nrotary_dim: 130\n");
  const auto r = run_command(kTool + " check " + spec);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, spec + ":3:13: error: rotary_dim (130) must be even and in 2..128 (head_dim 128 - rotary_offset 0)\n"
                          "  rotary_dim: 130\n              ^\n");
}

TEST_F(Cli, FreqsWritesNpyAndJson) {
  const std::string out = path("f.npy");
  const auto r = run_command(kTool + " freqs " + kExamples + "/qwen2_5_7b.yaml --out " + out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["rotary_dim"], 128);
  EXPECT_NEAR(j["attention_factor"].get<double>(), 1.1386294361119891, 1e-15);
  ASSERT_EQ(j["inv_freq"].size(), 64u);
  EXPECT_EQ(j["inv_freq"][0].get<double>(), 1.0);
  // .npy: magic, v1.0, a 64-byte aligned header, then 64 float32.
  const std::string bytes = test::read_text(out);
  ASSERT_EQ(bytes.substr(0, 6), "\x93NUMPY");
  const size_t header = static_cast<unsigned char>(bytes[8]) | (static_cast<unsigned char>(bytes[9]) << 8);
  EXPECT_EQ((10 + header) % 64, 0u);
  EXPECT_THAT(bytes.substr(10, header), HasSubstr("'descr': '<f4', 'fortran_order': False, 'shape': (64,)"));
  ASSERT_EQ(bytes.size(), 10 + header + 64 * 4);
  float first, last;
  std::memcpy(&first, bytes.data() + 10 + header, 4);
  std::memcpy(&last, bytes.data() + bytes.size() - 4, 4);
  EXPECT_EQ(first, 1.0f);
  EXPECT_NEAR(last, static_cast<float>(j["inv_freq"][63].get<double>()), 0);
}

TEST_F(Cli, FreqsSeqLenSwitchesLongRopeAndDynamic) {
  auto run = [&](const std::string& spec, const std::string& extra) {
    const auto r = run_command(kTool + " freqs " + spec + " " + extra);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return nlohmann::json::parse(r.out);
  };
  EXPECT_EQ(run(kExamples + "/phi3_5_mini.yaml", "--seq-len 4096")["longrope_factors"], "short");
  EXPECT_EQ(run(kExamples + "/phi3_5_mini.yaml", "--seq-len 4097")["longrope_factors"], "long");
  const std::string dyn = spec_file("name: d\nhead_dim: 8\nscaling: {type: dynamic, factor: 2, original_max_position: 16}\n");
  EXPECT_EQ(run(dyn, "")["inv_freq"][1].get<double>(), 0.1);
  EXPECT_LT(run(dyn, "--seq-len 64")["inv_freq"][1].get<double>(), 0.1);
}

TEST_F(Cli, FailedFreqsLeavesNoOutputFile) {
  const std::string out = path("f.npy");
  const std::string bad = spec_file("name: a\nhead_dim: 7\n");
  EXPECT_EQ(run_command(kTool + " freqs " + bad + " --out " + out).exit_code, 2);
  EXPECT_FALSE(std::filesystem::exists(out));
  // An existing output survives a failed run untouched.
  test::write_text(out, "keep");
  EXPECT_EQ(run_command(kTool + " freqs " + bad + " --out " + out).exit_code, 2);
  EXPECT_EQ(test::read_text(out), "keep");
  EXPECT_EQ(run_command(kTool + " freqs " + kExamples + "/llama2_7b.yaml --out " + path("no/such/dir/f.npy")).exit_code, 2);
  for (const auto& e : std::filesystem::directory_iterator(dir_))
    EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos) << "temp file left: " << e.path();
}

TEST_F(Cli, TableWritesTheCosSinCache) {
  const std::string out = path("t.npy");
  const auto r = run_command(kTool + " table " + kExamples + "/qwen2_5_7b.yaml --max-pos 16 --out " + out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["rows"], 16);
  EXPECT_EQ(j["columns"], 128);
  const std::string bytes = test::read_text(out);
  EXPECT_THAT(bytes, HasSubstr("'shape': (16, 128)"));
  // Row 0: cos = attention factor, sin = 0.
  const size_t header = static_cast<unsigned char>(bytes[8]) | (static_cast<unsigned char>(bytes[9]) << 8);
  float cos0, sin0;
  std::memcpy(&cos0, bytes.data() + 10 + header, 4);
  std::memcpy(&sin0, bytes.data() + 10 + header + 64 * 4, 4);
  EXPECT_FLOAT_EQ(cos0, 1.1386294f);
  EXPECT_EQ(sin0, 0.0f);
  EXPECT_EQ(run_command(kTool + " table " + kExamples + "/qwen2_5_7b.yaml --out " + out).exit_code, 2);
}

// An engine's cache, as `rope-gen table` writes it, in a spec that reads it
// (`frequency: {scheme: table}`): the spec's rotation, up to the rounding of
// the cache (tests/kernels/cos_sin_cache_test.cpp bounds it).
TEST_F(Cli, ApplyReadsTheTableOfAnotherSpec) {
  const std::string qwen = path("yarn.yaml");  // attention factor 1.1386
  test::write_text(qwen, "name: yarn\nhead_dim: 128\nscaling: {type: yarn, factor: 4, original_max_position: 32768}\n");
  ASSERT_EQ(run_command(kTool + " table " + qwen + " --max-pos 21 --out " + path("t.npy")).exit_code, 0);
  std::vector<float> q(2 * 7 * 3 * 128);
  for (size_t i = 0; i < q.size(); ++i) q[i] = static_cast<float>((i * 37 % 101) / 50.0 - 1.0);
  cli::write_file_atomically(path("q.npy"), cli::npy_bytes(q, {2, 7, 3, 128}));
  const std::string table = spec_file("name: engine\nhead_dim: 128\nfrequency: {scheme: table}\n");
  const auto computed = run_command(kTool + " apply " + qwen + " --q " + path("q.npy") + " --offset 14 --out-q " + path("a.npy"));
  ASSERT_EQ(computed.exit_code, 0) << computed.err;
  const auto read = run_command(kTool + " apply " + table + " --q " + path("q.npy") + " --offset 14 --cos-sin-cache " +
                                path("t.npy") + " --out-q " + path("b.npy"));
  ASSERT_EQ(read.exit_code, 0) << read.err;
  const cli::NpyArray a = cli::read_npy(path("a.npy")), b = cli::read_npy(path("b.npy"));
  ASSERT_EQ(a.shape, b.shape);
  ASSERT_EQ(a.data.size(), q.size() * 4);
  std::vector<float> av(q.size()), bv(q.size());
  std::memcpy(av.data(), a.data.data(), a.data.size());
  std::memcpy(bv.data(), b.data.data(), b.data.size());
  for (size_t i = 0; i < q.size(); ++i) ASSERT_NEAR(av[i], bv[i], 1e-6) << i;
  EXPECT_NE(av, q);
  // One row short (positions 14 .. 20 need 21): exit 2, the flag named.
  ASSERT_EQ(run_command(kTool + " table " + qwen + " --max-pos 20 --out " + path("t.npy")).exit_code, 0);
  const auto short_cache = run_command(kTool + " apply " + table + " --q " + path("q.npy") + " --offset 14 --cos-sin-cache " +
                                       path("t.npy") + " --out-q " + path("c.npy"));
  EXPECT_EQ(short_cache.exit_code, 2);
  EXPECT_EQ(short_cache.err, "--cos-sin-cache: error: position (offset + index) 20 is outside cos_sin_cache: it has 20 "
                             "rows (positions 0..19), the offset is 14; pass a longer cache or smaller positions\n");
  EXPECT_FALSE(std::filesystem::exists(path("c.npy")));
  // A spec that reads a table has none to write.
  const auto none = run_command(kTool + " table " + table + " --max-pos 4 --out " + path("n.npy"));
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_THAT(none.err, HasSubstr("has no table of its own: it reads the call's cos_sin_cache"));
}

// `rope-gen table --kernel-bits`: the computing kernel's own cos/sin, so the
// kernel that reads them gives the computing kernel's bits (yarn's attention
// factor; DeepSeek's partial, interleaved-in, half-out pairs; int64 ids).
TEST_F(Cli, KernelBitsTableReproducesTheComputingKernel) {
  struct Case {
    std::string dims, frequencies;  // the reading spec swaps the frequencies for the table
  };
  const std::vector<Case> cases = {
      {"name: yarn\nhead_dim: 128\n", "scaling: {type: yarn, factor: 4, original_max_position: 32768}\n"},
      {"name: mla\nhead_dim: 24\nrotary_dim: 16\nrotary_offset: 8\npairing: interleaved\noutput_pairing: half\n",
       "scaling: {type: yarn, factor: 40, original_max_position: 4096, mscale: 0.707, mscale_all_dim: 0.707}\n"}};
  for (const Case& c : cases) {
    const std::string computing = path("computing.yaml"), reading = path("reading.yaml");
    test::write_text(computing, c.dims + c.frequencies);
    test::write_text(reading, c.dims + "frequency: {scheme: table}\n");
    const int64_t head_dim = load_spec(computing)->head_dim;
    const auto t = run_command(kTool + " table " + computing + " --max-pos 3000 --kernel-bits --out " + path("t.npy"));
    ASSERT_EQ(t.exit_code, 0) << t.err;
    std::vector<float> q(5 * 3 * head_dim);
    for (size_t i = 0; i < q.size(); ++i) q[i] = static_cast<float>((i * 37 % 101) / 50.0 - 1.0);
    cli::write_file_atomically(path("q.npy"), cli::npy_bytes(q, {1, 5, 3, head_dim}));
    const auto a = run_command(kTool + " apply " + computing + " --q " + path("q.npy") + " --offset 2990 --out-q " + path("a.npy"));
    ASSERT_EQ(a.exit_code, 0) << a.err;
    const auto b = run_command(kTool + " apply " + reading + " --q " + path("q.npy") + " --offset 2990 --cos-sin-cache " +
                               path("t.npy") + " --out-q " + path("b.npy"));
    ASSERT_EQ(b.exit_code, 0) << b.err;
    EXPECT_EQ(cli::read_npy(path("a.npy")).data, cli::read_npy(path("b.npy")).data) << c.dims;
    EXPECT_NE(cli::read_npy(path("a.npy")).data, cli::read_npy(path("q.npy")).data);
  }
}

// The fused KV-cache append: rotated k lands in the pages kv_indices gives
// (exactly out_k's values), v is copied, and nothing else in the caches changes.
TEST_F(Cli, ApplyAppendsToAPagedKvCache) {
  const std::string spec = spec_file("name: kv\nhead_dim: 8\nlayout: thd\npositions: explicit\n"
                                     "kv_cache: {layout: paged_nhd, page_size: 2}\n");
  std::vector<float> k(3 * 1 * 8), v(3 * 1 * 4);
  for (size_t i = 0; i < k.size(); ++i) k[i] = static_cast<float>((i * 37 % 101) / 50.0 - 1.0);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i);
  cli::write_file_atomically(path("q.npy"), cli::npy_bytes(std::vector<float>(3 * 2 * 8, 1.0f), {3, 2, 8}));
  cli::write_file_atomically(path("k.npy"), cli::npy_bytes(k, {3, 1, 8}));
  cli::write_file_atomically(path("v.npy"), cli::npy_bytes(v, {3, 1, 4}));
  cli::write_file_atomically(path("kc.npy"), cli::npy_bytes(std::vector<float>(3 * 2 * 8, 9.0f), {3, 2, 1, 8}));
  cli::write_file_atomically(path("vc.npy"), cli::npy_bytes(std::vector<float>(3 * 2 * 4, 9.0f), {3, 2, 1, 4}));
  cli::write_file_atomically(path("p.npy"), cli::npy_bytes(std::vector<int64_t>{0, 1, 2}, {3}));
  cli::write_file_atomically(path("i.npy"), cli::npy_bytes(std::vector<int64_t>{2, 0}, {2}));  // pages 2, then 0
  cli::write_file_atomically(path("ip.npy"), cli::npy_bytes(std::vector<int64_t>{0, 2}, {2}));
  cli::write_file_atomically(path("b.npy"), cli::npy_bytes(std::vector<int64_t>{0, 0, 0}, {3}));
  const auto r = run_command(kTool + " apply " + spec + " --q " + path("q.npy") + " --k " + path("k.npy") + " --v " +
                             path("v.npy") + " --positions " + path("p.npy") + " --kv-indices " + path("i.npy") +
                             " --kv-indptr " + path("ip.npy") + " --batch-indices " + path("b.npy") + " --k-cache " +
                             path("kc.npy") + " --v-cache " + path("vc.npy") + " --out-q " + path("oq.npy") +
                             " --out-k " + path("ok.npy") + " --out-k-cache " + path("okc.npy") + " --out-v-cache " +
                             path("ovc.npy"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<float> out_k = floats(path("ok.npy")), kc = floats(path("okc.npy")), vc = floats(path("ovc.npy"));
  EXPECT_EQ(cli::read_npy(path("okc.npy")).shape, (std::vector<int64_t>{3, 2, 1, 8}));
  // Token t at position t: page kv_indices[t / 2], entry t % 2.
  const int page_of[3] = {2, 2, 0};
  std::vector<float> want_k(kc.size(), 9.0f), want_v(vc.size(), 9.0f);
  for (int t = 0; t < 3; ++t) {
    for (int d = 0; d < 8; ++d) want_k[(page_of[t] * 2 + t % 2) * 8 + d] = out_k[t * 8 + d];
    for (int d = 0; d < 4; ++d) want_v[(page_of[t] * 2 + t % 2) * 4 + d] = v[t * 4 + d];
  }
  EXPECT_EQ(kc, want_k);
  EXPECT_EQ(vc, want_v);
  EXPECT_NE(out_k, k);  // positions 1, 2 rotate
}

// --cache-positions: tokens rotated at positions 10..12 go to entries 0..2
// of their request's pages (out_k's rows), as FlashInfer's fused op places
// them by `positions` and rotates them by `pos_ids`.
TEST_F(Cli, ApplyPlacesTokensByCachePositions) {
  const std::string spec = spec_file("name: kv\nhead_dim: 8\nlayout: thd\npositions: explicit\n"
                                     "kv_cache: {layout: paged_nhd, page_size: 2}\n");
  std::vector<float> k(3 * 8);
  for (size_t i = 0; i < k.size(); ++i) k[i] = static_cast<float>((i * 37 % 101) / 50.0 - 1.0);
  cli::write_file_atomically(path("q.npy"), cli::npy_bytes(std::vector<float>(3 * 2 * 8, 1.0f), {3, 2, 8}));
  cli::write_file_atomically(path("k.npy"), cli::npy_bytes(k, {3, 1, 8}));
  cli::write_file_atomically(path("kc.npy"), cli::npy_bytes(std::vector<float>(3 * 2 * 8, 9.0f), {3, 2, 1, 8}));
  cli::write_file_atomically(path("p.npy"), cli::npy_bytes(std::vector<int64_t>{10, 11, 12}, {3}));
  cli::write_file_atomically(path("cp.npy"), cli::npy_bytes(std::vector<int64_t>{0, 1, 2}, {3}));
  cli::write_file_atomically(path("i.npy"), cli::npy_bytes(std::vector<int64_t>{2, 0}, {2}));
  cli::write_file_atomically(path("ip.npy"), cli::npy_bytes(std::vector<int64_t>{0, 2}, {2}));
  cli::write_file_atomically(path("b.npy"), cli::npy_bytes(std::vector<int64_t>{0, 0, 0}, {3}));
  const std::string args = " apply " + spec + " --q " + path("q.npy") + " --k " + path("k.npy") + " --positions " +
                           path("p.npy") + " --kv-indices " + path("i.npy") + " --kv-indptr " + path("ip.npy") +
                           " --batch-indices " + path("b.npy") + " --k-cache " + path("kc.npy") + " --out-q " +
                           path("oq.npy") + " --out-k " + path("ok.npy") + " --out-k-cache " + path("okc.npy");
  const auto r = run_command(kTool + args + " --cache-positions " + path("cp.npy"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<float> out_k = floats(path("ok.npy")), kc = floats(path("okc.npy"));
  const int page_of[3] = {2, 2, 0};
  std::vector<float> want(kc.size(), 9.0f);
  for (int t = 0; t < 3; ++t)
    for (int d = 0; d < 8; ++d) want[(page_of[t] * 2 + t % 2) * 8 + d] = out_k[t * 8 + d];
  EXPECT_EQ(kc, want);
  EXPECT_NE(out_k, k);
  // Without them, positions 10..12 are past the request's two pages.
  const auto placed_by_positions = run_command(kTool + args);
  EXPECT_EQ(placed_by_positions.exit_code, 2);
  EXPECT_THAT(placed_by_positions.err, HasSubstr("--positions: error: token 0 (request 0) is at position 10, in page 5"));
}

// fp8 caches: uint8 .npy in and out, the codes of x / scale (literal e4m3
// codes of v / 2), entries no token goes to untouched; a float32 cache and
// a scale for another cache are refused naming the flag.
TEST_F(Cli, ApplyAppendsToAnFp8Cache) {
  const std::string spec = spec_file("name: kv\nhead_dim: 8\nlayout: thd\npositions: explicit\n"
                                     "kv_cache: {layout: contiguous, dtype: fp8_e4m3}\n");
  std::vector<float> v(3 * 1 * 4);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i);
  cli::write_file_atomically(path("q.npy"), cli::npy_bytes(std::vector<float>(3 * 2 * 8, 1.0f), {3, 2, 8}));
  cli::write_file_atomically(path("k.npy"), cli::npy_bytes(std::vector<float>(3 * 8, 1000.0f), {3, 1, 8}));
  cli::write_file_atomically(path("v.npy"), cli::npy_bytes(v, {3, 1, 4}));
  cli::write_file_atomically(path("kc.npy"), cli::npy_bytes(std::vector<uint8_t>(4 * 8, 0x5a), {4, 1, 8}));
  cli::write_file_atomically(path("vc.npy"), cli::npy_bytes(std::vector<uint8_t>(4 * 4, 0x5a), {4, 1, 4}));
  cli::write_file_atomically(path("p.npy"), cli::npy_bytes(std::vector<int64_t>{0, 0, 0}, {3}));
  cli::write_file_atomically(path("s.npy"), cli::npy_bytes(std::vector<int64_t>{3, -1, 0}, {3}));
  const std::string args = " apply " + spec + " --q " + path("q.npy") + " --k " + path("k.npy") + " --v " +
                           path("v.npy") + " --positions " + path("p.npy") + " --slot-mapping " + path("s.npy") +
                           " --out-q " + path("oq.npy") + " --out-k-cache " + path("okc.npy") + " --out-v-cache " +
                           path("ovc.npy") + " --v-cache " + path("vc.npy");
  const auto r = run_command(kTool + args + " --k-cache " + path("kc.npy") + " --k-scale 0.5 --v-scale 2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const cli::NpyArray kc = cli::read_npy(path("okc.npy")), vc = cli::read_npy(path("ovc.npy"));
  EXPECT_EQ(kc.dtype, "|u1");
  EXPECT_EQ(kc.shape, (std::vector<int64_t>{4, 1, 8}));
  // Slot 3 <- token 0, slot 0 <- token 2; token 1 is padding. k / 0.5 =
  // 2000 saturates to 448 (0x7e) at position 0 (no rotation).
  const std::vector<uint8_t> k_want = {0x7e, 0x7e, 0x7e, 0x7e, 0x7e, 0x7e, 0x7e, 0x7e,  // slot 0
                                       0x5a, 0x5a, 0x5a, 0x5a, 0x5a, 0x5a, 0x5a, 0x5a,
                                       0x5a, 0x5a, 0x5a, 0x5a, 0x5a, 0x5a, 0x5a, 0x5a,
                                       0x7e, 0x7e, 0x7e, 0x7e, 0x7e, 0x7e, 0x7e, 0x7e};  // slot 3
  EXPECT_EQ(kc.data, k_want);
  // v / 2: token 2's 4, 4.5, 5, 5.5 in slot 0; token 0's 0, 0.5, 1, 1.5 in slot 3.
  const std::vector<uint8_t> v_want = {0x48, 0x49, 0x4a, 0x4b, 0x5a, 0x5a, 0x5a, 0x5a,
                                       0x5a, 0x5a, 0x5a, 0x5a, 0x00, 0x30, 0x38, 0x3c};
  EXPECT_EQ(vc.data, v_want);

  cli::write_file_atomically(path("fkc.npy"), cli::npy_bytes(std::vector<float>(4 * 8, 0.0f), {4, 1, 8}));
  const auto floats = run_command(kTool + args + " --k-cache " + path("fkc.npy"));
  EXPECT_EQ(floats.exit_code, 2);
  EXPECT_THAT(floats.err, HasSubstr("--k-cache (" + path("fkc.npy") + ") has dtype <f4; the spec's kv_cache dtype is "
                                    "fp8_e4m3: the cache holds its codes as uint8"));
  const auto bad_scale = run_command(kTool + args + " --k-cache " + path("kc.npy") + " --k-scale -1");
  EXPECT_EQ(bad_scale.exit_code, 2);
  EXPECT_THAT(bad_scale.err, HasSubstr("--k-scale: error: k_scale (-1) must be finite and > 0"));
  const std::string f32_spec = spec_file("name: kv\nhead_dim: 8\nlayout: thd\npositions: explicit\n"
                                         "kv_cache: {layout: contiguous}\n");
  const auto unwanted = run_command(kTool + " apply " + f32_spec + " --q " + path("q.npy") + " --k " + path("k.npy") +
                                    " --positions " + path("p.npy") + " --slot-mapping " + path("s.npy") + " --out-q " +
                                    path("oq.npy") + " --k-cache " + path("fkc.npy") + " --out-k-cache " +
                                    path("okc.npy") + " --k-scale 2");
  EXPECT_EQ(unwanted.exit_code, 2);
  EXPECT_THAT(unwanted.err, HasSubstr("--k-scale: error: k_scale is for fp8 KV caches"));
}

// output_dtype fp8: out_q and out_k are written as uint8 codes of x / scale.
TEST_F(Cli, Fp8OutputsAreUint8CodesOfXOverScale) {
  const std::string spec = spec_file("name: f\nhead_dim: 8\nrotary_dim: 4\nrotary_offset: 4\noutput_dtype: fp8_e4m3\n");
  cli::write_file_atomically(path("q.npy"),
                             cli::npy_bytes(std::vector<float>{1, 2, 3, 1000, 0, 0, 0, 0}, {1, 1, 1, 8}));
  const auto r =
      run_command(kTool + " apply " + spec + " --q " + path("q.npy") + " --out-q " + path("oq.npy") + " --q-scale 0.5");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const cli::NpyArray oq = cli::read_npy(path("oq.npy"));
  EXPECT_EQ(oq.dtype, "|u1");
  EXPECT_EQ(oq.shape, (std::vector<int64_t>{1, 1, 1, 8}));
  // 2, 4, 6, 2000 -> 448 (saturated): pass-through dims cast; the rotary dims at position 0 are zeros.
  EXPECT_EQ(oq.data, (std::vector<uint8_t>{0x40, 0x48, 0x4c, 0x7e, 0, 0, 0, 0}));
  const auto bad_scale =
      run_command(kTool + " apply " + spec + " --q " + path("q.npy") + " --out-q " + path("oq.npy") + " --q-scale 0");
  EXPECT_EQ(bad_scale.exit_code, 2);
  EXPECT_THAT(bad_scale.err, HasSubstr("--q-scale: error: q_scale (0) must be finite and > 0: out_q holds the "
                                       "fp8_e4m3 codes of x / q_scale"));
}

TEST_F(Cli, UsageErrorsExitTwo) {
  EXPECT_EQ(run_command(kTool).exit_code, 2);
  EXPECT_EQ(run_command(kTool + " frobnicate").exit_code, 2);
  EXPECT_EQ(run_command(kTool + " freqs").exit_code, 2);
  EXPECT_EQ(run_command(kTool + " freqs " + kExamples + "/llama2_7b.yaml --seq-len x").exit_code, 2);
  EXPECT_EQ(run_command(kTool + " check /nonexistent.yaml").exit_code, 2);
  const auto help = run_command(kTool + " --help");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_THAT(help.out, HasSubstr("from-hf"));
  EXPECT_THAT(run_command(kTool + " freqs --help").out, HasSubstr("--seq-len"));
}

}  // namespace
}  // namespace ropegen
