#include "computed_values.h"

#include <cmath>
#include <functional>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "ropegen/rope_math.h"

namespace ropegen::dsl {
namespace {

struct Problem {
  std::string what;  // "inv_freq[1] = inf at seq_len 4097"
  std::string rule;  // what it must be
};

std::optional<Problem> frequency_problem(const std::vector<double>& f, bool zero_allowed) {
  for (size_t i = 0; i < f.size(); ++i)
    if (!(std::isfinite(f[i]) && f[i] <= kMaxInvFreq && (f[i] > 0 || (zero_allowed && f[i] == 0))))
      return Problem{fmt::format("inv_freq[{}] = {}", i, f[i]),
                     fmt::format("every frequency must be finite and in {}0, {}]", zero_allowed ? "[" : "(",
                                 kMaxInvFreq)};
  return std::nullopt;
}

std::optional<Problem> attention_problem(double factor) {
  const float in_kernel = static_cast<float>(factor);
  if (std::isfinite(in_kernel) && in_kernel > 0) return std::nullopt;
  return Problem{fmt::format("attention factor {}", factor), "it must be finite and > 0 as a float32"};
}

// The run-time lengths at which the frequencies are extreme: dynamic NTK's
// theta grows with seq_len from original_max_position on; longrope per_call
// switches from the short to the long list past it. Others do not depend on it.
std::vector<std::optional<int64_t>> seq_len_extremes(const RopeSpec& spec) {
  const Scaling& s = spec.scaling;
  if (s.type != ScalingType::Dynamic && !(s.type == ScalingType::LongRope && s.policy == LongRopePolicy::PerCall))
    return {std::nullopt};
  return {s.original_max_position, s.original_max_position + 1, kMaxPosition + 1};
}

std::optional<Problem> first_problem(const RopeSpec& spec) {
  if (spec.encoding == Encoding::Sinusoidal) return frequency_problem(sinusoidal_frequencies(spec), false);
  // learned and alibi compute nothing from written numbers (slopes depend on num_heads only).
  if (spec.encoding != Encoding::Rope || spec.frequency.scheme == FrequencyScheme::Runtime ||
      spec.frequency.scheme == FrequencyScheme::Table)
    return std::nullopt;
  const bool zero_allowed =
      spec.frequency.scheme == FrequencyScheme::Custom || spec.frequency.scheme == FrequencyScheme::Constant;
  for (const std::optional<int64_t>& seq_len : seq_len_extremes(spec)) {
    const RopeFrequencies f = compute_frequencies(spec, seq_len);
    std::optional<Problem> p = frequency_problem(f.inv_freq, zero_allowed);
    if (!p) p = attention_problem(f.attention_factor);
    if (p && seq_len) p->what += fmt::format(" at seq_len {}", *seq_len);
    if (p) return p;
  }
  return std::nullopt;
}

// A number (or list of numbers) the user wrote that the computed values
// depend on. set(spec, written, n) gives it its first n written values and
// a neutral value elsewhere: one that is fine whatever the other keys say.
struct Suspect {
  const char* section;  // nullptr: top level
  const char* key;
  std::function<void(RopeSpec&, const RopeSpec&, size_t)> set;
  // Whether it is checked on its own with the others neutral, and made
  // neutral when they are checked.
  bool checked_alone = true;
};

template <typename T>
void keep(T& field, const T& written, size_t n, const T& neutral) {
  field = n > 0 ? written : neutral;
}

void keep_first(std::vector<double>& list, const std::vector<double>& written, size_t n) {
  for (size_t i = 0; i < list.size(); ++i) list[i] = i < n ? written[i] : 1.0;
}

// Most specific first: when only a combination is at fault, the first key
// whose neutral value cures the spec is named (factor, a common key, last).
const std::vector<Suspect>& suspects() {
  using S = RopeSpec;
  static const Frequency f;
  static const Scaling sc;
  static const std::optional<double> one = 1.0;
  static const std::vector<Suspect> all = {
      {"frequency", "values",
       [](S& s, const S& w, size_t n) { keep_first(s.frequency.values, w.frequency.values, n); }},
      {"scaling", "short_factor",
       [](S& s, const S& w, size_t n) { keep_first(s.scaling.short_factor, w.scaling.short_factor, n); }},
      {"scaling", "long_factor",
       [](S& s, const S& w, size_t n) { keep_first(s.scaling.long_factor, w.scaling.long_factor, n); }},
      {"scaling", "attention_factor",
       [](S& s, const S& w, size_t n) {
         keep(s.scaling.attention_factor, w.scaling.attention_factor, n, sc.attention_factor);
       }},
      // YaRN uses mscale only with mscale_all_dim: 1 keeps the ratio in place and harmless.
      {"scaling", "mscale", [](S& s, const S& w, size_t n) { keep(s.scaling.mscale, w.scaling.mscale, n, one); }},
      {"scaling", "mscale_all_dim",
       [](S& s, const S& w, size_t n) { keep(s.scaling.mscale_all_dim, w.scaling.mscale_all_dim, n, one); }},
      {"scaling", "beta_fast",
       [](S& s, const S& w, size_t n) { keep(s.scaling.beta_fast, w.scaling.beta_fast, n, sc.beta_fast); }},
      {"scaling", "beta_slow",
       [](S& s, const S& w, size_t n) { keep(s.scaling.beta_slow, w.scaling.beta_slow, n, sc.beta_slow); }},
      {"scaling", "low_freq_factor",
       [](S& s, const S& w, size_t n) {
         keep(s.scaling.low_freq_factor, w.scaling.low_freq_factor, n, sc.low_freq_factor);
       }},
      {"scaling", "high_freq_factor",
       [](S& s, const S& w, size_t n) {
         keep(s.scaling.high_freq_factor, w.scaling.high_freq_factor, n, sc.high_freq_factor);
       }},
      {"frequency", "theta",
       [](S& s, const S& w, size_t n) { keep(s.frequency.theta, w.frequency.theta, n, f.theta); }},
      {"frequency", "max_freq",
       [](S& s, const S& w, size_t n) { keep(s.frequency.max_freq, w.frequency.max_freq, n, f.max_freq); }},
      {"frequency", "value",
       [](S& s, const S& w, size_t n) { keep(s.frequency.value, w.frequency.value, n, f.value); }},
      {nullptr, "base", [](S& s, const S& w, size_t n) { keep(s.base, w.base, n, S{}.base); }},
      // Harmless with a neutral factor, and it sets the seq_len at which the
      // others are checked: only ever suspected of a combination.
      {"scaling", "original_max_position",
       [](S& s, const S& w, size_t n) {
         keep(s.scaling.original_max_position, w.scaling.original_max_position, n, int64_t{4096});
       },
       false},
      {"scaling", "factor", [](S& s, const S& w, size_t n) { keep(s.scaling.factor, w.scaling.factor, n, 1.0); }},
  };
  return all;
}

// The node of a suspect, if the spec writes it.
std::optional<YAML::Node> written_node(const YAML::Node& root, const Suspect& s) {
  const YAML::Node map = s.section ? root[s.section] : root;
  if (!map) return std::nullopt;
  const YAML::Node n = map[s.key];
  if (!n) return std::nullopt;
  return n;
}

class ValueChecker {
 public:
  ValueChecker(const RopeSpec& spec, const YamlDocument& doc) : spec_(spec), doc_(doc) {}

