// rope-gen build, end to end as a C user sees it: build a library, check its
// files and manifest, compile tests/aot/rope_driver.c (ropegen_call structs
// filled in C, one <name>_run() call) against only those files with the
// system C compiler, run it, and compare what it wrote with the independent
// float64 reference. Invalid calls come back as ROPEGEN_ERROR_INVALID_ARGUMENT
// with prepare_call's message. Plus cross-compilation (AArch64 objects) and
// the errors that must exit 2 and leave nothing behind.
#include <dlfcn.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "ropegen/spec_io.h"
#include "support/reference.h"
#include "support/run_command.h"
#include "support/test_paths.h"

namespace ropegen {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;
using test::run_command;

const std::string kTool = ropegen::test::rope_gen_binary();
const std::string kDriver = ropegen::test::source_path("/tests/aot/rope_driver.c");
const std::string kKvDriver = ropegen::test::source_path("/tests/aot/kv_driver.c");

// sbhd, interleaved, partial rotary (pass-through copy), f32, explicit
// positions (i32/i64 entries), dynamic NTK (reads seq_len).
const char* kSpecA =
    "name: aot_a\nhead_dim: 24\nrotary_dim: 16\nrotary_offset: 4\npairing: interleaved\nlayout: sbhd\n"
    "dtype: f32\npositions: explicit\nscaling: {type: dynamic, factor: 2, original_max_position: 8}\n";
// thd with cu_seqlens, implicit positions, bf16, half pairing, yarn.
const char* kSpecB =
    "name: aot_b\nhead_dim: 16\nlayout: thd\ndtype: bf16\nscaling: {type: yarn, factor: 4, original_max_position: 32}\n";

class AotBuild : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = test::make_temp_dir(); }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return dir_ + "/" + name; }
  std::string write_spec(const std::string& text) {
    test::write_text(path("spec.yaml"), text);
    return path("spec.yaml");
  }
  std::string dir_;
};

// ---- raw data as the C side sees it -------------------------------------

