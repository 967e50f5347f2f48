#include "kit_call.h"

#include <cstring>
#include <stdexcept>

#include "abi/arguments.h"

namespace kit {
namespace {

// The pattern the fused buffer's v slice holds: a call that writes outside
// q's and k's views changes it.
constexpr uint8_t kUntouched = 0x5a;

// The C call's field for a tensor argument named in a case file (the
// argument table's names).
const ropegen_tensor** field(ropegen_call& call, const std::string& name) {
  const std::optional<ropegen::abi::Arg> a = ropegen::abi::argument_named(name);
  if (!a || !ropegen::abi::info(*a).c_tensor)
    throw std::runtime_error("the kit's runner does not know the argument " + name);
  return &(call.*ropegen::abi::info(*a).c_tensor);
}

// ropegen_c.h's status names (ropegen_status_string lives inside each library).
const char* status_name(int status) {
  switch (status) {
    case ROPEGEN_ERROR_INVALID_ARGUMENT: return "invalid argument";
    case ROPEGEN_ERROR_UNSUPPORTED: return "unsupported";
    case ROPEGEN_ERROR_KERNEL: return "kernel failure";
    case ROPEGEN_ERROR_OUT_OF_MEMORY: return "out of memory";
  }
  return "unknown status";
}

}  // namespace

const char* to_string(Form f) {
  switch (f) {
    case Form::OutOfPlace: return "out of place";
    case Form::InPlace: return "in place";
    case Form::FusedQkv: return "fused qkv";
  }
  return "?";
}

KitCall::KitCall(RunFn run, const KitCase& c, Form form, Memory& memory) : run_(run), memory_(memory), form_(form) {
  const TensorData& q = c.inputs.at("q");
  element_bytes_ = dtype_bytes(q.dtype);
  if (form == Form::FusedQkv) place_fused(c);
  std::map<std::string, Placed> placed;
  for (const auto& [name, t] : c.inputs) {
    if (form == Form::FusedQkv && (name == "q" || name == "k")) continue;
    placed[name] = upload(t);
    *field(call_, name) = tensor(placed[name].data, t);
  }
  for (const auto& [name, like] : c.outputs) {
    written_like_[name] = like;
    const bool rotated = name == "out_q" || name == "out_k";
    if (rotated && form == Form::FusedQkv) continue;  // read back from the fused buffer
    if (rotated && form == Form::InPlace) {
      written_[name] = placed.at(name == "out_q" ? "q" : "k");
      continue;
    }
    Placed p{memory_.allocate(like.size_in_bytes()), like.size_in_bytes()};
    memory_.fill(p.data, 0xff, p.bytes);
    written_[name] = p;
    *field(call_, name) = tensor(p.data, like);
  }
  call_.offset = c.offset;
  call_.seq_len = c.seq_len;
  call_.backward = c.backward;
  call_.q_scale = c.q_scale, call_.k_scale = c.k_scale;
  call_.stream = memory_.stream();
  bytes_moved_ = 2 * static_cast<int64_t>(q.size_in_bytes() + (c.inputs.count("k") ? c.inputs.at("k").size_in_bytes() : 0));
}

ropegen_tensor* KitCall::tensor(void* data, const TensorData& like, const int64_t* strides) {
  shapes_.push_back(like.shape);
  ropegen_tensor& t = tensors_.emplace_back();
  t.data = data;
  t.device = memory_.device();
  t.ndim = static_cast<int32_t>(like.shape.size());
  t.dtype = like.dtype;
  t.shape = shapes_.back().data();
  if (strides) {
    strides_.emplace_back(strides, strides + like.shape.size());
    t.strides = strides_.back().data();
  }
  return &t;
}

KitCall::Placed KitCall::upload(const TensorData& t) {
  Placed p{memory_.allocate(t.bytes.size()), t.bytes.size()};
  memory_.upload(p.data, t.bytes.data(), p.bytes);
  return p;
}

void KitCall::place_fused(const KitCase& c) {
  const TensorData& q = c.inputs.at("q");
  const TensorData& k = c.inputs.at("k");
  const size_t rank = q.shape.size();
  q_row_ = q.shape[rank - 2] * q.shape[rank - 1];
  k_row_ = k.shape[rank - 2] * k.shape[rank - 1];
  fused_row_ = q_row_ + 2 * k_row_;  // q, k, v per token
  tokens_ = q.elements() / q_row_;
  const size_t eb = element_bytes_;
  std::vector<uint8_t> fused(static_cast<size_t>(tokens_ * fused_row_) * eb, kUntouched);
  for (int64_t t = 0; t < tokens_; ++t) {
    std::memcpy(&fused[t * fused_row_ * eb], &q.bytes[t * q_row_ * eb], q_row_ * eb);
    std::memcpy(&fused[(t * fused_row_ + q_row_) * eb], &k.bytes[t * k_row_ * eb], k_row_ * eb);
  }
  fused_ = {memory_.allocate(fused.size()), fused.size()};
  memory_.upload(fused_.data, fused.data(), fused.size());
  // Strides of a [..., H, D] view into rows of fused_row_ elements.
  auto view = [&](const TensorData& like, int64_t first) {
    std::vector<int64_t> strides(rank);
    strides[rank - 1] = 1;
    strides[rank - 2] = like.shape[rank - 1];
    int64_t outer = fused_row_;
    for (size_t i = rank - 2; i-- > 0;) strides[i] = outer, outer *= like.shape[i];
    return tensor(static_cast<uint8_t*>(fused_.data) + first * eb, like, strides.data());
  };
  call_.q = view(q, 0);
  call_.k = view(k, q_row_);
}

void KitCall::run() {
  ropegen_message message;
  if (const int status = run_(&call_, &message); status != ROPEGEN_OK) {
    const std::string what = std::string(to_string(form_)) + " on " + memory_.name() + ": " + status_name(status) + ": " + message.text;
    if (status == ROPEGEN_ERROR_INVALID_ARGUMENT) throw CallRefused(what);
    throw std::runtime_error(what);
  }
}

std::map<std::string, std::vector<uint8_t>> KitCall::outputs() {
  memory_.synchronize();
  std::map<std::string, std::vector<uint8_t>> out;
  for (const auto& [name, p] : written_) {
    std::vector<uint8_t>& bytes = out[name];
    bytes.resize(p.bytes);
    memory_.download(bytes.data(), p.data, p.bytes);
  }
  if (form_ != Form::FusedQkv) return out;
  std::vector<uint8_t> fused(fused_.bytes);
  memory_.download(fused.data(), fused_.data, fused_.bytes);
  const size_t eb = element_bytes_;
  std::vector<uint8_t>& q = out["out_q"];
  std::vector<uint8_t>& k = out["out_k"];
  q.resize(tokens_ * q_row_ * eb), k.resize(tokens_ * k_row_ * eb);
  for (int64_t t = 0; t < tokens_; ++t) {
    std::memcpy(&q[t * q_row_ * eb], &fused[t * fused_row_ * eb], q_row_ * eb);
    std::memcpy(&k[t * k_row_ * eb], &fused[(t * fused_row_ + q_row_) * eb], k_row_ * eb);
    for (size_t i = (t * fused_row_ + q_row_ + k_row_) * eb; i < (t + 1) * fused_row_ * eb; ++i)
      if (fused[i] != kUntouched)
        throw std::runtime_error(std::string("fused qkv on ") + memory_.name() + ": the call wrote into v's columns");
  }
  return out;
}

}  // namespace kit
