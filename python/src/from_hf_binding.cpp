// ropegen.from_hf: a Hugging Face config.json to the normalised spec text
// (include/ropegen/from_hf.h), which ropegen.compile takes as it is. Errors
// are ValueErrors with the library's messages (the key named).
#include <optional>
#include <string>

#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include "ropegen/from_hf.h"
#include "ropegen/spec_io.h"

namespace nb = nanobind;

namespace ropegen::python {
namespace {

FromHfOptions options_of(std::optional<std::string> name, std::optional<std::string> layer_type,
                         std::optional<std::string> pairing, bool vision) {
  FromHfOptions o;
  o.name = std::move(name);
  o.layer_type = std::move(layer_type);
  if (pairing) {
    if (*pairing != "half" && *pairing != "interleaved")
      throw nb::value_error(("pairing must be \"half\" or \"interleaved\", not \"" + *pairing + "\"").c_str());
    o.pairing = *pairing == "half" ? Pairing::Half : Pairing::Interleaved;
  }
  o.vision = vision;
  return o;
}

std::string yaml_or_raise(const Result<RopeSpec>& spec) {
  if (!spec) throw nb::value_error(format(spec.errors()).c_str());
  return to_yaml(*spec);
}

}  // namespace

void bind_from_hf(nb::module_& m) {
  m.def(
      "from_hf",
      [](const std::string& json_text, const std::string& source, std::optional<std::string> name,
         std::optional<std::string> layer_type, std::optional<std::string> pairing, bool vision) {
        return yaml_or_raise(from_hf(json_text, options_of(name, layer_type, pairing, vision), source));
      },
      nb::arg("json_text"), nb::arg("source"), nb::arg("name").none(), nb::arg("layer_type").none(),
      nb::arg("pairing").none(), nb::arg("vision"));
  m.def(
      "from_hf_file",
      [](const std::string& path, std::optional<std::string> name, std::optional<std::string> layer_type,
         std::optional<std::string> pairing, bool vision) {
        return yaml_or_raise(from_hf_file(path, options_of(name, layer_type, pairing, vision)));
      },
      nb::arg("path"), nb::arg("name").none(), nb::arg("layer_type").none(), nb::arg("pairing").none(),
      nb::arg("vision"));
}

}  // namespace ropegen::python
