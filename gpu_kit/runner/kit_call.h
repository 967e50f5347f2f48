// One call of a kit library on some Memory, in one of the forms the checks
// compare: out of place, in place (q and k overwritten), or in place on q
// and k as column slices of one fused qkv buffer (strided views, as vLLM
// and SGLang pass them). Inputs are uploaded once; run() may repeat (the
// bench), outputs() downloads what the call wrote.
#pragma once

#include <deque>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "kit_case.h"
#include "kit_library.h"
#include "memory.h"

namespace kit {

enum class Form { OutOfPlace, InPlace, FusedQkv };

// A call the library refused as an invalid argument (ROPEGEN_ERROR_INVALID_ARGUMENT).
class CallRefused : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
const char* to_string(Form f);

class KitCall {
 public:
  // Outputs are filled with 0xff bytes (NaN) before the first run.
  KitCall(RunFn run, const KitCase& c, Form form, Memory& memory);
  KitCall(const KitCall&) = delete;
  KitCall& operator=(const KitCall&) = delete;

  // One call on memory's stream; throws std::runtime_error with the
  // library's message when it returns an error.
  void run();
  // out_q, out_k, d_freqs as the call wrote them (dense, storage bytes).
  std::map<std::string, std::vector<uint8_t>> outputs();
  // Bytes the call reads and writes at least once (q, k in and out): the bench's yardstick.
  int64_t bytes_moved() const { return bytes_moved_; }
  const ropegen_call& call() const { return call_; }

 private:
  struct Placed {
    void* data = nullptr;
    size_t bytes = 0;
  };
  ropegen_tensor* tensor(void* data, const TensorData& like, const int64_t* strides = nullptr);
  Placed upload(const TensorData& t);
  void place_fused(const KitCase& c);

  RunFn run_;
  Memory& memory_;
  Form form_;
  ropegen_call call_{};
  std::deque<ropegen_tensor> tensors_;            // stable addresses for call_
  std::deque<std::vector<int64_t>> shapes_, strides_;
  std::map<std::string, Placed> written_;         // where each output lands
  std::map<std::string, TensorData> written_like_;
  // FusedQkv: the fused buffer, its row (elements) and q's / k's place in it.
  Placed fused_;
  int64_t fused_row_ = 0, tokens_ = 0, q_row_ = 0, k_row_ = 0;
  int element_bytes_ = 0;
  int64_t bytes_moved_ = 0;
};

}  // namespace kit
