// Hostile outputs: rope-gen replaces only regular files (or creates new ones),
// writes through a symlink to the file it resolves to, refuses devices,
// FIFOs, directories and dangling symlinks, and refuses two outputs that are
// the same file. `build -o DIR` never replaces files it did not write.
#include <gmock/gmock.h>

#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "cli/cli_fixture.h"

namespace ropegen {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class Outputs : public test::CliFixture {
 protected:
  void SetUp() override {
    CliFixture::SetUp();
    spec_ = spec("r.yaml", "name: r\nhead_dim: 8\n");
    q_ = floats("q.npy", {1, 2, 1, 8}, 0.25f);
    k_ = floats("k.npy", {1, 2, 1, 8}, 0.75f);
  }
  test::CommandResult apply(const std::string& out_q, const std::string& more = "") {
    return rope_gen("apply " + spec_ + " --q " + q_ + " --out-q " + out_q + " " + more);
  }
  // What rope-gen wrote for q, read back.
  std::string rotated_q() {
    EXPECT_EQ(apply(path("reference.npy")).exit_code, 0);
    return test::read_text(path("reference.npy"));
  }
  std::string spec_, q_, k_;
};

TEST_F(Outputs, DeviceNodeIsRefusedAndLeftInPlace) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to mknod a device node (the /dev/null case)";
  const std::string node = path("null");
  ASSERT_EQ(::mknod(node.c_str(), S_IFCHR | 0666, makedev(1, 3)), 0);
  const test::CommandResult r = apply(node);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_THAT(r.err, HasSubstr("--out-q " + node + ": is a character device; rope-gen writes regular files only"));
  struct stat st {};
  ASSERT_EQ(::lstat(node.c_str(), &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
}

TEST_F(Outputs, FifoIsRefusedWithoutWaitingForAReader) {
  const std::string fifo = path("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  for (const std::string& command : {"apply " + spec_ + " --q " + q_ + " --out-q " + fifo,
                                     "freqs " + spec_ + " --out " + fifo, "table " + spec_ + " --max-pos 4 --out " + fifo}) {
    const test::CommandResult r = rope_gen(command);
    EXPECT_EQ(r.exit_code, 2) << command << ": " << r.err;
    EXPECT_THAT(r.err, HasSubstr(fifo + ": is a FIFO"));
  }
  EXPECT_TRUE(fs::is_fifo(fifo));
}

TEST_F(Outputs, DirectoryIsRefused) {
  const test::CommandResult r = apply(dir_);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_THAT(r.err, HasSubstr("is a directory"));
}

TEST_F(Outputs, SymlinkWritesTheFileItResolvesToAndStays) {
  const std::string expected = rotated_q();
  fs::create_directory(path("elsewhere"));
  test::write_text(path("elsewhere/target.npy"), "old");
  fs::create_symlink(path("elsewhere/target.npy"), path("link.npy"));
  const test::CommandResult r = apply(path("link.npy"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::is_symlink(path("link.npy")));
  EXPECT_EQ(test::read_text(path("elsewhere/target.npy")), expected);
  EXPECT_EQ(std::distance(fs::directory_iterator(path("elsewhere")), fs::directory_iterator()), 1);  // no temp file left
}

TEST_F(Outputs, DanglingSymlinkIsRefusedAndNothingIsCreated) {
  fs::create_directory(path("elsewhere"));
  fs::create_symlink(path("elsewhere/missing.npy"), path("link.npy"));
  const test::CommandResult r = apply(path("link.npy"));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_THAT(r.err, HasSubstr("a symlink that does not resolve"));
  EXPECT_TRUE(fs::is_empty(path("elsewhere")));
}

TEST_F(Outputs, TwoOutputsThatAreTheSameFileAreRefused) {
  test::write_text(path("existing.npy"), "old");
  fs::create_symlink(path("existing.npy"), path("alias.npy"));
  fs::create_hard_link(path("existing.npy"), path("hard.npy"));
  fs::create_directory(path("sub"));
  const std::vector<std::pair<std::string, std::string>> pairs = {
      {path("new.npy"), path("new.npy")},              // a new file, twice
      {path("new.npy"), path("sub/../new.npy")},       // the same new file, spelled two ways
      {path("existing.npy"), path("alias.npy")},       // through a symlink
      {path("existing.npy"), path("hard.npy")}};       // a hard link: same inode
  for (const auto& [a, b] : pairs) {
    const test::CommandResult r = apply(a, "--k " + k_ + " --out-k " + b);
    EXPECT_EQ(r.exit_code, 2) << a << " " << b << ": " << r.err;
    EXPECT_THAT(r.err, HasSubstr("are the same file: each output needs its own"));
  }
  EXPECT_FALSE(fs::exists(path("new.npy")));
  EXPECT_EQ(test::read_text(path("existing.npy")), "old");
}

TEST_F(Outputs, AnOutputMayBeTheInputBecauseInputsAreReadFirst) {
  const std::string expected = rotated_q();
  const test::CommandResult r = apply(q_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(test::read_text(q_), expected);
}

TEST_F(Outputs, AReplacedFileKeepsItsMode) {
  test::write_text(path("out.npy"), "old");
  fs::permissions(path("out.npy"), fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
  ASSERT_EQ(apply(path("out.npy")).exit_code, 0);
  EXPECT_EQ(fs::status(path("out.npy")).permissions() & fs::perms::mask,
            fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
}

TEST_F(Outputs, BuildRefusesADirectoryWithFilesItDidNotWrite) {
  fs::create_directory(path("home"));
  test::write_text(path("home/manifest.json"), "{\"mine\": true}");
  test::write_text(path("home/notes.txt"), "keep");
  const test::CommandResult r = rope_gen("build " + spec_ + " -o " + path("home"));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_THAT(r.err, HasSubstr("holds files rope-gen did not write"));
  EXPECT_EQ(test::read_text(path("home/manifest.json")), "{\"mine\": true}");
  EXPECT_EQ(std::distance(fs::directory_iterator(path("home")), fs::directory_iterator()), 2);
}

// An earlier build's manifest.json is read only if it is a regular file: a
// FIFO made the build wait for a writer forever, a directory exit 3.
TEST_F(Outputs, BuildRefusesAManifestThatIsNoRegularFile) {
  fs::create_directories(path("fifo"));
  ASSERT_EQ(::mkfifo(path("fifo/manifest.json").c_str(), 0644), 0);
  fs::create_directories(path("dir/manifest.json"));
  for (const auto& [dir, kind] : {std::pair{path("fifo"), "a FIFO"}, std::pair{path("dir"), "a directory"}}) {
    const test::CommandResult r = rope_gen("build " + spec_ + " -o " + dir);
    EXPECT_EQ(r.exit_code, 2) << dir << ": " << r.err;
    EXPECT_THAT(r.err, HasSubstr("-o " + dir + ": cannot read " + dir + "/manifest.json: it is " + kind));
  }
  EXPECT_TRUE(fs::is_fifo(path("fifo/manifest.json")));
  EXPECT_TRUE(fs::is_directory(path("dir/manifest.json")));
}

TEST_F(Outputs, BuildReplacesOnlyWhatAnEarlierBuildWrote) {
  // One CPU target: what is checked is which files a build replaces.
  const std::string target = " --targets x86-64-linux";
  ASSERT_EQ(rope_gen("build " + spec_ + target + " -o " + path("lib")).exit_code, 0);
  test::write_text(path("lib/notes.txt"), "keep");
  const test::CommandResult again = rope_gen("build " + spec_ + target + " -o " + path("lib"));
  ASSERT_EQ(again.exit_code, 0) << again.err;  // a rebuild replaces its own files
  EXPECT_EQ(test::read_text(path("lib/notes.txt")), "keep");
  // Another spec's header name is not one the earlier build wrote.
  test::write_text(path("lib/other.h"), "mine");
  const test::CommandResult other =
      rope_gen("build " + spec("other.yaml", "name: other\nhead_dim: 8\n") + target + " -o " + path("lib"));
  EXPECT_EQ(other.exit_code, 2) << other.err;
  EXPECT_THAT(other.err, HasSubstr("would replace other.h, which the previous rope-gen build there did not write"));
  EXPECT_EQ(test::read_text(path("lib/other.h")), "mine");
}

}  // namespace
}  // namespace ropegen
