#include "call/argv_entry.h"

#include <algorithm>
#include <string_view>

#include <fmt/format.h>

namespace ropegen::call {
namespace {

constexpr int kMostArguments = 24;

template <typename ArgumentOf>
int invoke(const ArgvEntry& f, ArgumentOf argument_of) {
  void* argv[kMostArguments];
  for (size_t i = 0; i < f.sources.size(); ++i) argv[i] = argument_of(f.sources[i]);
  return f.argv(argv);
}

halide_buffer_t* raw(RawBuffer& b) { return b.defined() ? b.get() : nullptr; }

// One part: the rope entry, then the pass-through copies. Returns Halide's
// error code (0: success) and the entry that failed.
int run_part(const ArgvEntry& rope, const ArgvEntry* pass_through, BoundPart& part, void* user_context,
             const ArgvEntry** failed) {
  abi::ByTensor<halide_buffer_t*> tensors;
  for (abi::Arg a : abi::kTensorArgs) tensors[a] = raw(part.rope[a]);
  int code = call_rope(rope, tensors, part.rope.scalars, user_context);
  if (code != 0) return *failed = &rope, code;
  for (PassThroughArguments& copy : part.pass_through) {
    code = call_copy(*pass_through, copy.in.get(), copy.out.get(), user_context);
    if (code != 0) return *failed = pass_through, code;
  }
  return 0;
}

}  // namespace

// An entry's __user_context argument, like its scalars, is the address of the value.
int call_rope(const ArgvEntry& rope, const abi::ByTensor<halide_buffer_t*>& tensors, abi::Scalars& scalars,
              void* user_context) {
  scalars[abi::Arg::PoolThreads].i64 = rope.pool_threads ? std::max(rope.pool_threads(), 1) : 1;
  return invoke(rope, [&](const ArgumentSource& s) -> void* {
    if (s.user_context) return &user_context;
    if (abi::is_tensor(*s.arg)) return tensors[*s.arg];
    return &scalars[*s.arg];  // the address of the value (int64 or float, as the entry takes it)
  });
}

int call_copy(const ArgvEntry& copy, halide_buffer_t* in, halide_buffer_t* out, void* user_context) {
  return invoke(copy, [&](const ArgumentSource& s) -> void* {
    if (s.user_context) return &user_context;
    return s.copy_buffer == &PassThroughArguments::in ? in : out;
  });
}

Result<ArgvEntry> resolve_entry(const std::string& where, const std::string& name, ArgvFunction argv,
                                const halide_filter_metadata_t* md, bool pass_through, int (*pool_threads)()) {
  auto error = [&](std::string message) { return named_error(where, std::move(message)); };
  if (!argv || !md) return error(fmt::format("{} has no entry point {}", where, name));
  if (md->version != 1 || md->num_arguments < 1 || md->num_arguments > kMostArguments)
    return error(fmt::format("{}: unexpected Halide metadata for {}", where, name));
  ArgvEntry f;
  f.name = name, f.argv = argv, f.pool_threads = pool_threads;
  for (int i = 0; i < md->num_arguments; ++i) {
    const halide_filter_argument_t& a = md->arguments[i];
    if (a.name && std::string_view(a.name) == "__user_context" && a.kind == halide_argument_kind_input_scalar &&
        a.type.code == halide_type_handle) {
      ArgumentSource context;
      context.user_context = true;
      f.sources.push_back(context);
      continue;
    }
    const std::optional<ArgumentSource> source = pass_through ? pass_through_argument(a.name ? a.name : "")
                                                              : rope_argument(a.name ? a.name : "");
    const bool scalar = a.kind == halide_argument_kind_input_scalar;
    // A scalar of the kind its row says (the address passed is of that type), or a buffer.
    bool fits = source.has_value();
    if (fits && source->arg) {
      const abi::ArgKind kind = abi::info(*source->arg).kind;
      const bool int64 = a.type.code == halide_type_int && a.type.bits == 64;
      const bool float32 = a.type.code == halide_type_float && a.type.bits == 32;
      fits = scalar ? (kind == abi::ArgKind::Int64 && int64) || (kind == abi::ArgKind::Float32 && float32)
                    : abi::is_tensor(*source->arg);
    } else if (fits) {
      fits = !scalar;  // a pass-through copy's buffers
    }
    if (!fits) return error(fmt::format("{}: {} takes an argument `{}` rope-gen does not bind", where, name, a.name));
    f.sources.push_back(*source);
  }
  return f;
}

int run_prepared(const ropegen_contract& kernel_contract, const PreparedCall& call,
                 const halide_device_interface_t* device_interface, const ArgvEntry& rope,
                 const ArgvEntry* pass_through, const ArgvEntry** failed, DeviceLaunch* launch) {
  int code = 0;
  void* user_context = launch ? launch->user_context() : nullptr;
  run_in_parts(call, device_interface, [&](const PartViews& views) {
    if (code != 0) return;
    BoundPart bound = bind_part(kernel_contract, call.variant, views);
    if (launch && !launch->prepare(bound)) {
      launch->release();
      code = -1, *failed = nullptr;
      return;
    }
    code = run_part(rope, pass_through, bound, user_context, failed);
    if (launch) launch->release();
  });
  return code;
}

}  // namespace ropegen::call
