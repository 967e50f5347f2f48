// The public API (include/ropegen/from_hf.h) over the importers.
#include "ropegen/from_hf.h"

#include <fmt/format.h>

#include "hf_config.h"
#include "hf_json.h"

namespace ropegen {

Result<RopeSpec> from_hf(std::string_view config_json, const FromHfOptions& options, const std::string& file) {
  if (config_json.size() > hf::kMaxHfConfigBytes)
    return named_error(file, fmt::format("is {} bytes; a model config is at most {} bytes", config_json.size(),
                                         hf::kMaxHfConfigBytes));
  Result<nlohmann::json> config = hf::parse_hf_config(std::string(config_json), file);
  if (!config) return config.errors();
  Result<hf::HfImport> import = hf::import_hf(*config, file, options);
  if (!import) return import.errors();
  return import->spec;
}

Result<RopeSpec> from_hf_file(const std::string& path, const FromHfOptions& options) {
  Result<hf::HfConfigFile> file = hf::read_hf_config(path);
  if (!file) return file.errors();
  Result<hf::HfImport> import = hf::import_hf(file->config, file->path, options);
  if (!import) return import.errors();
  return import->spec;
}

}  // namespace ropegen