uint16_t to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  return static_cast<uint16_t>((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);
}
float from_bf16(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Elements of a tensor in the spec's dtype, as raw bytes.
struct Storage {
  DType dtype;
  std::vector<float> values;
  std::string bytes() const {
    std::string out;
    for (float v : values) {
      if (dtype == DType::BF16) {
        const uint16_t h = to_bf16(v);
        out.append(reinterpret_cast<const char*>(&h), 2);
      } else {
        out.append(reinterpret_cast<const char*>(&v), 4);
      }
    }
    return out;
  }
  static Storage from_bytes(DType dtype, const std::string& bytes) {
    Storage s{dtype, {}};
    const size_t size = dtype == DType::BF16 ? 2 : 4;
    for (size_t i = 0; i + size <= bytes.size(); i += size) {
      if (dtype == DType::BF16) {
        uint16_t h;
        std::memcpy(&h, bytes.data() + i, 2);
        s.values.push_back(from_bf16(h));
      } else {
        float f;
        std::memcpy(&f, bytes.data() + i, 4);
        s.values.push_back(f);
      }
    }
    return s;
  }
};

// A tensor in the layout's order, stored with the given strides (elements
// between rows may be padding, which the call must never touch).
struct StridedTensor {
  std::vector<int64_t> shape, strides;
  int64_t elements = 0;  // of the storage
  std::vector<double> dense;  // row-major logical values (reference input)

  int64_t storage_index(int64_t flat) const {
    int64_t index = 0;
    for (int i = static_cast<int>(shape.size()) - 1; i >= 0; --i) {
      index += (flat % shape[i]) * strides[i];
      flat /= shape[i];
    }
    return index;
  }
};

StridedTensor make_tensor(DType dtype, std::vector<int64_t> shape, std::vector<int64_t> strides, double phase) {
  StridedTensor t{shape, strides, 1, {}};
  int64_t n = 1, last = 0;
  for (size_t i = 0; i < shape.size(); ++i) n *= shape[i], last += (shape[i] - 1) * strides[i];
  t.elements = last + 1;
  for (int64_t i = 0; i < n; ++i) {
    const float v = static_cast<float>(1.5 * std::sin(0.731 * i + phase));
    t.dense.push_back(dtype == DType::BF16 ? from_bf16(to_bf16(v)) : v);  // exactly representable
  }
  return t;
}

constexpr float kSentinel = 1234.5f;

Storage storage_of(DType dtype, const StridedTensor& t, float fill) {
  Storage s{dtype, std::vector<float>(t.elements, fill)};
  for (size_t i = 0; i < t.dense.size(); ++i) s.values[t.storage_index(i)] = static_cast<float>(t.dense[i]);
  return s;
}

struct Scenario {
  StridedTensor q;
  std::optional<StridedTensor> k;
  bool in_place = false;
  std::vector<int64_t> positions_shape, positions;
  bool positions_int64 = false;
  std::vector<int64_t> cu_seqlens;
  bool cu_seqlens_int64 = false;
  int64_t offset = 0, seq_len = 0;  // 0: the library derives it
  bool backward = false;
  std::optional<ref::Tensor> cos_sin_cache;  // frequency scheme table: float32 [rows, rotary_dim]
  // qk_norm: the weights ([head_dim], exact in the dtype; empty: none) and
  // the backward's forward inputs (shaped as q, k).
  std::vector<double> q_norm_weight, k_norm_weight;
  bool float32_norm_weights = false;  // the weights passed as float32 (else in the dtype)
  std::optional<StridedTensor> saved_q, saved_k;
  int device_type = 1, device_id = 0;        // where the driver puts every tensor (tests/aot/device_memory.h)
  std::optional<std::pair<float, float>> fp8_scales;  // output_dtype fp8: (q_scale, k_scale); outputs uint8 codes
  int quant_group = 0;                                // output_quant: the driver passes out_scales
};

std::string join(const std::vector<int64_t>& v) { return fmt::format("{}", fmt::join(v, " ")); }

// Writes the driver's inputs; returns the driver's stdout.
std::string run_driver(const std::string& exe, const std::string& dir, DType dtype, const Scenario& s) {
  fs::create_directories(dir);
  std::string call = dtype == DType::F32 ? "2 32\n" : dtype == DType::BF16 ? "4 16\n" : "2 16\n";  // DLPack code, bits
  call += fmt::format("{} {} {} {}\n", s.q.shape.size(), join(s.q.shape), join(s.q.strides), s.q.elements);
  test::write_text(dir + "/q.bin", storage_of(dtype, s.q, kSentinel).bytes());
  // fp8 outputs: one byte an element, the sentinel code 0x5a.
  auto out_bytes = [&](int64_t elements) {
    return s.fp8_scales ? std::string(static_cast<size_t>(elements), '\x5a')
                        : Storage{dtype, std::vector<float>(elements, kSentinel)}.bytes();
  };
  if (s.fp8_scales)
    test::write_text(dir + "/fp8_outputs", fmt::format("{} {}\n", s.fp8_scales->first, s.fp8_scales->second));
  if (s.quant_group) test::write_text(dir + "/quant_group", fmt::format("{}\n", s.quant_group));
  test::write_text(dir + "/out_q.bin", out_bytes(s.q.elements));
  if (s.k) {
    call += fmt::format("1 {} {} {}\n", join(s.k->shape), join(s.k->strides), s.k->elements);
    test::write_text(dir + "/k.bin", storage_of(dtype, *s.k, kSentinel).bytes());
    test::write_text(dir + "/out_k.bin", out_bytes(s.k->elements));
  } else {
    call += "0\n";
  }
  call += fmt::format("{}\n", s.in_place ? 1 : 0);
  if (s.positions_shape.empty()) {
    call += "0\n";
  } else {
    call += fmt::format("{} {} {}\n", s.positions_shape.size(), join(s.positions_shape), s.positions_int64 ? 1 : 0);
    std::string bytes;
    for (int64_t p : s.positions) {
      const int32_t p32 = static_cast<int32_t>(p);
      if (s.positions_int64) bytes.append(reinterpret_cast<const char*>(&p), 8);
      else bytes.append(reinterpret_cast<const char*>(&p32), 4);
    }
    test::write_text(dir + "/positions.bin", bytes);
  }
  if (s.cu_seqlens.empty()) call += "0\n";
  else call += fmt::format("{} {} {}\n", s.cu_seqlens.size() - 1, join(s.cu_seqlens), s.cu_seqlens_int64 ? 1 : 0);
  call += fmt::format("{} {} {}\n", s.offset, s.seq_len, s.backward ? 1 : 0);
  if (s.cos_sin_cache) {
    call += fmt::format("{} {}\n", s.cos_sin_cache->shape[0], s.cos_sin_cache->shape[1]);
    test::write_text(dir + "/cos_sin_cache.bin",
                     Storage{DType::F32, std::vector<float>(s.cos_sin_cache->data.begin(), s.cos_sin_cache->data.end())}.bytes());
  } else {
    call += "0 0\n";
  }
  if (s.device_type != 1) call += fmt::format("{} {}\n", s.device_type, s.device_id);
  test::write_text(dir + "/call.txt", call);
  for (const auto& [name, w] : {std::pair{"q_norm_weight", &s.q_norm_weight}, {"k_norm_weight", &s.k_norm_weight}}) {
    if (w->empty()) continue;
    test::write_text(
        dir + "/" + name + ".bin",
        Storage{s.float32_norm_weights ? DType::F32 : dtype, std::vector<float>(w->begin(), w->end())}.bytes());
    const std::string gradient = std::string("d_") + name;  // its initial contents
    test::write_text(dir + "/" + gradient + ".bin",
                     Storage{DType::F32, std::vector<float>(w->size(), kSentinel)}.bytes());
  }
  if (s.float32_norm_weights) test::write_text(dir + "/float32_norm_weights", "");
  if (s.saved_q) test::write_text(dir + "/saved_q.bin", storage_of(dtype, *s.saved_q, kSentinel).bytes());
  if (s.saved_k) test::write_text(dir + "/saved_k.bin", storage_of(dtype, *s.saved_k, kSentinel).bytes());
  const auto r = run_command(exe + " " + dir);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return r.out;
}

double tolerance(DType t, double ref) {
  return 3e-6 + (t == DType::F32 ? 1e-6 : std::ldexp(1.0, -8)) * std::abs(ref);
}

// The output buffer against the reference; padding must still hold the
// sentinel (or, in place, the input's padding, which is the sentinel too).
// backward: `in` is the upstream gradient and the result dL/d(input).
void check_output(const RopeSpec& spec, const std::string& result_file, const StridedTensor& in, bool is_key,
                  const Scenario& s, const char* what, bool backward = false) {
  ref::Call call;
  call.offset = s.offset;
  call.cu_seqlens = s.cu_seqlens;
  if (!s.positions.empty())
    call.positions = ref::Tensor{s.positions_shape, std::vector<double>(s.positions.begin(), s.positions.end())};
  if (s.seq_len > 0) call.seq_len = s.seq_len;
  call.cos_sin_cache = s.cos_sin_cache;
  call.q_norm_weight = s.q_norm_weight, call.k_norm_weight = s.k_norm_weight;
  const ref::Tensor x{in.shape, in.dense};
  const std::optional<StridedTensor>& saved = is_key ? s.saved_k : s.saved_q;
  const std::optional<ref::Tensor> forward_input =
      saved ? std::optional<ref::Tensor>(ref::Tensor{saved->shape, saved->dense}) : std::nullopt;
  const ref::Tensor want =
      spec.encoding == Encoding::Alibi  ? ref::reference_alibi(spec, x, s.offset)
      : spec.encoding != Encoding::Rope ? ref::reference_add_positions(spec, x, call)
      : backward ? ref::reference_backward(spec, x, forward_input ? &*forward_input : nullptr, is_key, call).dx
                 : ref::reference_apply(spec, x, is_key, call);
  const Storage got = Storage::from_bytes(spec.dtype, test::read_text(result_file));
  ASSERT_EQ(static_cast<int64_t>(got.values.size()), in.elements) << what;
  std::vector<bool> touched(in.elements, false);
  int bad = 0;
  for (size_t i = 0; i < want.data.size() && bad < 5; ++i) {
    const int64_t at = in.storage_index(i);
    touched[at] = true;
    if (!(std::abs(got.values[at] - want.data[i]) <= tolerance(spec.dtype, want.data[i])))
      ADD_FAILURE() << what << "[" << i << "] = " << got.values[at] << ", reference " << want.data[i], ++bad;
  }
  for (int64_t i = 0; i < in.elements && bad < 5; ++i)
    if (!touched[i] && got.values[i] != kSentinel) ADD_FAILURE() << what << ": padding element " << i << " was written", ++bad;
}

// One x86 target with its baseline: the libraries whose point is a call, not
// the choice among the host's CPU targets (HostLibraryFilesManifestAndNumbers
// builds all of them), compile their kernels twice instead of five times.
const std::string kX86Pair = "x86-64-linux-avx2-fma-f16c-sse41,x86-64-linux";

std::string build_library(const std::string& spec, const std::string& targets, const std::string& out) {
  const auto r = run_command(kTool + " build " + spec + " --targets " + targets + " -o " + out);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return r.out;
}

// The driver, compiled and linked as a C99 user would: only the library's
// directory, and the link line its header documents.
// vulkan_memory: the library has a Vulkan target, and the driver puts
// Vulkan tensors in its memory (tests/aot/device_memory.h).
std::string compile_driver(const std::string& lib, const std::string& name, const std::string& exe,
                           const std::string& driver = kDriver, bool vulkan_memory = false) {
  const auto r = run_command(fmt::format(
      "cc -std=c99 -Wall -Wextra -pedantic -Werror -DROPE_HEADER='\"{0}.h\"' -DRUN_FN={0}_run -DROPE_NAME={0} {4} "
      "-I {1} {2} {1}/lib{0}.a -lstdc++ -lpthread -ldl -lm -o {3}",
      name, lib, driver, exe, vulkan_memory ? "-DROPE_VULKAN_MEMORY" : ""));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return exe;
}

RopeSpec parse(const char* text) {
  Result<RopeSpec> spec = parse_spec(text, "spec");
  EXPECT_TRUE(spec.ok()) << format(spec.errors());
  return *spec;
}

TEST_F(AotBuild, HostLibraryFilesManifestAndNumbers) {
  const RopeSpec spec = parse(kSpecA);
  const std::string lib = path("lib");
  const auto summary = nlohmann::json::parse(build_library(write_spec(kSpecA), "host", lib));
  EXPECT_EQ(summary["name"], "aot_a");

  // Files and manifest.
  for (const char* f : {"libaot_a.a", "aot_a.h", "ropegen_c.h", "ropegen_aot.h", "HalideRuntime.h", "manifest.json", "aot_a_q_i32.h",
                        "aot_a_qk_i64.h", "aot_a_pass_through.h"})
    EXPECT_TRUE(fs::exists(lib + "/" + f)) << f;
  for (const auto& e : fs::directory_iterator(lib))
    EXPECT_NE(e.path().filename().string().substr(0, 1), ".") << "staging left behind: " << e.path();
  const auto manifest = nlohmann::json::parse(test::read_text(lib + "/manifest.json"));
  EXPECT_EQ(manifest["spec_hash"], spec_hash(spec));
  EXPECT_EQ(manifest["spec"], to_yaml(spec));
  EXPECT_EQ(manifest["halide_version"], "21.0.0");
  EXPECT_EQ(manifest["targets"].back()["role"], "baseline");
  std::vector<std::string> entries;
  for (const auto& e : manifest["entry_points"]) entries.push_back(e["name"]);
  EXPECT_THAT(entries, ::testing::ElementsAre("aot_a_q_i32", "aot_a_q_i64", "aot_a_qk_i32", "aot_a_qk_i64",
                                              "aot_a_q_backward_i32", "aot_a_q_backward_i64", "aot_a_qk_backward_i32",
                                              "aot_a_qk_backward_i64", "aot_a_pass_through"));
  std::vector<std::string> args;
  for (const auto& a : manifest["entry_points"][3]["arguments"]) args.push_back(a["name"]);
  EXPECT_THAT(args, ::testing::ElementsAre("q", "k", "positions", "seq_len", "pool_threads", "out_q", "out_k"));
  EXPECT_EQ(manifest["entry_points"][3]["arguments"][4]["type"], "int64");
  const auto& out_q = manifest["entry_points"][3]["arguments"][5];
  EXPECT_EQ(manifest["entry_points"][3]["arguments"][2]["type"], "int64");
  EXPECT_EQ(out_q["kind"], "output_buffer");
  EXPECT_EQ(out_q["dims"], nlohmann::json::array({"m", "r", "h", "s", "b"}));  // interleaved rotary view
  EXPECT_EQ(out_q["shape"], nlohmann::json::parse(R"([2, 8, "H", "S", "B"])"));
  EXPECT_EQ(manifest["c_entry"]["function"], "aot_a_run");
  EXPECT_EQ(manifest["c_entry"]["in_library"], true);
  EXPECT_EQ(manifest["link"], "-lstdc++ -lpthread -ldl -lm");
  for (const char* h : {"ropegen_c.h", "ropegen_aot.h"})
    EXPECT_EQ(test::read_text(lib + "/" + h), test::read_text(ropegen::test::source_path("/include/ropegen/") + h));
  const std::string header = test::read_text(lib + "/aot_a.h");
  EXPECT_THAT(header, HasSubstr("static inline int aot_a_run(const ropegen_call *call, ropegen_message *message)"));
  EXPECT_THAT(header, HasSubstr("#define AOT_A_LAYOUT \"sbhd\""));
  EXPECT_THAT(header, HasSubstr("{aot_a_qk_i64_argv, aot_a_qk_i64_metadata, 1, 1, 0, 0, 0, ROPEGEN_DEVICE_CPU, 0},"));
  EXPECT_THAT(
      header,
      HasSubstr("{aot_a_pass_through_argv, aot_a_pass_through_metadata, 0, 0, 0, 1, 0, ROPEGEN_DEVICE_CPU, 0},"));
  EXPECT_THAT(header, Not(HasSubstr("HalideRuntime.h\"")));  // the generated header needs no Halide header
  EXPECT_THAT(header, HasSubstr("  NULL, NULL /* cuda, vulkan */\n"));  // CPU targets only
  EXPECT_THAT(header, HasSubstr("(no GPU: rebuild with --targets host,cuda,vulkan for device tensors)"));
  EXPECT_EQ(manifest["devices"], nlohmann::json::array({"cpu"}));

  // The header is C++ too.
  test::write_text(path("check.cpp"), "#include \"aot_a.h\"\nint main() { return AOT_A_HEAD_DIM == 24 ? 0 : 1; }\n");
  const auto cxx = run_command("c++ -std=c++17 -Wall -Wextra -Werror -fsyntax-only -I " + lib + " " + path("check.cpp"));
  EXPECT_EQ(cxx.exit_code, 0) << cxx.err;

  const std::string exe = compile_driver(lib, "aot_a", path("driver"));
  const DType f32 = DType::F32;
  // [S, B, H, D] = [5, 2, 3, 24]; q's heads padded to 32 elements (a view into a wider buffer).
  Scenario s;
  s.q = make_tensor(f32, {5, 2, 3, 24}, {2 * 3 * 32, 3 * 32, 32, 1}, 0.1);
  s.k = make_tensor(f32, {5, 2, 2, 24}, {2 * 2 * 24, 2 * 24, 24, 1}, 0.7);
  s.positions_shape = {5, 2};
  s.positions = {0, 3, 1, 9, 2, 17, 3, 20, 4, 5};
  {
    SCOPED_TRACE("q and k, out of place, int32 ids [S, B], padded q");
    EXPECT_EQ(run_driver(exe, path("call1"), f32, s), "rc=0\n");
    check_output(spec, path("call1/result_q.bin"), s.q, false, s, "q");
    check_output(spec, path("call1/result_k.bin"), *s.k, true, s, "k");
  }
  {
    SCOPED_TRACE("q and k, in place, int64 ids, explicit seq_len");
    Scenario t = s;
    t.in_place = true, t.positions_int64 = true, t.seq_len = 50;
    EXPECT_EQ(run_driver(exe, path("call2"), f32, t), "rc=0\n");
    check_output(spec, path("call2/result_q.bin"), t.q, false, t, "q");
    check_output(spec, path("call2/result_k.bin"), *t.k, true, t, "k");
  }
  {
    SCOPED_TRACE("q alone, int64 ids [S] shared by the batch");
    Scenario t = s;
    t.k.reset();
    t.positions_shape = {5}, t.positions = {7, 0, 30, 2, 4}, t.positions_int64 = true;
    EXPECT_EQ(run_driver(exe, path("call3"), f32, t), "rc=0\n");
    check_output(spec, path("call3/result_q.bin"), t.q, false, t, "q");
  }
  {
    SCOPED_TRACE("the backward call: dL/dq and dL/dk of upstream gradients, out of place");
    Scenario t = s;
    t.backward = true;
    EXPECT_EQ(run_driver(exe, path("call6"), f32, t), "rc=0\n");
    check_output(spec, path("call6/result_q.bin"), t.q, false, t, "dq", true);
    check_output(spec, path("call6/result_k.bin"), *t.k, true, t, "dk", true);
  }
  {
    SCOPED_TRACE("CUDA tensors, a CPU library: ROPEGEN_ERROR_UNSUPPORTED (2), nothing touched");
    Scenario t = s;
    t.device_type = 2;
    EXPECT_EQ(run_driver(exe, path("call8"), f32, t),
              "rc=2\nunsupported: aot_a: q is on cuda:0 but libaot_a.a has no cuda target; rebuild it with rope-gen "
              "build --targets host,cuda\n");
  }
  {
    SCOPED_TRACE("invalid calls: ROPEGEN_ERROR_INVALID_ARGUMENT (1), prepare_call's message, nothing written");
    Scenario t = s;
    t.positions_shape = {2, 5};  // [B, S]: sbhd wants [S, B]
    std::string out = run_driver(exe, path("call4"), f32, t);
    EXPECT_THAT(out, ::testing::StartsWith("rc=1\ninvalid argument: positions: "));
    t = s;
    t.k = make_tensor(f32, {4, 2, 2, 24}, {2 * 2 * 24, 2 * 24, 24, 1}, 0.7);  // fewer tokens than q
    out = run_driver(exe, path("call5"), f32, t);
    EXPECT_THAT(out, ::testing::StartsWith("rc=1\ninvalid argument: k: "));
    t = s;
    t.q = make_tensor(f32, {5, 2, 3, 20}, {2 * 3 * 20, 3 * 20, 20, 1}, 0.1);  // head_dim 20, the spec's is 24
    out = run_driver(exe, path("call7"), f32, t);
    EXPECT_THAT(out, ::testing::StartsWith("rc=1\ninvalid argument: q: "));
    EXPECT_THAT(out, HasSubstr("head_dim"));
    EXPECT_EQ(Storage::from_bytes(f32, test::read_text(path("call7/result_q.bin"))).values,
              std::vector<float>(t.q.elements, kSentinel));
  }
}

TEST_F(AotBuild, ThdCuSeqlensBf16Library) {
  const RopeSpec spec = parse(kSpecB);
  const std::string lib = path("lib");
  build_library(write_spec(kSpecB), kX86Pair, lib);
  const std::string exe = compile_driver(lib, "aot_b", path("driver"));
  Scenario s;
  s.q = make_tensor(DType::BF16, {7, 3, 16}, {48, 16, 1}, 0.2);
  s.k = make_tensor(DType::BF16, {7, 1, 16}, {16, 16, 1}, 0.9);
  s.cu_seqlens = {0, 3, 7};
  s.offset = 2;
  EXPECT_EQ(run_driver(exe, path("call1"), DType::BF16, s), "rc=0\n");
  check_output(spec, path("call1/result_q.bin"), s.q, false, s, "q");
  check_output(spec, path("call1/result_k.bin"), *s.k, true, s, "k");

  s.cu_seqlens = {0, 2, 2, 7}, s.cu_seqlens_int64 = true;  // an empty sequence, int64 starts, in place
  s.in_place = true;
  EXPECT_EQ(run_driver(exe, path("call3"), DType::BF16, s), "rc=0\n");
  check_output(spec, path("call3/result_q.bin"), s.q, false, s, "q");
  check_output(spec, path("call3/result_k.bin"), *s.k, true, s, "k");

  s.cu_seqlens = {0, 4, 3, 7};  // decreasing
  EXPECT_THAT(run_driver(exe, path("call2"), DType::BF16, s), ::testing::StartsWith("rc=1\ninvalid argument: cu_seqlens: "));
}

// Frequency scheme table: the C call passes the cache; forward and backward
// (the same cache, rotation by -angle), bf16, partial interleaved, int64 ids.
TEST_F(AotBuild, TableLibraryReadsTheCallsCosSinCache) {
  const char* text = "name: aot_t\nhead_dim: 20\nrotary_dim: 12\nrotary_offset: 4\npairing: interleaved\ndtype: bf16\n"
                     "positions: explicit\nfrequency: {scheme: table}\n";
  const RopeSpec spec = parse(text);
  const std::string lib = path("lib");
  build_library(write_spec(text), kX86Pair, lib);
  const auto manifest = nlohmann::json::parse(test::read_text(lib + "/manifest.json"));
  bool described = false;
  for (const auto& a : manifest["entry_points"][0]["arguments"])
    if (a["name"] == "cos_sin_cache") described = a["shape"] == nlohmann::json::parse(R"([12, "max_pos"])");
  EXPECT_TRUE(described) << manifest["entry_points"][0].dump();
  EXPECT_THAT(test::read_text(lib + "/aot_t.h"), HasSubstr("cos_sin_cache  [max_pos, 12] float32: "));
  EXPECT_THAT(test::read_text(lib + "/aot_t.h"), HasSubstr("1 /* table_frequencies */"));
  const std::string exe = compile_driver(lib, "aot_t", path("driver"));

  // The cache engines keep for a yarn spec (attention factor 1.14), from the reference.
  ref::Call rows;
  rows.positions = ref::Tensor{{40}, {}};
  for (int p = 0; p < 40; ++p) rows.positions->data.push_back(p);
  Scenario s;
  s.cos_sin_cache = ref::reference_table(
      parse("name: y\nhead_dim: 20\nrotary_dim: 12\nscaling: {type: yarn, factor: 4, original_max_position: 16}\n"), rows);
  for (double& v : s.cos_sin_cache->data) v = static_cast<float>(v);  // what the library reads
  s.q = make_tensor(DType::BF16, {2, 3, 2, 20}, {6 * 20, 2 * 20, 20, 1}, 0.4);
  s.k = make_tensor(DType::BF16, {2, 3, 1, 20}, {3 * 20, 20, 20, 1}, 1.1);
  s.positions_shape = {2, 3}, s.positions = {0, 39, 7, 12, 3, 30}, s.positions_int64 = true;
  for (bool backward : {false, true}) {
    s.backward = backward;
    const std::string dir = path(backward ? "backward" : "forward");
    EXPECT_EQ(run_driver(exe, dir, DType::BF16, s), "rc=0\n");
    check_output(spec, dir + "/result_q.bin", s.q, false, s, "q", backward);
    check_output(spec, dir + "/result_k.bin", *s.k, true, s, "k", backward);
  }
  s.positions[1] = 40;
  EXPECT_EQ(run_driver(exe, path("past"), DType::BF16, s),
            "rc=1\ninvalid argument: cos_sin_cache: position id 40 is outside cos_sin_cache: it has 40 rows (positions "
            "0..39); pass a longer cache or smaller positions\n\n");
  s.cos_sin_cache.reset();
  EXPECT_THAT(run_driver(exe, path("none"), DType::BF16, s),
              ::testing::StartsWith("rc=1\ninvalid argument: cos_sin_cache: the spec has `frequency: {scheme: table}`"));
}

// qk_norm through the C call: the weights; the backward's saved inputs, and
// the weights' gradients it writes (float32 [head_dim], summed over every
// row), bf16, partial rotary with an offset, GQA, explicit ids.
TEST_F(AotBuild, QkNormLibraryForwardBackwardAndTheWeightsGradients) {
  const char* text =
      "name: aot_n\nhead_dim: 16\nrotary_dim: 8\nrotary_offset: 4\nlayout: bshd\ndtype: bf16\n"
      "positions: explicit\nqk_norm: {type: rms_one_plus, eps: 1.0e-6, weight: per_head}\n";
  const RopeSpec spec = parse(text);
  const std::string lib = path("lib");
  build_library(write_spec(text), kX86Pair, lib);
  EXPECT_THAT(test::read_text(lib + "/aot_n.h"), HasSubstr("d_q_norm_weight"));
  const std::string exe = compile_driver(lib, "aot_n", path("driver"));
  Scenario s;
  s.q = make_tensor(DType::BF16, {2, 3, 4, 16}, {3 * 4 * 16, 4 * 16, 16, 1}, 0.2);
  s.k = make_tensor(DType::BF16, {2, 3, 2, 16}, {3 * 2 * 16, 2 * 16, 16, 1}, 0.9);
  s.positions_shape = {2, 3}, s.positions = {0, 5, 9, 3, 70, 12};
  for (int i = 0; i < 16; ++i) {
    s.q_norm_weight.push_back(from_bf16(to_bf16(0.05f * i - 0.3f)));
    s.k_norm_weight.push_back(from_bf16(to_bf16(0.2f - 0.03f * i)));
  }
  EXPECT_EQ(run_driver(exe, path("forward"), DType::BF16, s), "rc=0\n");
  check_output(spec, path("forward/result_q.bin"), s.q, false, s, "q");
  check_output(spec, path("forward/result_k.bin"), *s.k, true, s, "k");
  // Float32 weights (mixed precision), not representable in bf16: the library's _wf32 entries.
  Scenario f32 = s;
  f32.float32_norm_weights = true;
  for (double& w : f32.q_norm_weight) w = static_cast<float>(w + 1.0 / 1024);
  EXPECT_EQ(run_driver(exe, path("forward_f32"), DType::BF16, f32), "rc=0\n");
  check_output(spec, path("forward_f32/result_q.bin"), f32.q, false, f32, "q (float32 weights)");

  s.backward = true;
  s.saved_q = make_tensor(DType::BF16, {2, 3, 4, 16}, {3 * 4 * 16, 4 * 16, 16, 1}, 1.7);
  s.saved_k = make_tensor(DType::BF16, {2, 3, 2, 16}, {3 * 2 * 16, 2 * 16, 16, 1}, 2.3);
  EXPECT_EQ(run_driver(exe, path("backward"), DType::BF16, s), "rc=0\n");
  check_output(spec, path("backward/result_q.bin"), s.q, false, s, "dq", true);
  check_output(spec, path("backward/result_k.bin"), *s.k, true, s, "dk", true);
  ref::Call call;
  call.positions = ref::Tensor{s.positions_shape, std::vector<double>(s.positions.begin(), s.positions.end())};
  call.q_norm_weight = s.q_norm_weight, call.k_norm_weight = s.k_norm_weight;
  for (bool is_key : {false, true}) {
    const StridedTensor& g = is_key ? *s.k : s.q;
    const StridedTensor& x = is_key ? *s.saved_k : *s.saved_q;
    const ref::Tensor forward_input{x.shape, x.dense};
    const std::vector<double> want =
        ref::reference_backward(spec, ref::Tensor{g.shape, g.dense}, &forward_input, is_key, call).d_norm_weight;
    const Storage got = Storage::from_bytes(
        DType::F32,
        test::read_text(path(is_key ? "backward/result_d_k_norm_weight.bin" : "backward/result_d_q_norm_weight.bin")));
    ASSERT_EQ(got.values.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i)
      EXPECT_NEAR(got.values[i], want[i], 1e-5 * std::max(1.0, std::abs(want[i]))) << (is_key ? "dk_w" : "dq_w") << i;
  }
  // Without the gradients' buffers: refused, naming them.
  s.q_norm_weight.clear(), s.k_norm_weight.clear();
  EXPECT_THAT(
      run_driver(exe, path("no_weights"), DType::BF16, s),
      ::testing::StartsWith("rc=1\ninvalid argument: q_norm_weight: the spec has `qk_norm: {weight: per_head}`"));
}

// fp8_e4m3 codes got[first .. first + count) against the reference values
// want[...] / scale: the codes every value within float32 rounding of the
// reference can have (rounding is monotone).
void expect_codes(const std::vector<double>& want, const std::string& got, size_t first, size_t count, float scale,
                  const char* what) {
  for (size_t i = first; i < first + count; ++i) {
    const double eps = 3e-6 + 1e-6 * std::abs(want[i]);
    auto code_value = [&](double x) {
      return ref::fp8_value(KvDType::Fp8E4m3, ref::fp8_code(KvDType::Fp8E4m3, static_cast<float>(x), scale));
    };
    const double value = ref::fp8_value(KvDType::Fp8E4m3, static_cast<uint8_t>(got[i]));
    EXPECT_TRUE(value >= code_value(want[i] - eps) && value <= code_value(want[i] + eps))
        << what << "[" << i << "] = " << value << ", reference " << want[i] << " / " << scale;
  }
}

// output_dtype fp8 through the C call: uint8 codes of x / q_scale and
// x / k_scale, pass-through dims cast, the scales' fields of ropegen_call.
TEST_F(AotBuild, Fp8OutputLibraryWritesCodesFromC) {
  const char* text =
      "name: aot_f8\nhead_dim: 16\nrotary_dim: 8\nrotary_offset: 4\nlayout: bshd\ndtype: bf16\n"
      "positions: explicit\noutput_dtype: fp8_e4m3\n";
  const RopeSpec spec = parse(text);
  const std::string lib = path("lib");
  build_library(write_spec(text), kX86Pair, lib);
  const std::string header = test::read_text(lib + "/aot_f8.h");
  EXPECT_THAT(header, HasSubstr("uint8 (fp8_e4m3 codes)"));
  EXPECT_THAT(header, HasSubstr("aot_f8_q_backward"));  // the inverse rotation
  const std::string exe = compile_driver(lib, "aot_f8", path("driver"));
  Scenario s;
  s.q = make_tensor(DType::BF16, {2, 3, 4, 16}, {3 * 4 * 16, 4 * 16, 16, 1}, 0.2);
  s.k = make_tensor(DType::BF16, {2, 3, 2, 16}, {3 * 2 * 16, 2 * 16, 16, 1}, 0.9);
  s.positions_shape = {2, 3}, s.positions = {0, 5, 9, 3, 70, 12};
  s.fp8_scales = {{0.01f, 3.0f}};  // q saturates (|x| / 0.01 > 448); 3 is no power of two
  EXPECT_EQ(run_driver(exe, path("forward"), DType::BF16, s), "rc=0\n");
  ref::Call call;
  call.positions = ref::Tensor{s.positions_shape, std::vector<double>(s.positions.begin(), s.positions.end())};
  for (bool is_key : {false, true}) {
    const StridedTensor& x = is_key ? *s.k : s.q;
    const float scale = is_key ? s.fp8_scales->second : s.fp8_scales->first;
    const std::vector<double> want = ref::reference_apply(spec, ref::Tensor{x.shape, x.dense}, is_key, call).data;
    const std::string got = test::read_text(path(is_key ? "forward/result_k.bin" : "forward/result_q.bin"));
    ASSERT_EQ(got.size(), want.size());
    expect_codes(want, got, 0, want.size(), scale, is_key ? "k" : "q");
  }
  // output_quant (q alone), the inverse rotation: codes of x / each group's power-of-two scale.
  const char* quant_text =
      "name: aot_f8q\nhead_dim: 16\nrotary_dim: 8\nrotary_offset: 8\npairing: interleaved\nlayout: bshd\n"
      "dtype: bf16\npositions: explicit\noutput_dtype: fp8_e4m3\noutput_quant: {group: 8}\n";
  const RopeSpec quant = parse(quant_text);
  build_library(write_spec(quant_text), kX86Pair, path("qlib"));
  const std::string quant_exe = compile_driver(path("qlib"), "aot_f8q", path("qdriver"));
  Scenario g = s;
  g.k.reset(), g.fp8_scales = {{0.0f, 0.0f}}, g.quant_group = 8, g.backward = true;
  EXPECT_EQ(run_driver(quant_exe, path("quant"), DType::BF16, g), "rc=0\n");
  const std::vector<double> rows =
      ref::reference_backward(quant, ref::Tensor{g.q.shape, g.q.dense}, nullptr, false, call).dx.data;
  const Storage scales = Storage::from_bytes(DType::F32, test::read_text(path("quant/result_scales.bin")));
  const std::string codes = test::read_text(path("quant/result_q.bin"));
  ASSERT_EQ(scales.values.size() * 8, rows.size());
  for (size_t grp = 0; grp < scales.values.size(); ++grp) {
    double absmax = 1e-10;
    for (size_t i = grp * 8; i < grp * 8 + 8; ++i) absmax = std::max(absmax, std::abs(rows[i]));
    const float scale = scales.values[grp];
    EXPECT_EQ(scale, std::exp2(std::ceil(std::log2(static_cast<float>(absmax) * (1.0f / 448.0f))))) << "group " << grp;
    expect_codes(rows, codes, grp * 8, 8, scale, "q");
  }
  // In place (no out_q): refused, naming it.
  s.in_place = true;
  EXPECT_THAT(run_driver(exe, path("in_place"), DType::BF16, s),
              ::testing::StartsWith("rc=1\ninvalid argument: out_q: the spec's output_dtype is fp8_e4m3: pass out_q"));
}

// The e_machine of every ELF member of an ar archive.
std::vector<int> archive_machines(const std::string& file) {
  const std::string a = test::read_text(file);
  std::vector<int> machines;
  if (a.compare(0, 8, "!<arch>\n") != 0) return machines;
  for (size_t at = 8; at + 60 <= a.size();) {
    const std::string name = a.substr(at, 16);
    const size_t size = std::stoull(a.substr(at + 48, 10));
    const size_t data = at + 60;
    if (name.rfind("/ ", 0) != 0 && name.rfind("// ", 0) != 0 && a.compare(data, 4, "\x7f" "ELF") == 0)
      machines.push_back(static_cast<unsigned char>(a[data + 18]) | static_cast<unsigned char>(a[data + 19]) << 8);
    at = data + size + (size & 1);
  }
  return machines;
}

TEST_F(AotBuild, OtherEncodingsGoThroughTheSameCall) {
  const std::string lib = path("alibi");
  build_library(write_spec("name: aot_alibi\nencoding: alibi\nnum_heads: 12\nform: causal\n"), kX86Pair, lib);
  const auto manifest = nlohmann::json::parse(test::read_text(lib + "/manifest.json"));
  ASSERT_EQ(manifest["entry_points"].size(), 1u);
  EXPECT_EQ(manifest["entry_points"][0]["name"], "aot_alibi_apply");
  EXPECT_EQ(manifest["c_entry"]["function"], "aot_alibi_run");
  EXPECT_EQ(manifest["entry_points"][0]["arguments"][0]["shape"], nlohmann::json::parse(R"(["Sk", 12, "Sq", "B"])"));
  const std::string header = test::read_text(lib + "/aot_alibi.h");
  EXPECT_THAT(header, HasSubstr("#define AOT_ALIBI_NUM_HEADS 12"));
  EXPECT_THAT(header, HasSubstr("[B, 12, Sq, Sk]"));
  test::write_text(path("check.c"), "#include \"aot_alibi.h\"\nint main(void) { int (*f)(const ropegen_call *, ropegen_message *) = aot_alibi_run; return !f; }\n");
  const auto cc = run_command("cc -std=c99 -Wall -Wextra -pedantic -Werror -fsyntax-only -I " + lib + " " + path("check.c"));
  EXPECT_EQ(cc.exit_code, 0) << cc.err;

  // Sinusoidal x + PE through <name>_run(), against the reference.
  const char* sinusoidal = "name: aot_sin\nencoding: sinusoidal\ndim: 12\nlayout: sbd\ndtype: f32\n";
  const RopeSpec spec = parse(sinusoidal);
  const std::string sin_lib = path("sin");
  build_library(write_spec(sinusoidal), kX86Pair, sin_lib);
  const std::string exe = compile_driver(sin_lib, "aot_sin", path("driver"));
  Scenario s;
  s.q = make_tensor(DType::F32, {6, 2, 12}, {2 * 16, 16, 1}, 0.3);  // rows padded to 16
  s.offset = 5;
  EXPECT_EQ(run_driver(exe, path("call1"), DType::F32, s), "rc=0\n");
  check_output(spec, path("call1/result_q.bin"), s.q, false, s, "x");
  s.q = make_tensor(DType::F32, {6, 2, 10}, {2 * 10, 10, 1}, 0.3);  // dim 10, the spec's is 12
  EXPECT_THAT(run_driver(exe, path("call2"), DType::F32, s), ::testing::StartsWith("rc=1\ninvalid argument: "));
}

TEST_F(AotBuild, CrossCompilesAnAArch64Library) {
  const std::string lib = path("arm");
  const auto summary = nlohmann::json::parse(build_library(write_spec(kSpecB), "arm-64-linux", lib));
  EXPECT_EQ(summary["targets"], nlohmann::json::array({"arm-64-linux"}));
  const std::vector<int> machines = archive_machines(lib + "/libaot_b.a");
  EXPECT_EQ(machines.size(), 5u);  // q, qk, their backward, runtime; not rope-gen's own x86-64 call library
  for (int m : machines) EXPECT_EQ(m, 183) << "EM_AARCH64";
  const auto manifest = nlohmann::json::parse(test::read_text(lib + "/manifest.json"));
  EXPECT_EQ(manifest["architecture"], "arm-64");
  EXPECT_EQ(manifest["c_entry"]["in_library"], false);
}

// ---- GPU targets: one archive, every device ------------------------------

// The members of an ar archive (GNU long names resolved), name -> bytes.
std::vector<std::pair<std::string, std::string>> archive_members(const std::string& file) {
  const std::string a = test::read_text(file);
  std::vector<std::pair<std::string, std::string>> members;
  std::string long_names;
  if (a.compare(0, 8, "!<arch>\n") != 0) return members;
  for (size_t at = 8; at + 60 <= a.size();) {
    std::string name = a.substr(at, 16);
    const size_t size = std::stoull(a.substr(at + 48, 10));
    const std::string data = a.substr(at + 60, size);
    at += 60 + size + (size & 1);
    if (name.rfind("// ", 0) == 0) {
      long_names = data;
      continue;
    }
    if (name.rfind("/ ", 0) == 0 || name.rfind("/SYM64/", 0) == 0) continue;
    if (name[0] == '/') {
      const size_t from = std::stoull(name.substr(1));
      name = long_names.substr(from, long_names.find("/\n", from) - from);
    } else {
      name = name.substr(0, name.find('/'));
    }
    members.emplace_back(name, data);
  }
  return members;
}

// Every PTX module Halide embedded (its text from LLVM's banner to the NUL).
std::vector<std::string> embedded_ptx(const std::string& object) {
  std::vector<std::string> out;
  const std::string banner = "//\n// Generated by LLVM NVPTX Back-End";
  for (size_t at = object.find(banner); at != std::string::npos; at = object.find(banner, at + 1))
    out.push_back(object.substr(at, object.find('\0', at) - at));
  return out;
}

const std::string kPtxas = ROPEGEN_PTXAS;

// A C driver's call run three times on cuda:1 with a stream of the
// caller's, against a stub CUDA driver (tests/aot/stub_libcuda.c, found as
// libcuda.so.1 through LD_LIBRARY_PATH; it runs no kernel): the driver API
// calls each call made.
std::vector<std::vector<std::string>> stub_cuda_calls(const std::string& exe, const std::string& dir, DType dtype,
                                                      Scenario s) {
  fs::create_directories(dir);
  const auto r =
      run_command(fmt::format("cc -std=c99 -Wall -Wextra -Wno-unused-parameter -Werror -shared -fPIC "
                              "-Wl,-soname,libcuda.so.1 {}/tests/aot/stub_libcuda.c -o {}/libcuda.so.1",
                              ropegen::test::source_dir(), dir));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const std::string log = dir + "/calls.log";
  s.device_type = 2, s.device_id = 1;
  EXPECT_EQ(run_driver(fmt::format("env LD_LIBRARY_PATH={0} ROPEGEN_STUB_CUDA_LOG={1} ROPE_DRIVER_MARKS={1} "
                                   "ROPE_DRIVER_REPEAT=3 ROPE_DRIVER_STREAM=0x5eed {2}",
                                   dir, log, exe),
                       dir + "/call", dtype, s),
            "rc=0\n");
  // "call i" marks where each starts; before the first, the test driver's own
  // allocations, after "end" its copies back.
  std::vector<std::vector<std::string>> calls;
  std::istringstream lines(test::read_text(log));
  for (std::string line; std::getline(lines, line) && line != "end";) {
    if (line.rfind("call ", 0) == 0) calls.emplace_back();
    else if (!calls.empty()) calls.back().push_back(line);
  }
  return calls;
}

// What the library's CUDA hooks promise, seen in the driver calls.
// capturable: what manifest.json says of the call's entry (after the first
// call, kernels are launched and nothing else is done).
void check_stub_cuda_calls(const std::vector<std::vector<std::string>>& calls, bool capturable) {
  ASSERT_EQ(calls.size(), 3u);
  auto count = [](const std::vector<std::string>& call, const std::string& prefix) {
    return std::count_if(call.begin(), call.end(), [&](const std::string& l) { return l.rfind(prefix, 0) == 0; });
  };
  for (size_t i = 0; i < calls.size(); ++i) {
    SCOPED_TRACE(fmt::format("call {}: {}", i, fmt::join(calls[i], "; ")));
    // The device's primary context, retained once; never a context of Halide's own.
    EXPECT_EQ(count(calls[i], "cuDevicePrimaryCtxRetain device=1"), i == 0 ? 1 : 0);
    EXPECT_EQ(count(calls[i], "cuCtxCreate"), 0);
    EXPECT_EQ(count(calls[i], "cuCtxPushCurrent_v2"), count(calls[i], "cuCtxPushCurrent_v2 0xc0001"));
    // Each entry's PTX loaded once (per process and device): at the first call.
    if (i == 0) EXPECT_GE(count(calls[i], "cuModuleLoadData"), 1);
    else EXPECT_EQ(count(calls[i], "cuModuleLoadData"), 0);
    // Launched on cuda:1, on the call's stream.
    EXPECT_GE(count(calls[i], "cuLaunchKernel"), 1);
    EXPECT_EQ(count(calls[i], "cuLaunchKernel"), count(calls[i], "cuLaunchKernel device=1 stream=0x5eed"));
    if (i == 0) continue;
    // After the first call: no allocation, no synchronisation; copies (of a
    // host-computed table, on the call's stream) only where the manifest says so.
    EXPECT_EQ(count(calls[i], "cuMemAlloc"), 0);
    EXPECT_EQ(count(calls[i], "cuCtxSynchronize") + count(calls[i], "cuStreamSynchronize"), 0);
    EXPECT_EQ(count(calls[i], "cuMemcpy"),
              std::count_if(calls[i].begin(), calls[i].end(), [](const std::string& l) {
                return l.rfind("cuMemcpyHtoDAsync_v2", 0) == 0 && l.find(" stream=0x5eed") != std::string::npos;
              }));
    EXPECT_EQ(count(calls[i], "cuMemcpy") == 0, capturable);
    if (i == 1)
      std::cout << fmt::format("[ STUB     ] after the first call: {} cuLaunchKernel, {} host-to-device copies per call\n",
                               count(calls[i], "cuLaunchKernel"), count(calls[i], "cuMemcpyHtoD"));
  }
}

// One library for the host's CPUs, CUDA and Vulkan: what it holds, what its
// header and manifest say, host calls from C against the reference, and the
// archive in a shared object that exports only <name>_run (how a program
// holding many libraries loads them).
TEST_F(AotBuild, HostCudaVulkanLibrary) {
  const RopeSpec spec = parse(kSpecA);
  const std::string lib = path("lib");
  const auto summary = nlohmann::json::parse(build_library(write_spec(kSpecA), "host,cuda,vulkan", lib));
  const auto& targets = summary["targets"];
  ASSERT_GE(targets.size(), 3u);
  EXPECT_EQ(targets[targets.size() - 2], "x86-64-linux-cuda-cuda_capability_80-user_context");
  EXPECT_EQ(targets.back(), "x86-64-linux-user_context-vk_float16-vk_float64-vk_int16-vk_int64-vk_int8-vulkan");

  const auto manifest = nlohmann::json::parse(test::read_text(lib + "/manifest.json"));
  EXPECT_EQ(manifest["devices"], nlohmann::json::parse(R"(["cpu", "cuda", "vulkan"])"));
  const auto& m_targets = manifest["targets"];
  EXPECT_EQ(m_targets[m_targets.size() - 3]["role"], "baseline");
  EXPECT_EQ(m_targets[m_targets.size() - 3]["target"], "x86-64-linux");
  const auto& cuda = m_targets[m_targets.size() - 2];
  EXPECT_EQ(cuda["device"], "cuda");
  EXPECT_EQ(cuda["ptx"], "sm_80");
  EXPECT_THAT(cuda["driver"].get<std::string>(), HasSubstr("libcuda.so.1"));
  EXPECT_THAT(cuda["context"].get<std::string>(), HasSubstr("primary context"));
  EXPECT_EQ(m_targets.back()["device"], "vulkan");
  EXPECT_THAT(m_targets.back()["driver"].get<std::string>(), HasSubstr("libvulkan.so.1"));
  // One runtime for every target: the baseline CPU's features, both GPU APIs.
  const std::string runtime = manifest["runtime_target"];
  EXPECT_THAT(runtime, ::testing::StartsWith("x86-64-linux-"));
  for (const char* f : {"-cuda", "-cuda_capability_80", "-vulkan", "-vk_float64", "-vk_int64"})
    EXPECT_THAT(runtime, HasSubstr(f));
  EXPECT_THAT(runtime, Not(HasSubstr("avx2")));
  EXPECT_EQ(manifest["entry_points"][3]["functions"],
            nlohmann::json::parse(R"({"cpu": "aot_a_qk_i64", "cuda": "aot_a_qk_i64_cuda", "vulkan": "aot_a_qk_i64_vulkan"})"));

  const std::string header = test::read_text(lib + "/aot_a.h");
  EXPECT_THAT(header, HasSubstr("{aot_a_qk_i64_argv, aot_a_qk_i64_metadata, 1, 1, 0, 0, 0, ROPEGEN_DEVICE_CPU, 0},"));
  EXPECT_THAT(
      header,
      HasSubstr("{aot_a_qk_i64_cuda_argv, aot_a_qk_i64_cuda_metadata, 1, 1, 0, 0, 0, ROPEGEN_DEVICE_CUDA, 0},"));
  EXPECT_THAT(header, HasSubstr("{aot_a_pass_through_vulkan_argv, aot_a_pass_through_vulkan_metadata, 0, 0, 0, 1, 0, "
                                "ROPEGEN_DEVICE_VULKAN, 0},"));
  EXPECT_THAT(header, HasSubstr("  27, aot_a_entries_,\n  &ropegen_cuda_api, &ropegen_vulkan_api /* cuda, vulkan */\n"));
  // The device rules.
  for (const char* rule : {"primary context", "on call->stream", "NULL: the legacy default stream", "libcuda.so.1",
                           "The first call on each device also loads the kernels' PTX (sm_80:",
                           "GPUs of capability 8.0 and newer", "libvulkan.so.1", "halide/Halide#8943"})
    EXPECT_THAT(header, HasSubstr(rule));

  // What the archive holds: the CPU dispatch (every level), one function
  // per GPU target and entry, ONE Halide runtime, the call library and
  // both GPU APIs' runtime hooks.
  std::map<std::string, std::string> members;
  for (auto& [name, data] : archive_members(lib + "/libaot_a.a")) members[name] = data;
  for (const char* m : {"aot_a_qk_i64-x86_64_linux_avx2_f16c_fma_sse41.o", "aot_a_qk_i64-x86_64_linux.o",
                        "aot_a_qk_i64_wrapper.o", "aot_a_qk_i64_cuda.o", "aot_a_qk_i64_vulkan.o",
                        "aot_a_halide_runtime.o", "ropegen_call_library_run.cpp.o", "ropegen_cuda_hooks.cpp.o",
                        "ropegen_vulkan_hooks.cpp.o"})
    EXPECT_EQ(members.count(m), 1u) << m;
  int runtimes = 0;
  for (const auto& [name, data] : members) runtimes += name.find("runtime") != std::string::npos;
  EXPECT_EQ(runtimes, 1);
  // The runtime loads the drivers by name at run time; nothing links them.
  EXPECT_THAT(members["aot_a_halide_runtime.o"], HasSubstr("libvulkan.so.1"));
  EXPECT_THAT(members["ropegen_cuda_hooks.cpp.o"], HasSubstr("libcuda.so.1"));
  // Each GPU object carries its kernels: PTX for CUDA, SPIR-V (magic 0x07230203) for Vulkan.
  EXPECT_EQ(embedded_ptx(members["aot_a_qk_i64_cuda.o"]).size(), 1u);
  EXPECT_THAT(members["aot_a_qk_i64_vulkan.o"], HasSubstr(std::string("\x03\x02\x23\x07", 4)));

  // Host tensors from C99, the reference's numbers: the CPU kernels.
  const std::string exe = compile_driver(lib, "aot_a", path("driver"), kDriver, /*vulkan_memory=*/true);
  Scenario s;
  s.q = make_tensor(DType::F32, {5, 2, 3, 24}, {2 * 3 * 32, 3 * 32, 32, 1}, 0.1);
  s.k = make_tensor(DType::F32, {5, 2, 2, 24}, {2 * 2 * 24, 2 * 24, 24, 1}, 0.7);
  s.positions_shape = {5, 2};
  s.positions = {0, 3, 1, 9, 2, 17, 3, 20, 4, 5};
  EXPECT_EQ(run_driver(exe, path("host"), DType::F32, s), "rc=0\n");
  check_output(spec, path("host/result_q.bin"), s.q, false, s, "q");
  check_output(spec, path("host/result_k.bin"), *s.k, true, s, "k");

  // Vulkan tensors (lavapipe here): memory the library allocated, the
  // library's Vulkan kernels on it in place, no staging; the same bits as
  // the host kernels (strict_float: targets/README.md). Positions on the
  // device cannot be read, so this dynamic-NTK spec needs seq_len.
  s.device_type = 7;
  EXPECT_EQ(run_driver(exe, path("vulkan_no_seq_len"), DType::F32, s),
            "rc=1\ninvalid argument: seq_len: aot_a's frequencies depend on the sequence length, which a call cannot "
            "derive from positions on vulkan:0: pass seq_len (as Hugging Face: the largest position + 1)\n");
  s.seq_len = 21;
  for (bool in_place : {false, true}) {
    SCOPED_TRACE(in_place ? "vulkan, in place" : "vulkan, out of place");
    s.in_place = in_place;
    const std::string dir = path(in_place ? "vulkan_in_place" : "vulkan");
    EXPECT_EQ(run_driver(exe, dir, DType::F32, s), "rc=0\n");
    check_output(spec, dir + "/result_q.bin", s.q, false, s, "q (vulkan)");
    check_output(spec, dir + "/result_k.bin", *s.k, true, s, "k (vulkan)");
    Scenario host = s;
    host.device_type = 1;
    EXPECT_EQ(run_driver(exe, dir + "_host", DType::F32, host), "rc=0\n");
    EXPECT_EQ(test::read_text(dir + "/result_q.bin"), test::read_text(dir + "_host/result_q.bin"));
    EXPECT_EQ(test::read_text(dir + "/result_k.bin"), test::read_text(dir + "_host/result_k.bin"));
  }
  // Each tensor a view 256 bytes into its allocation (data + 256): bound at
  // that offset, the same bits; 4 bytes in is refused, naming the alignment.
  {
    Scenario t = s;
    t.seq_len = 21, t.in_place = false;
    const std::string dir = path("vulkan_offset");
    EXPECT_EQ(run_driver("env ROPE_DRIVER_VULKAN_OFFSET=256 " + exe, dir, DType::F32, t), "rc=0\n");
    check_output(spec, dir + "/result_q.bin", t.q, false, t, "q (vulkan, 256 bytes in)");
    check_output(spec, dir + "/result_k.bin", *t.k, true, t, "k (vulkan, 256 bytes in)");
    EXPECT_EQ(test::read_text(dir + "/result_q.bin"), test::read_text(path("vulkan_host/result_q.bin")));
    EXPECT_EQ(test::read_text(dir + "/result_k.bin"), test::read_text(path("vulkan_host/result_k.bin")));
    EXPECT_THAT(run_driver("env ROPE_DRIVER_VULKAN_OFFSET=4 " + exe, path("vulkan_misaligned"), DType::F32, t),
                ::testing::MatchesRegex("rc=1\ninvalid argument: q starts 4 bytes into its Vulkan allocation, but this "
                                        "device binds kernel arguments at multiples of [0-9]+ bytes "
                                        "\\(minStorageBufferOffsetAlignment\\).*"));
  }
  // The library's Vulkan memory across allocations, copies at offsets and frees.
  {
    const auto r =
        run_command(fmt::format("cc -std=c99 -Wall -Wextra -pedantic -Werror -DROPE_HEADER='\"aot_a.h\"' "
                                "-DROPE_NAME=aot_a -I {0} {1}/tests/aot/vulkan_memory_check.c {0}/libaot_a.a "
                                "-lstdc++ -lpthread -ldl -lm -o {2} && {2}",
                                lib, ropegen::test::source_dir(), path("vulkan_memory_check")));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, "ok\n");
  }
  // CUDA with a stub driver: dynamic NTK's frequencies (a float64 pow of the
  // call's seq_len) are computed on the host and copied to the device at
  // every call, as the manifest and header say.
  EXPECT_EQ(manifest["entry_points"][3]["cuda_graph_capturable"], false);
  EXPECT_EQ(manifest["entry_points"][8]["cuda_graph_capturable"], true);  // the pass-through copy
  EXPECT_THAT(header, HasSubstr("those calls cannot be\n *           captured in a CUDA graph"));
  {
    Scenario t = s;
    t.seq_len = 21, t.in_place = false;
    check_stub_cuda_calls(stub_cuda_calls(exe, path("stub"), DType::F32, t), /*capturable=*/false);
  }
  // Vulkan tensors in memory the library did not allocate (here host
  // memory labelled vulkan): refused before any launch, naming the tensor.
  const std::string plain = compile_driver(lib, "aot_a", path("plain_driver"));
  EXPECT_THAT(run_driver(plain, path("vulkan_foreign"), DType::F32, s),
              ::testing::MatchesRegex("rc=1\ninvalid argument: q \\(0x[0-9a-f]+\\) is not Vulkan memory this library "
                                      "allocated \\(<name>_device_alloc\\): Halide 21 cannot run kernels on other "
                                      "Vulkan memory \\(halide/Halide#8943\\)\n"));
  s.in_place = false, s.seq_len = 0, s.device_type = 1;

  // The archive in a shared object exporting only aot_a_run (position
  // independent objects; nothing else visible: its Halide runtime stays
  // private), loaded with dlopen, the same call.
  test::write_text(path("so.c"), "#define AOT_A_EXPORT_RUN\n#include \"aot_a.h\"\n");
  test::write_text(path("so.map"), "{ global: aot_a_run; local: *; };\n");
  const std::string so = path("libaot_a_run.so");
  auto r = run_command(fmt::format("cc -std=c99 -Wall -Wextra -pedantic -Werror -shared -fPIC -I {0} {1} {0}/libaot_a.a "
                                   "-Wl,--version-script={2} -Wl,--no-undefined -lstdc++ -lpthread -ldl -lm -o {3}",
                                   lib, path("so.c"), path("so.map"), so));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run_command("nm -D --defined-only " + so);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::string> exported;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);)
    if (line.size() > 19) exported.push_back(line.substr(19));
  EXPECT_THAT(exported, ::testing::ElementsAre("aot_a_run"));
  r =
      run_command(fmt::format("cc -std=c99 -Wall -Wextra -pedantic -Werror -DROPE_HEADER='\"dlopen_run.h\"' "
                              "-DRUN_FN=dlopen_run -DSHARED_OBJECT='\"{0}\"' -DRUN_SYMBOL='\"aot_a_run\"' -I {1} "
                              "-I {2} {3} -ldl -o {4}",
                              so, lib, ropegen::test::source_path("/tests/aot"), kDriver, path("so_driver")));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(run_driver(path("so_driver"), path("so_call"), DType::F32, s), "rc=0\n");
  check_output(spec, path("so_call/result_q.bin"), s.q, false, s, "q (shared object)");
  check_output(spec, path("so_call/result_k.bin"), *s.k, true, s, "k (shared object)");
}

