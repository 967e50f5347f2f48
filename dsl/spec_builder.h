// Builds the typed RopeSpec from a schema-valid document: fills defaults and
// checks ranges and cross-field consistency, each error at its own node.
#pragma once

#include "ropegen/result.h"
#include "ropegen/spec.h"
#include "ropegen/spec_io.h"
#include "yaml_document.h"

namespace ropegen::dsl {

Result<RopeSpec> build_spec(const YamlDocument& doc, const SpecDefaults& defaults);

}  // namespace ropegen::dsl
