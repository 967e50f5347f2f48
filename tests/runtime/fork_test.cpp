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

namespace ropegen {
namespace {

struct Tensors {
  std::vector<int64_t> shape = {4, 256, 8, 64};
  std::vector<float> q, out;
  Call call;
  Tensors() : q(4 * 256 * 8 * 64), out(q.size()) {
    for (size_t i = 0; i < q.size(); ++i) q[i] = static_cast<float>(i % 97) / 97.0f;
    call.q = Tensor::dense(q.data(), ElementType::Float32, {4, 256, 8, 64});
    call.out_q = Tensor::dense(out.data(), ElementType::Float32, {4, 256, 8, 64});
    call.seq_len = 256;
  }
};

TEST(Fork, ChildRunsJitKernelWhileParentThreadRunsOne) {
  // No disk level: the kernel is a JIT kernel in memory, shared by the threads.
  Runtime runtime(RuntimeOptions{});
  const RopeSpec spec = parse_spec("name: forked\nhead_dim: 64\n", "forked").value();
  std::shared_ptr<Kernel> kernel = runtime.get(spec, {}).value();
  Tensors expected;
  ASSERT_TRUE(kernel->run(expected.call).ok());

  std::atomic<bool> stop{false};
  std::thread runner([&] {
    Tensors busy;
    while (!stop) (void)kernel->run(busy.call);
  });
  for (int i = 0; i < 20; ++i) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      alarm(20);
      Tensors mine;
      const bool ran = kernel->run(mine.call).ok();
      _exit(ran && mine.out == expected.out ? 0 : 3);
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