// Whether this process can load the CUDA driver.
bool has_cuda_driver() {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib) dlclose(lib);
  return lib != nullptr;
}

// A CUDA library (the smallest CPU part: baseline x86-64 alone) called on
// CUDA tensors from C: on a machine with a CUDA driver the kernels run (in
// the device's primary context, on the legacy default stream) and match the
// reference; without one the call is refused before any tensor is touched,
// naming the driver. Then the PTX it carries, one module per entry point,
// assembled by the CUDA toolkit's ptxas for sm_90 (H100/H200, which run it
// through the driver's JIT) and sm_80: what a driver would load, checked
// without a GPU.
TEST_F(AotBuild, CudaLibraryCallsAndPtx) {
  const RopeSpec spec = parse(kSpecB);
  const std::string lib = path("lib");
  build_library(write_spec(kSpecB), "x86-64-linux,cuda", lib);
  const std::string exe = compile_driver(lib, "aot_b", path("driver"));
  Scenario s;
  s.q = make_tensor(DType::BF16, {7, 3, 16}, {48, 16, 1}, 0.2);
  s.k = make_tensor(DType::BF16, {7, 1, 16}, {16, 16, 1}, 0.9);
  s.cu_seqlens = {0, 3, 7};  // device calls of thd specs with implicit positions pass int32 cu_seqlens
  s.offset = 2;
  s.device_type = 2;
  if (has_cuda_driver()) {
    std::cout << "[ CUDA     ] a CUDA driver is here: the library's kernels run on cuda:0\n";
    EXPECT_EQ(run_driver(exe, path("cuda"), DType::BF16, s), "rc=0\n");
    check_output(spec, path("cuda/result_q.bin"), s.q, false, s, "q (cuda)");
    check_output(spec, path("cuda/result_k.bin"), *s.k, true, s, "k (cuda)");
  } else {
    std::cout << "[ SKIPPED  ] no CUDA driver (libcuda.so.1) here: no CUDA kernel ran; checking the refusal\n";
    EXPECT_EQ(run_driver(exe, path("cuda"), DType::BF16, s),
              "rc=2\nunsupported: cuda:0: the CUDA driver library libcuda.so.1 cannot be loaded (no NVIDIA driver on "
              "this machine)\n");
  }
  // The same call with a stub driver: yarn's frequencies are computed on
  // the device, so after the first call only kernels are launched.
  const auto manifest = nlohmann::json::parse(test::read_text(lib + "/manifest.json"));
  EXPECT_EQ(manifest["entry_points"][1]["name"], "aot_b_qk");
  EXPECT_EQ(manifest["entry_points"][1]["cuda_graph_capturable"], true);
  EXPECT_THAT(test::read_text(lib + "/aot_b.h"), HasSubstr("Later calls launch kernels and nothing\n"));
  check_stub_cuda_calls(stub_cuda_calls(exe, path("stub"), DType::BF16, s), /*capturable=*/true);
  s.device_type = 7;
  EXPECT_EQ(run_driver(exe, path("vulkan"), DType::BF16, s),
            "rc=2\nunsupported: aot_b: q is on vulkan:0 but libaot_b.a has no vulkan target; rebuild it with rope-gen "
            "build --targets host,vulkan\n");

  std::vector<std::string> modules;
  for (const auto& [name, data] : archive_members(lib + "/libaot_b.a"))
    for (const std::string& ptx : embedded_ptx(data)) {
      EXPECT_THAT(name, ::testing::EndsWith("_cuda.o"));
      EXPECT_THAT(ptx, HasSubstr("\n.target sm_80\n")) << name;
      modules.push_back(ptx);
    }
  ASSERT_EQ(modules.size(), 4u);  // q, qk and their backward
  EXPECT_EQ(manifest["devices"], nlohmann::json::parse(R"(["cpu", "cuda"])"));
  EXPECT_THAT(test::read_text(lib + "/aot_b.h"), HasSubstr("&ropegen_cuda_api, NULL /* cuda, vulkan */"));
  if (!fs::exists(kPtxas)) GTEST_SKIP() << "ptxas not found (" << kPtxas << "): the PTX was extracted but not assembled";
  for (size_t i = 0; i < modules.size(); ++i)
    for (const char* arch : {"sm_90", "sm_80"}) {
      const std::string ptx = path(fmt::format("m{}.ptx", i));
      test::write_text(ptx, modules[i]);
      const auto r = run_command(fmt::format("{} -arch={} {} -o {}.cubin", kPtxas, arch, ptx, ptx));
      EXPECT_EQ(r.exit_code, 0) << arch << ": " << r.err;
    }
}

