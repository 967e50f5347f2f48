// Every relative link of the project's markdown (README.md, docs/, each
// folder's README) leads to a file or folder that exists, and a link to a
// section (`page.md#heading`, `#heading`) to a heading that page has.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "support/test_paths.h"

namespace ropegen {
namespace {

namespace fs = std::filesystem;
const fs::path kRoot = ropegen::test::source_dir();

// The project's own markdown: not build trees, virtual environments or other dot folders.
std::vector<fs::path> markdown_files() {
  std::vector<fs::path> out;
  for (auto it = fs::recursive_directory_iterator(kRoot); it != fs::recursive_directory_iterator(); ++it) {
    const std::string name = it->path().filename().string();
    if (it->is_directory() && (name.rfind('.', 0) == 0 || name.rfind("build", 0) == 0)) {
      it.disable_recursion_pending();
      continue;
    }
    if (it->is_regular_file() && it->path().extension() == ".md") out.push_back(it->path());
  }
  return out;
}

// GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens.
std::string anchor_of(const std::string& heading) {
  std::string out;
  for (unsigned char c : heading) {
    if (std::isalnum(c) || c == '_' || c == '-') out += static_cast<char>(std::tolower(c));
    else if (c == ' ') out += '-';
  }
  return out;
}

struct Page {
  std::vector<std::pair<int, std::string>> links;  // (line, target) outside code blocks
  std::set<std::string> anchors;
};

Page read_page(const fs::path& file) {
  Page page;
  std::ifstream in(file);
  std::map<std::string, int> seen;
  bool code = false;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (line.rfind("```", 0) == 0) code = !code;
    if (code) continue;
    if (line.rfind('#', 0) == 0) {
      const size_t text = line.find_first_not_of('#');
      if (text != std::string::npos && line[text] == ' ') {
        const std::string anchor = anchor_of(line.substr(text + 1));
        const int n = seen[anchor]++;
        page.anchors.insert(n == 0 ? anchor : anchor + "-" + std::to_string(n));
      }
    }
    for (size_t at = line.find("]("); at != std::string::npos; at = line.find("](", at + 2)) {
      const size_t end = line.find(')', at + 2);
      if (end != std::string::npos) page.links.emplace_back(number, line.substr(at + 2, end - at - 2));
    }
  }
  return page;
}

TEST(DocLinks, EveryRelativeLinkResolves) {
  const std::vector<fs::path> files = markdown_files();
  ASSERT_TRUE(std::find(files.begin(), files.end(), kRoot / "README.md") != files.end());
  std::map<fs::path, Page> pages;
  for (const fs::path& f : files) pages[fs::weakly_canonical(f)] = read_page(f);
  std::string problems;
  int checked = 0;
  for (const auto& [file, page] : pages)
    for (const auto& [line, target] : page.links) {
      if (target.rfind("http://", 0) == 0 || target.rfind("https://", 0) == 0 || target.rfind("mailto:", 0) == 0)
        continue;
      ++checked;
      const std::string where = fs::relative(file, kRoot).string() + ":" + std::to_string(line) + ": ";
      const size_t hash = target.find('#');
      const std::string path = target.substr(0, hash);
      const fs::path resolved = path.empty() ? file : fs::weakly_canonical(file.parent_path() / path);
      if (!fs::exists(resolved)) {
        problems += where + "`" + target + "` does not exist\n";
        continue;
      }
      if (hash == std::string::npos) continue;
      const auto linked = pages.find(resolved);
      const std::string anchor = target.substr(hash + 1);
      if (linked == pages.end() || !linked->second.anchors.count(anchor))
        problems += where + "`" + target + "`: no heading with the anchor `" + anchor + "`\n";
    }
  EXPECT_GT(checked, 10) << "too few relative links found; is the link syntax still [text](target)?";
  EXPECT_TRUE(problems.empty()) << problems;
}

}  // namespace
}  // namespace ropegen
