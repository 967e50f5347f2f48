// Hostile spec text and files: huge names, deep nesting, aliases, long
// lines, oversized input, files that are not regular files. Each gives a
// clean diagnostic: no crash, no stack overflow, no hang, no blow-up.
#include <gtest/gtest.h>

#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "dsl/spec_diagnostics.h"
#include "ropegen/spec_io.h"

namespace ropegen {
namespace {

using test::errors_of;
using test::first_lines;

std::string repeated(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

const std::string kNameError =
    "s.yaml:1:7: error: name `" + std::string(80, 'a') +
    "... (1000000 characters)` must be an identifier: [a-z_][a-z0-9_]*, at most 64 characters (it prefixes every "
    "emitted symbol and is never a path)\n";

TEST(HostileInput, MegabyteNameIsRefusedAndShownShortened) {
  EXPECT_EQ(errors_of("name: " + std::string(1000000, 'a') + "\nhead_dim: 8\n"), kNameError);
}

// errors_of(text), computed on a thread with a 64 KiB stack.
std::string errors_in_small_thread(const std::string& text) {
  struct Job {
    const std::string& text;
    std::string errors;
  } job{text, ""};
  pthread_attr_t attr;
  EXPECT_EQ(pthread_attr_init(&attr), 0);
  EXPECT_EQ(pthread_attr_setstacksize(&attr, 64 * 1024), 0);
  pthread_t thread;
  const auto run = [](void* p) -> void* {
    auto* j = static_cast<Job*>(p);
    j->errors = errors_of(j->text);
    return nullptr;
  };
  EXPECT_EQ(pthread_create(&thread, &attr, run, &job), 0);
  EXPECT_EQ(pthread_join(thread, nullptr), 0);
  pthread_attr_destroy(&attr);
  return job.errors;
}

// std::regex recursed once per character: 4k characters overflowed a small stack.
TEST(HostileInput, MegabyteNameInAThreadWith64KiBOfStack) {
  EXPECT_EQ(errors_in_small_thread("name: " + std::string(1000000, 'a') + "\nhead_dim: 8\n"), kNameError);
}

// yaml-cpp recurses per level up to its guard: more than 64 KiB of stack.
TEST(HostileInput, DeepNestingInAThreadWith64KiBOfStack) {
  EXPECT_EQ(errors_in_small_thread("name: a\nhead_dim: " + std::string(100000, '[') + std::string(100000, ']')),
            "s.yaml:2:200011: error: invalid YAML: nested too deeply (a spec needs 3 levels)\n");
}

TEST(HostileInput, LongKeysAndValuesAreShownShortened) {
  EXPECT_EQ(errors_of("name: a\nhead_dim: 8\npairing: " + std::string(300000, 'x') + "\n"),
            "s.yaml:3:10: error: unknown pairing `" + std::string(80, 'x') +
                "... (300000 characters)`; allowed: half, interleaved\n");
  // (YAML keys are at most 1024 characters.)
  EXPECT_EQ(errors_of("name: a\nhead_dim: 8\n" + std::string(1000, 'k') + ": 1\n"),
            "s.yaml:3:1: error: unknown key `" + std::string(80, 'k') +
                "... (1000 characters)` for encoding `rope`; allowed: name, encoding, head_dim, rotary_dim, "
                "rotary_offset, pairing, output_pairing, layout, dtype, frequency, scaling, xpos, positions, axes, "
                "kv_cache, qk_norm, output_dtype, output_quant, fp8_scale\n");
}

TEST(HostileInput, ControlCharactersAreNotPrinted) {
  Result<RopeSpec> r = parse_spec(std::string("name: \"a\\0\\e[2Jb\"\nhead_dim: 8\n"), "s.yaml");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(format(r.errors()),
            "s.yaml:1:7: error: name `a\\x00\\x1b[2Jb` must be an identifier: [a-z_][a-z0-9_]*, at most 64 characters "
            "(it prefixes every emitted symbol and is never a path)\n"
            "  name: \"a\\0\\e[2Jb\"\n"
            "        ^\n");
  // Raw control bytes in the source line are replaced, tabs kept for the caret.
  r = parse_spec(std::string("name: a\nhead_dim: 8\npairing: \x1b[2J\tx\n"), "s.yaml");
  ASSERT_FALSE(r.ok());
  const std::string text = format(r.errors()[0]);
  EXPECT_EQ(text.substr(text.find('\n')), "\n  pairing: ?[2J\tx\n           ^");
}

TEST(HostileInput, TextOverOneMebibyteIsRefusedUnparsed) {
  const std::string text = "name: a\nhead_dim: 8\n#" + std::string(kMaxSpecBytes, ' ') + "\n";
  EXPECT_EQ(errors_of(text), "s.yaml: error: spec is larger than 1048576 bytes (1 MiB), the most rope-gen reads\n");
  // Just within the limit it is parsed as usual.
  EXPECT_EQ(errors_of("name: a\nhead_dim: 8\n#" + std::string(kMaxSpecBytes - 22, ' ')), "<no error>");
}

// yaml-cpp's parser recurses once per level; it stops itself at a fixed
// depth, and the error says so instead of its "bad file".
TEST(HostileInput, DeepNestingIsRefused) {
  const std::string message = "error: invalid YAML: nested too deeply (a spec needs 3 levels)\n";
  const std::string flow = errors_of("name: a\nhead_dim: " + std::string(100000, '[') + std::string(100000, ']'));
  EXPECT_NE(flow.find(message), std::string::npos) << flow;
  const std::string maps = errors_of("name: a\nhead_dim: " + repeated("{a: ", 100000) + "1" + std::string(100000, '}'));
  EXPECT_NE(maps.find(message), std::string::npos) << maps;
  const std::string dashes = errors_of("name: a\nhead_dim:\n" + repeated("- ", 100000) + "1\n");
  EXPECT_NE(dashes.find(message), std::string::npos) << dashes;
}

// Aliases share their node in yaml-cpp and the schema stops at the first
// wrong element, so a billion laughs is never expanded.
TEST(HostileInput, BillionLaughsIsRefusedWithoutExpanding) {
  std::string text = "name: a\nhead_dim: 8\nl0: &l0 [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]\n";
  for (int i = 1; i < 30; ++i)
    text += "l" + std::to_string(i) + ": &l" + std::to_string(i) + " [" +
            repeated("*l" + std::to_string(i - 1) + ", ", 9) + "*l" + std::to_string(i - 1) + "]\n";
  text += "frequency: {scheme: custom, values: *l29}\n";
  const std::string errors = errors_of(text);
  EXPECT_NE(errors.find("s.yaml:4:1: error: unknown key `l1` for encoding `rope`"), std::string::npos) << errors;
  EXPECT_NE(errors.find("error: `values` must be a list of numbers (finite, unquoted), got a list\n"),
            std::string::npos)
      << errors;
}

class SpecFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("ropegen_spec_files_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string path(const char* name) const { return (dir_ / name).string(); }

  std::filesystem::path dir_;
};

TEST_F(SpecFiles, ADirectoryIsNamed) {
  EXPECT_EQ(first_lines(load_spec(dir_.string())),
            dir_.string() + ": error: cannot read spec file: it is a directory\n");
}

TEST_F(SpecFiles, AFifoWithoutAWriterDoesNotHang) {
  ASSERT_EQ(::mkfifo(path("fifo").c_str(), 0600), 0);
  EXPECT_EQ(first_lines(load_spec(path("fifo"))),
            path("fifo") + ": error: cannot read spec file: it is a FIFO (named pipe)\n");
}

TEST_F(SpecFiles, DevZeroIsNotReadForever) {
  EXPECT_EQ(first_lines(load_spec("/dev/zero")), "/dev/zero: error: cannot read spec file: it is a character device\n");
}

TEST_F(SpecFiles, AHugeFileIsRefusedAfterAtMostOneMebibyte) {
  {
    std::ofstream out(path("huge.yaml"), std::ios::binary);
    out << "name: a\nhead_dim: 8\n#";
    out.seekp(std::streamoff{64} << 20);  // 64 MiB, sparse
    out << "\n";
  }
  EXPECT_EQ(first_lines(load_spec(path("huge.yaml"))),
            path("huge.yaml") + ": error: spec is larger than 1048576 bytes (1 MiB), the most rope-gen reads\n");
}

TEST_F(SpecFiles, ARegularFileIsRead) {
  std::ofstream(path("ok.yaml")) << "name: a\nhead_dim: 8\n";
  EXPECT_EQ(first_lines(load_spec(path("ok.yaml"))), "<no error>");
}

}  // namespace
}  // namespace ropegen