// Frequency scheme table: the kernels compute nothing on the host, so after
// the first call a CUDA call launches kernels and nothing else (what a CUDA
// graph can capture), as the manifest says; seen with the stub driver.
TEST_F(AotBuild, CudaTableLibraryOnlyLaunchesAfterTheFirstCall) {
  const char* text = "name: aot_tc\nhead_dim: 16\nlayout: thd\ndtype: bf16\npositions: explicit\nfrequency: {scheme: table}\n";
  const std::string lib = path("lib");
  build_library(write_spec(text), "x86-64-linux,cuda", lib);
  const auto manifest = nlohmann::json::parse(test::read_text(lib + "/manifest.json"));
  for (const auto& e : manifest["entry_points"]) EXPECT_EQ(e["cuda_graph_capturable"], true) << e["name"];
  EXPECT_THAT(test::read_text(lib + "/aot_tc.h"), HasSubstr("Later calls launch kernels and nothing\n"));
  const std::string exe = compile_driver(lib, "aot_tc", path("driver"));
  Scenario s;
  s.q = make_tensor(DType::BF16, {6, 2, 16}, {32, 16, 1}, 0.3);
  s.k = make_tensor(DType::BF16, {6, 1, 16}, {16, 16, 1}, 0.8);
  s.positions_shape = {6}, s.positions = {0, 5, 9, 1, 2, 3};
  s.cos_sin_cache = ref::Tensor{{10, 16}, std::vector<double>(160, 0.5)};
  check_stub_cuda_calls(stub_cuda_calls(exe, path("stub"), DType::BF16, s), /*capturable=*/true);
}

