// base/: the one hash and the one write-then-rename.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "base/file_write.h"
#include "base/hash.h"

namespace ropegen::base {
namespace {

TEST(Hash, IsXxh3Of64Bits) {
  EXPECT_EQ(hash64(""), 0x2d06800538d394c2ull);  // XXH3_64bits of nothing (xxHash's test vector)
  EXPECT_EQ(hash_hex(""), "2d06800538d394c2");
  EXPECT_EQ(hash_hex("rope-gen"), "7d223d203170a5c2");
  EXPECT_EQ(hash64("rope-gen"), hash64(std::string("rope-gen").data(), 8));
}

class FileWrite : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/ropegen_base_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::system(("rm -rf " + dir_).c_str()); }
  static std::string read(const std::string& path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  std::string dir_;
};

TEST_F(FileWrite, ReplacesWholeKeepingTheMode) {
  const std::string path = dir_ + "/out.txt";
  const mode_t mask = ::umask(027);
  ASSERT_FALSE(write_file_atomically(path, "first", {}));
  ::umask(mask);
  struct stat created {};
  ASSERT_EQ(::stat(path.c_str(), &created), 0);
  EXPECT_EQ(created.st_mode & 07777, 0640u);  // as open(2) would create it: 0666 less the umask
  ASSERT_EQ(::chmod(path.c_str(), 0600), 0);
  ASSERT_FALSE(write_file_atomically(path, "again", {}));
  ASSERT_EQ(::stat(path.c_str(), &created), 0);
  EXPECT_EQ(created.st_mode & 07777, 0600u);  // a replaced file keeps its mode
  ASSERT_EQ(::chmod(path.c_str(), 0640), 0);
  ASSERT_FALSE(write_file_atomically(path, "second", {}));
  EXPECT_EQ(read(path), "second");
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0640u);
}

TEST_F(FileWrite, RefusesWhatIsNotARegularFile) {
  const std::string fifo = dir_ + "/fifo", link = dir_ + "/link";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  ASSERT_EQ(::symlink("elsewhere", link.c_str()), 0);
  for (const std::string& path : {fifo, link, dir_}) {
    const auto failure = write_file_atomically(path, "x", {});
    ASSERT_TRUE(failure) << path;
    EXPECT_TRUE(failure->refused) << path;
  }
  EXPECT_EQ(write_file_atomically(fifo, "x", {})->why, "it is a FIFO (named pipe)");
  EXPECT_EQ(write_file_atomically(link, "x", {})->why, "it is a symlink");
  // Nothing was left behind: no temporary file next to them.
  int entries = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir_)) entries += e.path().filename().string()[0] == '.';
  EXPECT_EQ(entries, 0);
}

TEST_F(FileWrite, PublishMovesAFileIntoPlace) {
  const std::string from = dir_ + "/new", to = dir_ + "/entry";
  ASSERT_TRUE(write_new_file(from, "sealed"));
  EXPECT_FALSE(write_new_file(from, "again"));  // O_EXCL: never over an existing file
  ASSERT_FALSE(publish_file(from, to, {/*only_own_files=*/true, /*sync_dir=*/true}));
  EXPECT_EQ(read(to), "sealed");
  EXPECT_NE(::access(from.c_str(), F_OK), 0);
}

}  // namespace
}  // namespace ropegen::base
