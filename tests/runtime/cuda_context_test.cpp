// runtime/cuda_context: what runs without a GPU. The per-call handlers of a
// CudaCallContext reach Halide 21's CUDA runtime (it asks them for the
// context before it loads the driver), and libcuda.so.1 is found for
// Halide's "libcuda.so". With a CUDA device the same pipeline runs for real
// in the device's primary context.
#include <gtest/gtest.h>

#include <dlfcn.h>

#include <Halide.h>

#include "runtime/cuda_context.h"
#include "runtime/cuda_driver.h"
#include "runtime/device_probe.h"

namespace ropegen {
namespace {

// A CudaCallContext whose acquire handler counts its calls and what it hands out.
struct Recording : runtime::CudaCallContext {
  Recording(void* context, void* stream) : CudaCallContext(context, stream) {
    acquire = handlers.custom_cuda_acquire_context;
    handlers.custom_cuda_acquire_context = [](Halide::JITUserContext* c, void** context, bool create) {
      auto* self = static_cast<Recording*>(c);
      const int32_t result = self->acquire(c, context, create);
      self->acquired++;
      self->handed_out = *context;
      return result;
    };
  }
  int32_t (*acquire)(Halide::JITUserContext*, void**, bool) = nullptr;
  int acquired = 0;
  void* handed_out = nullptr;
};

TEST(CudaCallContext, HalidesCudaRuntimeAsksItForTheContext) {
  const Result<Halide::Target> device = runtime::runnable_target("cuda");
  if (!device && std::holds_alternative<runtime::CudaDriver>(runtime::cuda_driver()))
    GTEST_SKIP() << "a CUDA driver without a usable device: a stand-in context would reach it";
  runtime::find_libcuda_so_1();
  // Without a driver, a stand-in: Halide fails to load the driver right after asking for it.
  void* context = device ? runtime::primary_context(0) : reinterpret_cast<void*>(uintptr_t{0x1000});
  const Halide::Target target = device ? *device : Halide::get_host_target().with_feature(Halide::Target::CUDA);

  Halide::Func f("f");
  Halide::Var x("x"), xo("xo"), xi("xi");
  f(x) = x * 3;
  f.gpu_tile(x, xo, xi, 32);
  Halide::Pipeline p(f);
  p.compile_jit(target);
  Halide::Buffer<int32_t> out(64);
  Recording recording(context, nullptr);
  if (device) {
    p.realize(&recording, out, target);
    ASSERT_EQ(out.copy_to_host(&recording), 0);
    for (int i = 0; i < 64; ++i) EXPECT_EQ(out(i), 3 * i);
  } else {
    EXPECT_THROW(p.realize(&recording, out, target), Halide::RuntimeError) << "no driver here";
  }
  EXPECT_GE(recording.acquired, 1) << "Halide's CUDA runtime did not ask the call's context";
  EXPECT_EQ(recording.handed_out, context);
}

TEST(FindLibcudaSo1, LoadsLikeHalidesDefaultAndLibcudaSo1ForLibcudaSo) {
  runtime::find_libcuda_so_1();
  using Halide::Internal::JITSharedRuntime;
  const Halide::JITHandlers defaults = JITSharedRuntime::set_default_handlers({});
  JITSharedRuntime::set_default_handlers(defaults);
  ASSERT_NE(defaults.custom_load_library, nullptr);
  EXPECT_EQ(defaults.custom_load_library("libm.so.6"), dlopen("libm.so.6", RTLD_LAZY));
  EXPECT_EQ(defaults.custom_load_library("librope-gen-no-such-library.so"), nullptr);
  void* so = dlopen("libcuda.so", RTLD_LAZY);
  EXPECT_EQ(defaults.custom_load_library("libcuda.so"), so ? so : dlopen("libcuda.so.1", RTLD_LAZY));
}

}  // namespace
}  // namespace ropegen