TEST_F(AotBuild, TargetErrorsExitTwoAndLeaveNothing) {
  const std::string spec = write_spec(kSpecB);
  fs::create_directories(path("existing"));
  test::write_text(path("existing/mine.txt"), "keep");
  for (const char* targets : {"x86-64-linux,arm-64-linux", "bogus-target", "x86-64-linux,", "x86-64-linux-cuda", "cuda",
                              "x86-64-linux,x86-64-linux", "host,cuda,host-cuda-cuda_capability_86", "host,opencl",
                              "host,x86-64-linux-metal", "arm-64-linux,arm-64-linux-cuda", "x86-64-linux,cuda-vulkan"}) {
    SCOPED_TRACE(targets);
    auto r = run_command(kTool + " build " + spec + " --targets " + targets + " -o " + path("new/lib"));
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_THAT(r.err, HasSubstr("--targets"));
    EXPECT_FALSE(fs::exists(path("new")));
    r = run_command(kTool + " build " + spec + " --targets " + targets + " -o " + path("existing"));
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_EQ(std::distance(fs::directory_iterator(path("existing")), fs::directory_iterator()), 1);
  }
  auto r = run_command(kTool + " build " + spec + " --targets x86-64-linux,arm-64-linux -o " + path("x"));
  EXPECT_THAT(r.err, HasSubstr("mixes x86-64-linux and arm-64-linux"));
  r = run_command(kTool + " build " + spec + " --targets cuda,vulkan -o " + path("x"));
  EXPECT_THAT(r.err, HasSubstr("--targets `cuda,vulkan` has no CPU target: a library needs one for the host side of its "
                               "GPU kernels (and its CPU tensors); write host,cuda,vulkan"));
  r = run_command(kTool + " build " + spec + " --targets host,cuda,cuda -o " + path("x"));
  EXPECT_THAT(r.err, HasSubstr("--targets has two cuda targets; a library holds one per GPU API"));
  r = run_command(kTool + " build " + spec + " --targets host,x86-64-linux-metal -o " + path("x"));
  EXPECT_THAT(r.err, HasSubstr("rope-gen has GPU schedules for cuda and vulkan only"));
  r = run_command(kTool + " build " + spec + " --targets arm-64-linux,arm-64-linux-cuda -o " + path("x"));
  EXPECT_THAT(r.err, HasSubstr("GPU targets need rope-gen's call library and device hooks in the archive"));
}

