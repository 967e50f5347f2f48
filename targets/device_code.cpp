#include "device_code.h"

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "targets/schedule.h"

namespace ropegen::targets {

Result<std::string> cuda_ptx(const RopeSpec& spec, const lowering::KernelVariant& variant, const Halide::Target& target,
                             bool pass_through) {
  const Diagnostic not_cuda{{"target", -1, -1}, fmt::format("target `{}` is not a CUDA target", target.to_string()), {}};
  if (!target.has_feature(Halide::Target::CUDA)) return not_cuda;
  try {
    Halide::Module module = [&] {
      if (pass_through) {
        lowering::PassThroughCopy copy = lowering::build_pass_through_copy(spec);
        schedule_pass_through(copy, spec, target);
        return Halide::Pipeline(copy.output).compile_to_module({copy.input}, spec.name + "_pass_through", target);
      }
      lowering::RopeAlgorithm a = scheduled_algorithm(spec, variant, target);
      return Halide::Pipeline(a.outputs()).compile_to_module(a.arguments(), spec.name + "_rope", target);
    }();
    const Halide::Buffer<> ptx = module.get_cuda_ptx_assembly_buffer();
    if (!ptx.defined()) return named_error("target", "Halide produced no PTX for " + spec.name);
    std::string text(static_cast<const char*>(ptx.data()), ptx.size_in_bytes());
    text.erase(text.find_last_not_of('\0') + 1);  // the buffer ends in NULs
    return text;
  } catch (const Halide::CompileError& e) {
    return named_error("target",
                       fmt::format("Halide cannot compile {} for {}: {}", spec.name, target.to_string(), e.what()));
  }
}

Result<std::string> pipeline_code(const RopeSpec& spec, const lowering::KernelVariant& variant,
                                  const Halide::Target& target, PipelineCode kind) {
  if (kind == PipelineCode::Assembly && target.has_gpu_feature())
    return named_error("target", fmt::format("target `{}` is not a CPU target", target.to_string()));
  namespace fs = std::filesystem;
  // Halide writes these outputs to files only.
  std::error_code ec;
  static std::atomic<int> calls{0};
  const fs::path dir = fs::temp_directory_path(ec) / fmt::format("rope-gen-code-{}-{}", getpid(), calls++);
  fs::create_directories(dir, ec);
  const fs::path file = dir / (kind == PipelineCode::Assembly ? "rope.s" : "rope.stmt");
  try {
    lowering::RopeAlgorithm a = scheduled_algorithm(spec, variant, target);
    const Halide::Module module =
        Halide::Pipeline(a.outputs()).compile_to_module(a.arguments(), spec.name + "_rope", target.with_feature(Halide::Target::NoRuntime));
    module.compile({{kind == PipelineCode::Assembly ? Halide::OutputFileType::assembly : Halide::OutputFileType::stmt, file.string()}});
  } catch (const Halide::CompileError& e) {
    fs::remove_all(dir, ec);
    return named_error("target",
                       fmt::format("Halide cannot compile {} for {}: {}", spec.name, target.to_string(), e.what()));
  }
  std::stringstream text;
  text << std::ifstream(file).rdbuf();
  fs::remove_all(dir, ec);
  return text.str();
}

}  // namespace ropegen::targets
