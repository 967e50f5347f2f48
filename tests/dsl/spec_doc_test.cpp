// docs/spec.md's key table against the schema (dsl/schema.cpp): every key
// of every encoding, scheme, scaling type and KV-cache layout documented,
// with the schema's type, requiredness and spellings, and nothing
// documented that the schema does not have. So the page cannot drift.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "dsl/schema.h"
#include "support/test_paths.h"

namespace ropegen::dsl {
namespace {

const std::string kPage = ropegen::test::source_path("/docs/spec.md");
const char* const kBegin = "<!-- key table: begin";
const char* const kEnd = "<!-- key table: end";

// One row of the key table: | `path` | in `variant` ... | type | required | `spelling` ... | meaning |
struct DocRow {
  int line = 0;
  std::string path;
  std::vector<std::string> variants;  // empty: every variant of the section
  std::string kind;
  bool required = false;
  std::set<std::string> allowed;
};

std::vector<std::string> backticked(const std::string& cell) {
  std::vector<std::string> out;
  for (size_t open = cell.find('`'); open != std::string::npos; open = cell.find('`', open)) {
    const size_t close = cell.find('`', open + 1);
    if (close == std::string::npos) break;
    out.push_back(cell.substr(open + 1, close - open - 1));
    open = close + 1;
  }
  return out;
}

std::string trimmed(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t");
  const size_t e = s.find_last_not_of(" \t");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

// The cells of a markdown table row; `\|` inside a cell is not a separator.
std::vector<std::string> cells(const std::string& row) {
  std::vector<std::string> out;
  std::string cell;
  for (size_t i = 1; i < row.size(); ++i) {
    if (row[i] == '\\' && i + 1 < row.size() && row[i + 1] == '|') {
      cell += '|';
      ++i;
    } else if (row[i] == '|') {
      out.push_back(trimmed(cell));
      cell.clear();
    } else {
      cell += row[i];
    }
  }
  return out;
}

// "an integer" -> "integer": the page's type column drops the article.
std::string without_article(const std::string& kind) {
  for (const char* article : {"an ", "a "})
    if (kind.rfind(article, 0) == 0) return kind.substr(std::string(article).size());
  return kind;
}

std::vector<DocRow> read_key_table(std::string& problems) {
  std::ifstream in(kPage);
  if (!in) {
    problems += std::string("cannot read ") + kPage + "\n";
    return {};
  }
  std::vector<DocRow> rows;
  std::string line;
  bool inside = false;
  for (int number = 1; std::getline(in, line); ++number) {
    if (line.rfind(kBegin, 0) == 0) inside = true;
    if (line.rfind(kEnd, 0) == 0) inside = false;
    if (!inside || line.rfind("| `", 0) != 0) continue;
    const std::vector<std::string> c = cells(line);
    if (c.size() < 5 || backticked(c[0]).size() != 1) {
      problems += "docs/spec.md:" + std::to_string(number) +
                  ": a key row needs | `key` | in | type | required | values | ...\n";
      continue;
    }
    DocRow row;
    row.line = number;
    row.path = backticked(c[0])[0];
    row.variants = backticked(c[1]);
    row.kind = c[2];
    row.required = c[3] == "yes";
    for (const std::string& s : backticked(c[4])) row.allowed.insert(s);
    rows.push_back(row);
  }
  return rows;
}

std::string where(const SchemaKey& key) {
  return key.variant.empty() ? "`" + key.path + "`" : "`" + key.path + "` (in `" + key.variant + "`)";
}

TEST(SpecDoc, KeyTableListsEverySchemaKeyAsTheSchemaHasIt) {
  std::string problems;
  const std::vector<DocRow> rows = read_key_table(problems);
  ASSERT_FALSE(rows.empty()) << problems << "no key table between `" << kBegin << "` and `" << kEnd << "` in "
                             << kPage;

  // (path, variant) -> the documenting row; a row without variants documents the key in every variant.
  std::map<std::pair<std::string, std::string>, const DocRow*> documented;
  for (const DocRow& row : rows) {
    const std::vector<std::string> variants = row.variants.empty() ? std::vector<std::string>{""} : row.variants;
    for (const std::string& v : variants)
      if (!documented.emplace(std::make_pair(row.path, v), &row).second)
        problems += "docs/spec.md:" + std::to_string(row.line) + ": `" + row.path + "` in `" + v +
                    "` is documented twice\n";
  }

  std::set<std::pair<std::string, std::string>> in_schema;
  for (const SchemaKey& key : schema_keys()) {
    in_schema.insert({key.path, key.variant});
    const auto found = documented.find({key.path, key.variant});
    if (found == documented.end()) {
      problems += where(key) + " is missing from docs/spec.md's key table\n";
      continue;
    }
    const DocRow& row = *found->second;
    const std::string at = "docs/spec.md:" + std::to_string(row.line) + ": " + where(key);
    if (row.kind != without_article(key.kind))
      problems += at + ": type `" + row.kind + "`, the schema says `" + without_article(key.kind) + "`\n";
    if (row.required != key.required)
      problems += at + (key.required ? ": required, the page says not\n" : ": optional, the page says required\n");
    const std::set<std::string> allowed(key.allowed.begin(), key.allowed.end());
    if (row.allowed != allowed) {
      std::ostringstream both;
      both << ": values documented {";
      for (const auto& s : row.allowed) both << " " << s;
      both << " }, the schema allows {";
      for (const auto& s : allowed) both << " " << s;
      both << " }\n";
      problems += at + both.str();
    }
  }
  for (const auto& [key, row] : documented)
    if (!in_schema.count(key))
      problems += "docs/spec.md:" + std::to_string(row->line) + ": `" + key.first + "`" +
                  (key.second.empty() ? "" : " in `" + key.second + "`") + " is not a key the schema has\n";
  EXPECT_TRUE(problems.empty()) << problems;
}

// The walk itself: the table reaches nested sections and their variants.
TEST(SpecDoc, SchemaKeysIncludeNestedVariantKeys) {
  std::set<std::pair<std::string, std::string>> keys;
  for (const SchemaKey& key : schema_keys()) keys.insert({key.path, key.variant});
  EXPECT_TRUE(keys.count({"name", ""}));
  EXPECT_TRUE(keys.count({"head_dim", "rope"}));
  EXPECT_TRUE(keys.count({"frequency.theta", "lang"}));
  EXPECT_TRUE(keys.count({"scaling.beta_fast", "yarn"}));
  EXPECT_TRUE(keys.count({"kv_cache.page_size", "paged_hnd"}));
  EXPECT_FALSE(keys.count({"kv_cache.page_size", "contiguous"}));
  EXPECT_TRUE(keys.count({"axes.sections", ""}));
}

}  // namespace
}  // namespace ropegen::dsl