TEST_F(AotBuild, BareSpecBuildsForTheHostIntoItsName) {
  const std::string spec = write_spec("name: bare\nhead_dim: 8\n");
  fs::create_directories(path("cwd"));
  const auto r = run_command("cd " + path("cwd") + " && " + kTool + " " + spec);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::exists(path("cwd/bare/libbare.a")));
  EXPECT_TRUE(fs::exists(path("cwd/bare/bare.h")));
  EXPECT_TRUE(fs::exists(path("cwd/bare/manifest.json")));
  // Not a file, not YAML: still a usage error.
  EXPECT_EQ(run_command(kTool + " no-such-command").exit_code, 2);
}

// The kernel cache keeps each entry's objects: the same spec and targets
// again, into another directory, compile nothing and give the same bytes; a
// damaged file there is compiled again, never used; another spec compiles anew.
TEST_F(AotBuild, ASecondBuildTakesTheCompiledEntriesFromTheKernelCache) {
  const std::string spec = write_spec("name: memo\nhead_dim: 8\n");
  const std::string env = "ROPEGEN_CACHE_DIR=" + path("cache") + " ";
  auto build = [&](const std::string& spec_file, const std::string& out) {
    const auto r = run_command(env + kTool + " build " + spec_file + " --targets " + kX86Pair + ",vulkan -o " + out);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return nlohmann::json::parse(r.out);
  };
  const auto first = build(spec, path("first"));
  const int entries = first["compiled"];
  EXPECT_GT(entries, 1);  // the entry points and Halide's runtime
  EXPECT_EQ(first["reused"], 0);
  const auto second = build(spec, path("second"));
  EXPECT_EQ(second["compiled"], 0);
  EXPECT_EQ(second["reused"], entries);
  for (const std::string f : first["files"])
    EXPECT_TRUE(test::read_text(path("first/" + f)) == test::read_text(path("second/" + f))) << f;

  std::vector<fs::path> kept;
  for (const auto& f : fs::directory_iterator(path("cache/objects"))) kept.push_back(f.path());
  ASSERT_EQ(static_cast<int>(kept.size()), entries);
  std::string damaged = test::read_text(kept.front().string());
  damaged[damaged.size() / 2] ^= 1;
  test::write_text(kept.front().string(), damaged);
  const auto third = build(spec, path("third"));
  EXPECT_EQ(third["compiled"], 1);
  EXPECT_EQ(third["reused"], entries - 1);
  // The entry compiled again need not be the same bytes (Halide numbers its
  // names per process); what the cache now holds is reused as it is.
  const auto fourth = build(spec, path("fourth"));
  EXPECT_EQ(fourth["compiled"], 0);
  for (const std::string f : first["files"])
    EXPECT_TRUE(test::read_text(path("third/" + f)) == test::read_text(path("fourth/" + f))) << f;

  const auto other = build(write_spec("name: memo\nhead_dim: 8\ndtype: f16\n"), path("other"));
  EXPECT_EQ(other["compiled"], entries - 1);  // Halide's runtime is the same
  EXPECT_EQ(other["reused"], 1);
}

