#include "parity.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>

#include "compare.h"
#include "kit_call.h"
#include "kit_library.h"
#include "memory.h"

namespace kit {
namespace {

struct SourceStats {
  int cases = 0, host_calls = 0, cuda_calls = 0;
  double host_worst = 0, cuda_worst = 0;  // |err| / tolerance against the float64 reference
  BitDiff cuda_vs_host;                   // summed over the CUDA calls (max_ulp: the worst)
  int failures = 0;
  int cuda_refused = 0;  // calls the host ran and the CUDA entry refused (device rules: 16-byte alignment)
};

using Outputs = std::map<std::string, std::vector<uint8_t>>;

class Checker {
 public:
  Checker(const std::string& dir, const CudaDriver* cuda) : dir_(dir) {
    memories_.push_back(host_memory());
    if (cuda) memories_.push_back(cuda_memory(*cuda));
  }

  void check(const KitCase& c, SourceStats& s) {
    ++s.cases;
    RunFn run;
    try {
      run = load_library(dir_, c.spec);
    } catch (const std::exception& e) {
      return fail(c, s, e.what());
    }
    std::vector<Form> forms = {Form::OutOfPlace};
    if (c.in_place) forms.push_back(Form::InPlace);
    if (c.fused_qkv) forms.push_back(Form::FusedQkv);
    Outputs host_out_of_place;
    for (Form form : forms) {
      Outputs host;
      for (const std::unique_ptr<Memory>& m : memories_) {
        const bool on_host = m->device().device_type == ROPEGEN_DEVICE_CPU;
        Outputs got;
        try {
          KitCall call(run, c, form, *m);
          call.run();
          got = call.outputs();
        } catch (const CallRefused& e) {
          m->release();
          // Device calls have rules host calls do not (ropegen_c.h: q, k and
          // the rotary dims of the outputs start 16-byte aligned): counted
          // and shown, not failed, when the host ran the same call.
          if (on_host || host.empty()) fail(c, s, e.what());
          else if (++s.cuda_refused, ++refused_shown_ <= 5) std::printf("refused on cuda (case %d): %s\n", c.id, e.what());
          continue;
        } catch (const std::exception& e) {
          m->release();
          fail(c, s, e.what());
          continue;
        }
        m->release();
        (on_host ? s.host_calls : s.cuda_calls)++;
        for (const auto& [name, bytes] : got) {
          const ropegen_dtype dtype = c.outputs.at(name).dtype;
          const double worst = worst_error(bytes, c.outputs.at(name), c.truth.at(name));
          double& stat = on_host ? s.host_worst : s.cuda_worst;
          stat = std::max(stat, worst);
          if (!(worst <= 1.0))
            fail(c, s, std::string(to_string(form)) + " on " + m->name() + ": " + name + " is off the float64 reference by " +
                           std::to_string(worst) + " x the tolerance");
          // The same bits as the host's: in every form on the host, in the same form on the device.
          const std::vector<uint8_t>* against = on_host ? (form == Form::OutOfPlace ? nullptr : &host_out_of_place[name])
                                                        : &host[name];
          if (!against || against->empty()) continue;
          const BitDiff d = bit_diff(bytes, *against, dtype);
          if (!on_host) {
            s.cuda_vs_host.elements += d.elements, s.cuda_vs_host.differing += d.differing;
            s.cuda_vs_host.max_ulp = std::max(s.cuda_vs_host.max_ulp, d.max_ulp);
          }
          if (d.differing)
            fail(c, s, std::string(to_string(form)) + " on " + m->name() + ": " + name + ": " + std::to_string(d.differing) +
                           " of " + std::to_string(d.elements) + " elements differ from the host's" +
                           (on_host ? " out-of-place" : "") + " bits (at most " + std::to_string(d.max_ulp) + " ulp)");
        }
        if (on_host) host = got;
      }
      if (form == Form::OutOfPlace) host_out_of_place = host;
    }
  }

 private:
  void fail(const KitCase& c, SourceStats& s, const std::string& what) {
    ++s.failures;
    if (++printed_ <= 20) std::printf("FAIL case %d (%s): %s\n      %s\n", c.id, c.source.c_str(), what.c_str(), c.describe.c_str());
  }

  std::string dir_;
  std::vector<std::unique_ptr<Memory>> memories_;
  int printed_ = 0, refused_shown_ = 0;
};

std::string ratio(double worst) {
  char text[32];
  std::snprintf(text, sizeof text, std::isinf(worst) ? "inf" : "%.3f", worst);
  return text;
}

}  // namespace

int run_parity(const std::string& dir, const std::vector<KitCase>& cases, const CudaDriver* cuda) {
  const auto start = std::chrono::steady_clock::now();
  Checker checker(dir, cuda);
  std::vector<std::string> order;
  std::map<std::string, SourceStats> stats;
  for (const KitCase& c : cases) {
    if (!stats.count(c.source)) order.push_back(c.source);
    checker.check(c, stats[c.source]);
  }
  std::printf("\nParity: each case out of place, in place and as fused qkv views where it takes them.\n"
              "vs f64: the worst |error| / tolerance against the float64 reference (<= 1 passes; the tests' tolerance).\n"
              "cuda vs host: elements whose bits differ from the host kernel's in the same form, and the most ulp.\n"
              "cuda refused: calls the host ran that the CUDA entry refuses by the device rules (16-byte aligned views).\n\n");
  std::printf("| cases from | cases | host calls | host vs f64 | cuda calls | cuda refused | cuda vs f64 | cuda vs host |\n");
  std::printf("|---|---|---|---|---|---|---|---|\n");
  int failures = 0;
  for (const std::string& source : order) {
    const SourceStats& s = stats[source];
    failures += s.failures;
    const std::string bits = !cuda ? "-"
                                   : std::to_string(s.cuda_vs_host.differing) + " of " + std::to_string(s.cuda_vs_host.elements) +
                                         (s.cuda_vs_host.differing ? ", max " + std::to_string(s.cuda_vs_host.max_ulp) + " ulp" : "");
    std::printf("| %s | %d | %d | %s | %d | %d | %s | %s |\n", source.c_str(), s.cases, s.host_calls,
                ratio(s.host_worst).c_str(), s.cuda_calls, s.cuda_refused, cuda ? ratio(s.cuda_worst).c_str() : "-",
                bits.c_str());
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("\n%zu cases, %d failures, %.1f s%s\n", cases.size(), failures, seconds,
              cuda ? "" : "; host only: no CUDA kernel ran");
  return failures ? 1 : 0;
}

}  // namespace kit
