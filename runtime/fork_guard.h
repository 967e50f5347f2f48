// fork() while kernels run.
//
// Halide's runtime runs a kernel's parallel loops on a pool of worker
// threads. fork() copies only the calling thread: in the child the JIT
// runtime's pool still counts the parent's workers (one of which may have
// held the pool's lock), so the child's first parallel kernel waits for
// threads that do not exist — a hang. So, on the first kernel run, rope-gen
// registers pthread_atfork handlers that touch only its own state: before a
// fork they wait until no rope-gen kernel is running (new runs wait) and
// shut down the thread pool of the JIT runtime rope-gen's kernels use (it
// restarts on the next run), and the pool of every kernel object loaded
// from the disk cache (each has a runtime of its own, whose
// halide_shutdown_thread_pool it exports): drained is not enough, a worker
// of a drained pool may hold the pool's lock for a moment, and a fork then
// would copy it held (the likely cause of a test's child failing, once in
// about a thousand forks under load). After the fork they let runs go on,
// in the parent and the child.
#pragma once

#include <Halide.h>

namespace ropegen::runtime {

// Held while a kernel runs (run_in_parts), and around any lock a kernel
// run waits on (the JIT kernels' serialising mutex): a fork() waits until
// none is held, so no such lock is copied into the child held. Nests on one
// thread.
class NotDuringFork {
 public:
  NotDuringFork();
  ~NotDuringFork();
  NotDuringFork(const NotDuringFork&) = delete;
  NotDuringFork& operator=(const NotDuringFork&) = delete;
};

// After a JIT kernel for `target` is compiled: its runtime's thread pool is
// shut down before every fork. GPU targets are left alone (their drivers
// do not survive a fork anyway).
void guard_jit_thread_pool(const Halide::Target& target);

// After a kernel object is loaded: `shutdown_pool` (its runtime's
// halide_shutdown_thread_pool) runs before every fork.
void guard_thread_pool(void (*shutdown_pool)());

}  // namespace ropegen::runtime