// A kv_cache spec's library (paged_hnd, fp8_e4m3 caches, partial rotary)
// called from C (tests/aot/kv_driver.c): q rotated in place, k's rows
// rotated into k_cache and v's copied into v_cache as uint8 codes of
// x / k_scale, x / v_scale; entries no token goes to untouched; the
// entries with and without v and out_k, int32 and int64 ids; a bad scale
// comes back as ROPEGEN_ERROR_INVALID_ARGUMENT naming it.
TEST_F(AotBuild, KvCacheFp8LibraryAppendsFromC) {
  const char* text = "name: aot_kv\nhead_dim: 16\nrotary_dim: 8\nlayout: thd\ndtype: f32\npositions: explicit\n"
                     "kv_cache: {layout: paged_hnd, page_size: 4, dtype: fp8_e4m3}\n";
  const RopeSpec spec = parse(text);
  const std::string lib = path("lib");
  build_library(write_spec(text), kX86Pair, lib);
  const auto manifest = nlohmann::json::parse(test::read_text(lib + "/manifest.json"));
  std::vector<std::string> entries;
  for (const auto& e : manifest["entry_points"]) entries.push_back(e["name"]);
  EXPECT_THAT(entries, ::testing::ElementsAre("aot_kv_append_i32", "aot_kv_append_i64", "aot_kv_append_out_k_i32",
                                              "aot_kv_append_out_k_i64", "aot_kv_append_v_i32", "aot_kv_append_v_i64",
                                              "aot_kv_append_v_out_k_i32", "aot_kv_append_v_out_k_i64",
                                              "aot_kv_pass_through"));
  std::vector<std::string> args;
  for (const auto& a : manifest["entry_points"][7]["arguments"]) args.push_back(a["name"]);
  EXPECT_THAT(args, ::testing::ElementsAre("q", "k", "v", "positions", "kv_indices", "kv_indptr", "batch_indices",
                                           "cache_positions", "k_scale", "v_scale", "pool_threads", "out_q", "out_k",
                                           "k_cache", "v_cache"));
  const std::string header = test::read_text(lib + "/aot_kv.h");
  EXPECT_THAT(header, HasSubstr("{aot_kv_append_v_out_k_i64_argv, aot_kv_append_v_out_k_i64_metadata, 1, 1, 0, 0, 1, "
                                "ROPEGEN_DEVICE_CPU, 0},"));
  EXPECT_THAT(header, HasSubstr("uint8 (fp8_e4m3 codes)"));
  const std::string exe = compile_driver(lib, "aot_kv", path("kv_driver"), kKvDriver);

  // Two requests: 5 tokens at 0..4 (pages 2, 0), 2 at 2..3 (page 1), one padding token.
  const int64_t T = 8, Hq = 2, Hk = 2, D = 16, Dv = 8, pages = 4, ps = 4;
  const std::vector<int32_t> kv_indices = {2, 0, 1}, kv_indptr = {0, 2, 3}, batch = {0, 0, 0, 0, 0, 1, 1, -1};
  const std::vector<int64_t> positions = {0, 1, 2, 3, 4, 2, 3, 0};
  std::vector<float> q(T * Hq * D), k(T * Hk * D), v(T * Hk * Dv);
  for (size_t i = 0; i < q.size(); ++i) q[i] = static_cast<float>(std::sin(0.37 * i));
  for (size_t i = 0; i < k.size(); ++i) k[i] = static_cast<float>(3 * std::cos(0.53 * i));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(2 * std::sin(0.71 * i + 1));
  k[5] = 1e6f, v[3] = -1e6f, v[4] = NAN;  // saturated; NaN kept
  auto raw = [](const auto& values) {
    return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(values[0]));
  };
  constexpr uint8_t kSentinel = 0x5a;
  const KvDType e4m3 = KvDType::Fp8E4m3;
  // The reference: q and k rotated in float64, k's and v's rows scattered.
  ref::Call rc;
  rc.positions = ref::Tensor{{T}, std::vector<double>(positions.begin(), positions.end())};
  const ref::Tensor q_ref = ref::reference_apply(spec, {{T, Hq, D}, std::vector<double>(q.begin(), q.end())}, false, rc);
  const ref::Tensor k_ref = ref::reference_apply(spec, {{T, Hk, D}, std::vector<double>(k.begin(), k.end())}, true, rc);
  ref::KvIndices ix;
  ix.positions = positions;
  ix.kv_indices.assign(kv_indices.begin(), kv_indices.end());
  ix.kv_indptr.assign(kv_indptr.begin(), kv_indptr.end());
  ix.batch_indices.assign(batch.begin(), batch.end());
  // Which row element (flat index + 1) each cache entry holds; 0: none.
  auto sources = [&](int64_t dim) {
    std::vector<double> flat(T * Hk * dim);
    for (size_t i = 0; i < flat.size(); ++i) flat[i] = static_cast<double>(i + 1);
    ref::Tensor cache{{pages, Hk, ps, dim}, std::vector<double>(pages * Hk * ps * dim, 0.0)};
    ref::reference_kv_append(spec, {{T, Hk, dim}, flat}, ix, cache);
    return cache.data;
  };
  const std::vector<double> k_source = sources(D), v_source = sources(Dv);

  for (bool with_v : {true, false}) {
    const bool out_k = !with_v, int64_ids = !with_v;
    const float k_scale = with_v ? 0.37f : 2.0f, v_scale = 2.5f;
    SCOPED_TRACE(with_v ? "with v, int32 ids" : "without v, out_k, int64 ids");
    const std::string dir = path(with_v ? "call_v" : "call_out_k");
    fs::create_directories(dir);
    test::write_text(dir + "/call.txt", fmt::format("{} {} {} {} {} {} {} {} {} {} {} {} {} {}\n", T, Hq, Hk, D, Dv,
                                                    pages, ps, kv_indices.size(), kv_indptr.size() - 1, with_v ? 1 : 0,
                                                    out_k ? 1 : 0, int64_ids ? 1 : 0, k_scale,
                                                    with_v ? v_scale : 0.0f));
    test::write_text(dir + "/q.bin", raw(q));
    test::write_text(dir + "/k.bin", raw(k));
    test::write_text(dir + "/v.bin", raw(v));
    test::write_text(dir + "/positions.bin",
                     int64_ids ? raw(positions) : raw(std::vector<int32_t>(positions.begin(), positions.end())));
    test::write_text(dir + "/kv_indices.bin", raw(kv_indices));
    test::write_text(dir + "/kv_indptr.bin", raw(kv_indptr));
    test::write_text(dir + "/batch_indices.bin", raw(batch));
    test::write_text(dir + "/k_cache.bin", std::string(pages * Hk * ps * D, static_cast<char>(kSentinel)));
    test::write_text(dir + "/v_cache.bin", std::string(pages * Hk * ps * Dv, static_cast<char>(kSentinel)));
    const std::string out = run_command(exe + " " + dir).out;
    ASSERT_EQ(out, "rc=0\n");

    const std::string got_q = test::read_text(dir + "/result_q.bin"), got_kc = test::read_text(dir + "/result_k_cache.bin");
    for (int64_t i = 0; i < T * Hq * D; ++i) {
      float x;
      std::memcpy(&x, got_q.data() + 4 * i, 4);
      ASSERT_NEAR(x, q_ref.data[i], 1e-5) << "q[" << i << "]";
    }
    std::vector<float> out_k_values;
    if (out_k) {
      const std::string bytes = test::read_text(dir + "/result_out_k.bin");
      out_k_values.resize(T * Hk * D);
      std::memcpy(out_k_values.data(), bytes.data(), bytes.size());
    }
    for (size_t i = 0; i < k_source.size(); ++i) {
      const uint8_t code = static_cast<uint8_t>(got_kc[i]);
      if (k_source[i] == 0) {
        ASSERT_EQ(code, kSentinel) << "k_cache[" << i << "] was written but no token goes there";
        continue;
      }
      const size_t from = static_cast<size_t>(k_source[i]) - 1;
      if (out_k) {  // the very floats the codes are made from
        ASSERT_EQ(code, ref::fp8_code(e4m3, out_k_values[from], k_scale)) << "k_cache[" << i << "]";
        ASSERT_NEAR(out_k_values[from], k_ref.data[from], 1e-5 * (1 + std::abs(k_ref.data[from])));
        continue;
      }
      // Between the codes of the float64 value -+ float32 rounding.
      const double w = k_ref.data[from], eps = 1e-5 * (1 + std::abs(w));
      const double lo = ref::fp8_value(e4m3, ref::fp8_code(e4m3, static_cast<float>(w - eps), k_scale));
      const double hi = ref::fp8_value(e4m3, ref::fp8_code(e4m3, static_cast<float>(w + eps), k_scale));
      const double got = ref::fp8_value(e4m3, code);
      ASSERT_TRUE(lo <= got && got <= hi) << "k_cache[" << i << "] = " << got << " for " << w << " / " << k_scale;
    }
    if (with_v) {
      const std::string got_vc = test::read_text(dir + "/result_v_cache.bin");
      for (size_t i = 0; i < v_source.size(); ++i) {
        const uint8_t code = static_cast<uint8_t>(got_vc[i]);
        const uint8_t want = v_source[i] == 0 ? kSentinel : ref::fp8_code(e4m3, v[static_cast<size_t>(v_source[i]) - 1], v_scale);
        ASSERT_EQ(code, want) << "v_cache[" << i << "]";
      }
    }
  }
  // The saturated and NaN values went where they should.
  EXPECT_EQ(ref::fp8_code(e4m3, -1e6f, 2.5f), 0xfe);
  EXPECT_EQ(ref::fp8_code(e4m3, NAN, 2.5f), 0x7f);

  // A bad scale: refused before anything runs, naming it.
  const std::string dir = path("call_v");
  test::write_text(dir + "/call.txt", fmt::format("{} {} {} {} {} {} {} {} {} 1 0 0 -1 2.5\n", T, Hq, Hk, D, Dv, pages,
                                                  ps, kv_indices.size(), kv_indptr.size() - 1));
  EXPECT_EQ(run_command(exe + " " + dir).out,
            "rc=1\ninvalid argument: k_scale: k_scale (-1) must be finite and > 0: the k cache holds the fp8_e4m3 codes "
            "of x / k_scale\n\n");
}

}  // namespace
}  // namespace ropegen
