// fork() while another thread runs JIT kernels (runtime/fork_guard.h): the
// child runs a kernel and exits; before the guard it hung on the JIT
// runtime's thread pool. Each child has an alarm, so a regression fails
// (killed by SIGALRM) instead of hanging the suite.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <thread>

#include "ropegen/runtime.h"
#include "ropegen/spec_io.h"
#include "runtime/tensor_view.h"

namespace ropegen {
namespace {

struct Tensors {
  std::vector<int64_t> shape = {4, 256, 8, 64};
  std::vector<float> q, out;
  runtime::RopeCall call;
  Tensors() : q(4 * 256 * 8 * 64), out(q.size()) {
    for (size_t i = 0; i < q.size(); ++i) q[i] = static_cast<float>(i % 97) / 97.0f;
    call.q = runtime::logical_tensor(q.data(), Halide::Float(32), Layout::BSHD, shape, runtime::dense_strides(shape));
    call.out_q = runtime::logical_tensor(out.data(), Halide::Float(32), Layout::BSHD, shape, runtime::dense_strides(shape));
    call.seq_len = 256;
  }
};

TEST(Fork, ChildRunsJitKernelWhileParentThreadRunsOne) {
  // No disk level: the kernel is a JIT kernel in memory, shared by the threads.
  Runtime runtime(RuntimeOptions{});
  const RopeSpec spec = parse_spec("name: forked\nhead_dim: 64\n", "forked").value();
  std::shared_ptr<runtime::Kernel> kernel = runtime.get(spec, {}).value();
  Tensors expected;
  kernel->run(expected.call);

  std::atomic<bool> stop{false};
  std::thread runner([&] {
    Tensors busy;
    while (!stop) kernel->run(busy.call);
  });
  for (int i = 0; i < 20; ++i) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      alarm(20);
      Tensors mine;
      kernel->run(mine.call);
      _exit(mine.out == expected.out ? 0 : 3);
    }
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status)) << "child " << i << " killed by signal " << WTERMSIG(status)
                                   << (WTERMSIG(status) == SIGALRM ? " (hung: SIGALRM after 20 s)" : "");
    ASSERT_EQ(WEXITSTATUS(status), 0) << "child " << i << ": 3 = wrong result";
  }
  stop = true;
  runner.join();
}

}  // namespace
}  // namespace ropegen