  std::vector<Diagnostic> run() {
    const std::optional<Problem> whole = first_problem(spec_);
    if (!whole) return {};
    std::vector<std::pair<const Suspect*, YAML::Node>> written;
    for (const Suspect& s : suspects())
      if (const std::optional<YAML::Node> n = written_node(doc_.root(), s)) written.emplace_back(&s, *n);
    RopeSpec neutral = spec_;
    for (const auto& [s, n] : written)
      if (s->checked_alone) s->set(neutral, spec_, 0);
    // Keys at fault on their own (every other key neutral): all of them at once.
    std::vector<Diagnostic> errors;
    for (const auto& [s, n] : written)
      if (s->checked_alone)
        if (std::optional<Diagnostic> e = blame(*s, n, neutral)) errors.push_back(*e);
    if (!errors.empty()) return errors;
    // Otherwise a combination: the first key whose neutral value cures the spec.
    for (const auto& [s, n] : written) {
      RopeSpec cured = spec_;
      s->set(cured, spec_, 0);
      if (!first_problem(cured)) return {*blame(*s, n, spec_)};
    }
    return {doc_.error_at(combination_node(), fmt::format("together, the spec's values give {}; {}", whole->what,
                                                          whole->rule))};
  }

 private:
  // The error at suspect s (at node n) when `base` with s's written values
  // has a problem; for a list, at its first entry at fault.
  std::optional<Diagnostic> blame(const Suspect& s, const YAML::Node& n, const RopeSpec& base) const {
    const auto problem_with_first = [&](size_t count) {
      RopeSpec trial = base;
      s.set(trial, spec_, count);
      return first_problem(trial);
    };
    if (!n.IsSequence()) {
      const std::optional<Problem> p = problem_with_first(1);
      if (!p) return std::nullopt;
      return doc_.error_at(n, fmt::format("{} ({}) gives {}; {}", s.key, n.Scalar(), p->what, p->rule));
    }
    if (!problem_with_first(n.size())) return std::nullopt;
    // The shortest written prefix with a problem ends at the entry at fault.
    size_t lo = 1, hi = n.size();
    while (lo < hi) {
      const size_t mid = lo + (hi - lo) / 2;
      if (problem_with_first(mid)) hi = mid;
      else lo = mid + 1;
    }
    const YAML::Node entry = n[lo - 1];
    const std::optional<Problem> p = problem_with_first(lo);
    return doc_.error_at(entry, fmt::format("{}.{}[{}] ({}) gives {}; {}", s.section, s.key, lo - 1, entry.Scalar(),
                                            p->what, p->rule));
  }

  // No single key is at fault: the error goes to the scaling type, else the frequency section.
  YAML::Node combination_node() const {
    const YAML::Node& root = doc_.root();
    if (const YAML::Node s = root["scaling"]) return s["type"];
    if (const YAML::Node f = root["frequency"]) return f;
    return root;
  }

  const RopeSpec& spec_;
  const YamlDocument& doc_;
};

}  // namespace

std::vector<Diagnostic> check_computed_values(const RopeSpec& spec, const YamlDocument& doc) {
  return ValueChecker(spec, doc).run();
}

}  // namespace ropegen::dsl
