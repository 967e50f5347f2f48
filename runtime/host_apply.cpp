#include "runtime/host_apply.h"

#include <fmt/format.h>

#include "ropegen/runtime.h"
#include "runtime/host_tensor.h"

namespace ropegen::runtime {
namespace {

using abi::Arg;

Tensor dense(void* data, ElementType type, const std::vector<int64_t>& shape) {
  return Tensor::dense(data, type, shape.data(), static_cast<int>(shape.size()));
}

// Whether an output is made for this request: out_k when k is rotated into
// it, the summed gradients (d_freqs, the qk_norm weights') for backward
// calls that give what they are the gradient of (freqs, the weights),
// out_scales for output_quant specs.
bool made(const RopeSpec& spec, Arg output, const ApplyRequest& r) {
  if (!r[abi::info(output).like]) return false;
  if (output == Arg::OutK) return r.out_k;
  if (output == Arg::OutScales) return spec.output_quant.enabled;
  if (output == Arg::DKNormWeight && !r[Arg::K]) return false;
  if (abi::is_summed_gradient(output)) return r.backward;
  return true;
}

}  // namespace

HostArray HostArray::of_floats(std::vector<int64_t> shape, std::vector<float> values) {
  HostArray a;
  a.shape = std::move(shape), a.type = ElementType::Float32, a.floats = std::move(values);
  return a;
}

HostArray HostArray::of_ids(std::vector<int64_t> shape, std::vector<int64_t> values, bool int64) {
  HostArray a;
  a.shape = std::move(shape), a.type = int64 ? ElementType::Int64 : ElementType::Int32, a.ints = std::move(values);
  return a;
}

HostArray HostArray::of_codes(std::vector<int64_t> shape, std::vector<uint8_t> codes) {
  HostArray a;
  a.shape = std::move(shape), a.type = ElementType::UInt8, a.codes = std::move(codes);
  return a;
}

int64_t HostArray::elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// Everything the call points into, one slot per argument; allocated once,
// never moved.
struct HostCall::Storage {
  struct Slot {
    std::optional<HostStorage> stored;  // in the spec's (or the cache's) dtype
    std::vector<float> floats;          // float32 as it came
    std::vector<int32_t> ints32;
    std::vector<int64_t> ints64;
    std::vector<uint8_t> codes;
    std::vector<int64_t> shape;
  };
  abi::ByTensor<Slot> slots;
};

HostCall::HostCall() : storage_(std::make_unique<Storage>()) {}
HostCall::~HostCall() = default;

Result<std::unique_ptr<HostCall>> HostCall::make(const RopeSpec& spec, const ApplyRequest& r) {
  std::unique_ptr<HostCall> host(new HostCall());
  Call& call = host->call_;
  for (Arg a : abi::kTensorArgs) {
    const abi::ArgumentInfo& row = abi::info(a);
    Storage::Slot& slot = host->storage_->slots[a];
    std::optional<Tensor>& into = call.*row.call_tensor;
    if (row.direction == abi::Direction::Out) {
      if (!made(spec, a, r)) continue;
      slot.shape = r[row.like]->shape;
      if (a == Arg::OutScales) slot.shape.back() = spec.head_dim / spec.output_quant.group;
      int64_t elements = 1;
      for (int64_t d : slot.shape) elements *= d;
      if (row.dtype == abi::DtypeRule::Float32) {
        slot.floats.assign(static_cast<size_t>(elements), 0.0f);
        into = dense(slot.floats.data(), ElementType::Float32, slot.shape);
      } else if (row.dtype == abi::DtypeRule::Output && spec.has_fp8_output()) {
        slot.codes.assign(static_cast<size_t>(r[row.like]->elements()), 0);
        into = dense(slot.codes.data(), ElementType::UInt8, slot.shape);
      } else {
        slot.stored.emplace(spec.dtype, static_cast<size_t>(r[row.like]->elements()));
        into = dense(slot.stored->data(), slot.stored->element_type(), slot.shape);
      }
      continue;
    }
    if (!r[a]) continue;
    const HostArray& in = *r[a];
    slot.shape = in.shape;
    const bool ints = in.type == ElementType::Int32 || in.type == ElementType::Int64;
    switch (row.dtype) {
      case abi::DtypeRule::Spec:
      case abi::DtypeRule::Output:         // (an input only in a mistaken call, which the checks refuse)
      case abi::DtypeRule::SpecOrFloat32:  // the spec's, as every float the CLI reads
        slot.stored = to_storage(in.floats, spec.dtype);
        into = dense(slot.stored->data(), slot.stored->element_type(), slot.shape);
        break;
      case abi::DtypeRule::Float32:
        slot.floats = in.floats;
        into = dense(slot.floats.data(), ElementType::Float32, slot.shape);
        break;
      case abi::DtypeRule::KvCache:
        if (in.type == ElementType::UInt8) {  // fp8 codes, as they are
          slot.codes = in.codes;
          into = dense(slot.codes.data(), ElementType::UInt8, slot.shape);
        } else {
          slot.stored = to_storage(in.floats, spec.kv_cache.float_dtype());
          into = dense(slot.stored->data(), slot.stored->element_type(), slot.shape);
        }
        break;
      case abi::DtypeRule::Ids:
      case abi::DtypeRule::Int32:
        if (!ints) return named_error(row.name, fmt::format("{} must be integers", row.name));
        // Ids are read in the width they came in (the kernel variant follows
        // it); cache indices are int32.
        if (row.dtype == abi::DtypeRule::Ids && in.type == ElementType::Int64) {
          slot.ints64 = in.ints;
          into = dense(slot.ints64.data(), ElementType::Int64, slot.shape);
          break;
        }
        for (int64_t x : in.ints) {
          if (x < INT32_MIN || x > INT32_MAX)
            return named_error(row.name, row.dtype == abi::DtypeRule::Int32
                                             ? fmt::format("{} holds {}, which does not fit int32 (cache indices are "
                                                           "int32)",
                                                           row.name, x)
                                             : fmt::format("{} {} does not fit int32 ids; pass them as int64",
                                                           a == Arg::Positions ? "position id" : row.name, x));
          slot.ints32.push_back(static_cast<int32_t>(x));
        }
        into = dense(slot.ints32.data(), ElementType::Int32, slot.shape);
        break;
      case abi::DtypeRule::Scalar: break;
    }
  }
  call.offset = r.offset;
  call.seq_len = r.seq_len;
  call.q_scale = r.q_scale, call.k_scale = r.k_scale, call.v_scale = r.v_scale;
  call.backward = r.backward;
  return host;
}

ApplyResult HostCall::results() const {
  ApplyResult result;
  for (Arg a : abi::kTensorArgs) {
    const Storage::Slot& slot = storage_->slots[a];
    if (abi::info(a).direction == abi::Direction::In || !(call_.*abi::info(a).call_tensor)) continue;
    if ((call_.*abi::info(a).call_tensor)->type == ElementType::UInt8)
      result[a] = HostArray::of_codes(slot.shape, slot.codes);
    else
      result[a] = HostArray::of_floats(slot.shape, slot.stored ? slot.stored->to_float() : slot.floats);
  }
  return result;
}

Result<ApplyResult> apply_on_host(const RopeSpec& spec, const ApplyRequest& r) {
  Result<std::unique_ptr<HostCall>> host = HostCall::make(spec, r);
  if (!host) return host.errors();
  if (Status s = Runtime::process().run(spec, (*host)->call(), r.target); !s) return s.errors();
  return (*host)->results();
}

}  // namespace ropegen::runtime
