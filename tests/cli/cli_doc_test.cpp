// docs/cli.md against the CLI itself: every subcommand and long flag that
// `rope-gen --help` and `rope-gen COMMAND --help` list is documented in that
// command's section of the page, and every flag the page names exists.
#include <gtest/gtest.h>

#include <cctype>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "support/run_command.h"
#include "support/test_paths.h"

namespace ropegen {
namespace {

const std::string kTool = ropegen::test::rope_gen_binary();
const std::string kPage = ropegen::test::source_path("/docs/cli.md");

// Flags of tools other than rope-gen that the page names (the scripts that regenerate from-hf's tables).
const std::set<std::string> kOtherToolsFlags = {"--venv", "--check"};

struct Help {
  std::vector<std::string> subcommands;
  std::set<std::string> long_flags;
};

// CLI11's help: "Subcommands:" and "Options:" sections, one entry per line indented by two spaces.
Help parse_help(const std::string& text) {
  Help help;
  std::istringstream in(text);
  std::string line, section;
  while (std::getline(in, line)) {
    if (!line.empty() && line[0] != ' ') section = line;
    if (line.rfind("  ", 0) != 0 || line.size() < 3 || line[2] == ' ') continue;
    const std::string first = line.substr(2, line.find(' ', 2) - 2);
    if (section.rfind("Subcommands", 0) == 0) help.subcommands.push_back(first);
    if (section.rfind("Options", 0) == 0) {
      std::istringstream names(first);
      for (std::string name; std::getline(names, name, ',');)
        if (name.rfind("--", 0) == 0) help.long_flags.insert(name);
    }
  }
  return help;
}

Help help_of(const std::string& command) {
  const test::CommandResult r = test::run_command(kTool + " " + command + " --help");
  EXPECT_EQ(r.exit_code, 0) << command << " --help: " << r.err;
  return parse_help(r.out);
}

std::string page() {
  std::ifstream in(kPage);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The text from the `## ` heading that names "`rope-gen COMMAND" to the next `## ` heading.
std::string section_of(const std::string& text, const std::string& command) {
  const std::string heading = "\n## `rope-gen " + command;
  const size_t start = text.find(heading);
  if (start == std::string::npos) return "";
  const size_t end = text.find("\n## ", start + 1);
  return text.substr(start, end == std::string::npos ? std::string::npos : end - start);
}

// `--flag` as a whole word: not the start of a longer flag (`--out` in `--out-q`).
bool names_flag(const std::string& text, const std::string& flag) {
  for (size_t at = text.find(flag); at != std::string::npos; at = text.find(flag, at + 1)) {
    const size_t after = at + flag.size();
    if (after == text.size() || !(std::isalnum(static_cast<unsigned char>(text[after])) || text[after] == '-'))
      return true;
  }
  return false;
}

TEST(CliDoc, EveryCommandAndLongFlagIsDocumentedInItsSection) {
  const std::string text = page();
  ASSERT_FALSE(text.empty()) << "cannot read " << kPage;
  const Help top = help_of("");
  ASSERT_GE(top.subcommands.size(), 8u) << "rope-gen --help lists too few subcommands; did its format change?";
  std::string problems;
  for (const std::string& command : top.subcommands) {
    const std::string section = section_of(text, command);
    if (section.empty()) {
      problems += "docs/cli.md has no section `## `rope-gen " + command + "...` for `rope-gen " + command + "`\n";
      continue;
    }
    const Help help = help_of(command);
    std::vector<std::pair<std::string, std::set<std::string>>> flags = {{command, help.long_flags}};
    for (const std::string& sub : help.subcommands) {
      if (!names_flag(section, sub)) problems += "docs/cli.md: `rope-gen " + command + " " + sub + "` is not documented\n";
      flags.push_back({command + " " + sub, help_of(command + " " + sub).long_flags});
    }
    for (const auto& [who, names] : flags)
      for (const std::string& flag : names)
        if (flag != "--help" && !names_flag(section, flag))
          problems += "docs/cli.md: `rope-gen " + who + " " + flag + "` is not in the section of `rope-gen " +
                      command + "`\n";
  }
  EXPECT_TRUE(problems.empty()) << problems;
}

TEST(CliDoc, EveryFlagThePageNamesExists) {
  const std::string text = page();
  ASSERT_FALSE(text.empty()) << "cannot read " << kPage;
  std::set<std::string> known = kOtherToolsFlags;
  const Help top = help_of("");
  for (const std::string& command : top.subcommands) {
    const Help help = help_of(command);
    known.insert(help.long_flags.begin(), help.long_flags.end());
    for (const std::string& sub : help.subcommands) {
      const Help nested = help_of(command + " " + sub);
      known.insert(nested.long_flags.begin(), nested.long_flags.end());
    }
  }
  std::string problems;
  const std::regex flag(R"(--[a-z]([a-z0-9-]*[a-z0-9])?)");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), flag); it != std::sregex_iterator(); ++it)
    if (!known.count(it->str())) problems += "docs/cli.md names `" + it->str() + "`, which no rope-gen command has\n";
  EXPECT_TRUE(problems.empty()) << problems;
}

}  // namespace
}  // namespace ropegen
