#include "yaml_document.h"

#include <string>

#include <yaml-cpp/depthguard.h>

#include "own_stack.h"

namespace ropegen::dsl {

YamlDocument::YamlDocument(YAML::Node root, std::string file, std::string_view text)
    : root_(std::move(root)), file_(std::move(file)) {
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string line(text.substr(start, end - start));
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines_.push_back(std::move(line));
    start = end + 1;
  }
}

Diagnostic YamlDocument::error_at(int line, int column, std::string message) const {
  Diagnostic d{{file_, line, column}, std::move(message), {}};
  if (line >= 0 && line < static_cast<int>(lines_.size())) d.source_line = lines_[line];
  return d;
}

Diagnostic YamlDocument::error_at(const YAML::Node& node, std::string message) const {
  const YAML::Mark mark = node.Mark();
  return error_at(mark.line, mark.column, std::move(message));
}

Result<YamlDocument> parse_yaml(std::string_view text, const std::string& file) {
  // yaml-cpp recurses once per nesting level until its guard stops it (about
  // 1000 levels): some 200 KiB of stack, more than a small thread may have.
  constexpr size_t kParserStackBytes = size_t{4} << 20;
  // yaml-cpp reports errors by exception; they stop here and become values.
  try {
    YAML::Node root;
    run_with_stack(kParserStackBytes, [&] { root = YAML::Load(std::string(text)); });
    return YamlDocument(std::move(root), file, text);
  } catch (const YAML::DeepRecursion& e) {
    // yaml-cpp's own guard against stack overflow (its message says "bad file").
    YamlDocument doc(YAML::Node(), file, text);
    return doc.error_at(e.mark.line, e.mark.column, "invalid YAML: nested too deeply (a spec needs 3 levels)");
  } catch (const YAML::Exception& e) {
    YamlDocument doc(YAML::Node(), file, text);
    return doc.error_at(e.mark.line, e.mark.column, "invalid YAML: " + e.msg);
  }
}

}  // namespace ropegen::dsl
