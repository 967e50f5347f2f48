// ropegen.explain: `rope-gen explain --json` for a spec text
// (include/ropegen/rope_explain.h), the numbers ropegen.plot draws. The
// kernel's precision column comes from the process's Runtime, as the CLI's.
#include <optional>
#include <string>

#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include "ropegen/rope_explain.h"
#include "ropegen/runtime.h"
#include "ropegen/spec_io.h"
#include "runtime/kernel_table.h"

namespace nb = nanobind;

namespace ropegen::python {

void bind_explain(nb::module_& m) {
  m.def(
      "explain",
      [](const std::string& text, const std::string& source, std::optional<int64_t> max_pos,
         std::optional<int64_t> seq_len, bool kernel, bool precision) {
        const Result<RopeSpec> spec = parse_spec(text, source);
        if (!spec) throw nb::value_error(format(spec.errors()).c_str());
        ExplainOptions options;
        options.max_pos = max_pos;
        options.seq_len = seq_len;
        options.precision = precision;
        if (kernel)
          options.kernel_table = [&spec](const std::vector<int64_t>& positions, int64_t len) {
            return runtime::kernel_table(Runtime::process(), *spec, positions, len);
          };
        Result<Explanation> e = [&] {
          nb::gil_scoped_release unlocked;  // seconds of work, none of it Python's
          return explain(*spec, options);
        }();
        if (!e) throw nb::value_error(format(e.errors()).c_str());
        return explanation_json(*e);
      },
      nb::arg("text"), nb::arg("source"), nb::arg("max_pos").none(), nb::arg("seq_len").none(), nb::arg("kernel"),
      nb::arg("precision"));
}

}  // namespace ropegen::python
