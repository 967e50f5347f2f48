#include "worker_pool.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define ROPEGEN_CPU_RELAX() _mm_pause()
#else
#define ROPEGEN_CPU_RELAX() std::this_thread::yield()
#endif

namespace ropegen::bench {
namespace {
// How long an idle worker spins before it sleeps: longer than the gap between
// two runs of one batch, far shorter than a batch of the other side's runs.
constexpr std::chrono::microseconds kSpin{100};
}  // namespace

WorkerPool::WorkerPool(int threads) {
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { work(); });
}

WorkerPool::~WorkerPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_.store(true, std::memory_order_release);
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void WorkerPool::run(const std::function<void(int)>& fn) {
  if (workers_.empty()) return fn(0);
  const int n = threads();
  done_.store(0, std::memory_order_relaxed);
  job_.store(&fn, std::memory_order_relaxed);
  next_.store(0, std::memory_order_release);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  claim_chunks();
  for (int spins = 0; done_.load(std::memory_order_acquire) != n; ++spins) {
    ROPEGEN_CPU_RELAX();
    if (spins % 1024 == 1023) std::this_thread::yield();
  }
}

// Chunks are claimed in order, so a worker the OS has not woken yet does not
// hold a run up: the threads that are running take its chunk.
void WorkerPool::claim_chunks() {
  const int n = threads();
  for (int i; (i = next_.fetch_add(1, std::memory_order_acq_rel)) < n;) {
    (*job_.load(std::memory_order_acquire))(i);
    done_.fetch_add(1, std::memory_order_acq_rel);
  }
}

void WorkerPool::work() {
  uint64_t seen = 0;
  for (;;) {
    uint64_t now = generation_.load(std::memory_order_acquire);
    const auto until = std::chrono::steady_clock::now() + kSpin;
    while (now == seen && std::chrono::steady_clock::now() < until) {
      ROPEGEN_CPU_RELAX();
      now = generation_.load(std::memory_order_acquire);
    }
    if (now == seen) {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return (now = generation_.load(std::memory_order_acquire)) != seen; });
    }
    seen = now;
    if (stop_.load(std::memory_order_acquire)) return;
    claim_chunks();
  }
}

void parallel_copy(WorkerPool& pool, void* dst, const void* src, int64_t bytes) {
  const int n = pool.threads();
  if (n == 1) {
    std::memcpy(dst, src, bytes);
    return;
  }
  const int64_t chunk = (bytes / n + 63) / 64 * 64;
  pool.run([&](int i) {
    const int64_t begin = std::min(bytes, i * chunk), end = std::min(bytes, begin + chunk);
    if (end > begin) std::memcpy(static_cast<char*>(dst) + begin, static_cast<const char*>(src) + begin, end - begin);
  });
}

}  // namespace ropegen::bench
