// A fixed set of threads for the benchmarks' own parallel work (the memcpy
// yardstick, the table kernel): created once, then each run() runs chunks
// 0 .. threads - 1 and returns when all are done. The calling thread and
// threads - 1 workers claim chunks in order, so each normally takes one;
// a worker the OS has not scheduled yet does not hold the run up (as in
// Halide's pool, where the caller takes tasks too).
// Workers spin briefly between runs (back-to-back runs start at once), then
// sleep, so they leave the cores to the kernel timed in between.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace ropegen::bench {

class WorkerPool {
 public:
  explicit WorkerPool(int threads);  // threads >= 1
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  int threads() const { return static_cast<int>(workers_.size()) + 1; }
  // fn(0) .. fn(threads - 1), on the pool's threads.
  void run(const std::function<void(int)>& fn);

 private:
  void work();
  void claim_chunks();

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> next_{0}, done_{0};  // the next chunk to claim, chunks done
  std::atomic<const std::function<void(int)>*> job_{nullptr};
  std::atomic<bool> stop_{false};
};

// memcpy of `bytes` split into threads() contiguous chunks (64-byte
// aligned boundaries), each copied by glibc's memcpy on its own thread.
void parallel_copy(WorkerPool& pool, void* dst, const void* src, int64_t bytes);

}  // namespace ropegen::bench
