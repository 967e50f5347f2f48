#include "fork_guard.h"

#include "jit_runtime.h"

#include <pthread.h>

#include <condition_variable>
#include <mutex>
#include <new>
#include <vector>

namespace ropegen::runtime {
namespace {

struct Gate {
  std::mutex mutex;
  std::condition_variable changed;  // running fell, or a fork ended
  int running = 0;
  bool forking = false;
  bool jit_pool_guarded = false;
  std::vector<void (*)()> shutdown_pools;  // the JIT runtime's and each loaded object's
};

// Never destroyed: a fork may come during static destruction.
Gate& gate() {
  static Gate* const g = new Gate;
  return *g;
}

void before_fork() {
  Gate& g = gate();
  std::unique_lock<std::mutex> lock(g.mutex);
  g.forking = true;
  g.changed.wait(lock, [&] { return g.running == 0; });
  for (void (*shutdown)() : g.shutdown_pools) shutdown();  // joins the idle workers
  lock.release();  // held across fork(); the handlers below unlock it
}

void after_fork_in_parent() {
  Gate& g = gate();
  g.forking = false;
  g.mutex.unlock();
  g.changed.notify_all();
}

void after_fork_in_child() {
  Gate& g = gate();
  g.forking = false;
  new (&g.changed) std::condition_variable;  // its waiters were the parent's other threads
  g.mutex.unlock();
}

void install_handlers() {
  static std::once_flag once;
  std::call_once(once, [] { pthread_atfork(before_fork, after_fork_in_parent, after_fork_in_child); });
}

}  // namespace

// This thread's guards: only the outermost one counts (an inner one must
// not wait for a fork that waits for the outer one).
thread_local int guards_held = 0;

NotDuringFork::NotDuringFork() {
  if (guards_held++ > 0) return;
  install_handlers();
  Gate& g = gate();
  std::unique_lock<std::mutex> lock(g.mutex);
  g.changed.wait(lock, [&] { return !g.forking; });
  ++g.running;
}

NotDuringFork::~NotDuringFork() {
  if (--guards_held > 0) return;
  Gate& g = gate();
  std::lock_guard<std::mutex> lock(g.mutex);
  if (--g.running == 0) g.changed.notify_all();
}

void guard_thread_pool(void (*shutdown_pool)()) {
  Gate& g = gate();
  std::lock_guard<std::mutex> lock(g.mutex);
  g.shutdown_pools.push_back(shutdown_pool);
}

void guard_jit_thread_pool(const Halide::Target& target) {
  if (target.has_gpu_feature()) return;
  Gate& g = gate();
  std::lock_guard<std::mutex> lock(g.mutex);
  if (g.jit_pool_guarded) return;
  g.jit_pool_guarded = true;
  if (void* shutdown = jit_runtime_export(target, "halide_shutdown_thread_pool"))
    g.shutdown_pools.push_back(reinterpret_cast<void (*)()>(shutdown));
}

}  // namespace ropegen::runtime
