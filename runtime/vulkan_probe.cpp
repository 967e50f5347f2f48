// Vulkan through the loader alone (libvulkan.so.1), choosing the device as
// Halide 21's runtime does (vulkan_context.h: HL_VK_DEVICE_TYPE, else the
// first integrated or discrete GPU with a compute queue, else the first
// device), and checking what the kernels need of it.
#define VK_NO_PROTOTYPES
#include <vulkan/vulkan.h>

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "runtime/gpu_probes.h"
#include "targets/aot/device_hooks/vulkan_device_choice.h"

namespace ropegen::runtime {
namespace {

// Halide 21's Vulkan allocator mis-sizes buffers that are not a multiple
// of the device's alignment (64 bytes on lavapipe/RADV; fixed upstream,
// halide/Halide#9223): rope-gen pads every device buffer to this.
constexpr int64_t kBufferSizeMultiple = 256;

struct Api {
  PFN_vkGetInstanceProcAddr get_proc = nullptr;
  PFN_vkCreateInstance create_instance = nullptr;
  PFN_vkDestroyInstance destroy_instance = nullptr;
  PFN_vkEnumeratePhysicalDevices enumerate = nullptr;
  PFN_vkGetPhysicalDeviceProperties properties = nullptr;
  PFN_vkGetPhysicalDeviceFeatures features = nullptr;
  PFN_vkGetPhysicalDeviceQueueFamilyProperties queues = nullptr;
};

Halide::Target::Feature version_feature(uint32_t api_version) {
  const uint32_t minor = VK_API_VERSION_MINOR(api_version);
  if (VK_API_VERSION_MAJOR(api_version) > 1 || minor >= 3) return Halide::Target::VulkanV13;
  if (minor >= 2) return Halide::Target::VulkanV12;
  return Halide::Target::VulkanV10;
}

ProbeResult describe(const Api& api, VkPhysicalDevice d) {
  VkPhysicalDeviceProperties p;
  VkPhysicalDeviceFeatures f;
  api.properties(d, &p);
  api.features(d, &f);
  const std::string name = fmt::format("Vulkan device {}", p.deviceName);
  // lowering/trig.cpp: the angle and its reduction are float64, the quadrant int64.
  if (!f.shaderFloat64 || !f.shaderInt64)
    return fmt::format("{} lacks {}, which the float64 angle reduction needs", name,
                       !f.shaderFloat64 ? "shaderFloat64" : "shaderInt64");
  DeviceInfo info;
  info.description = name;
  info.max_buffer_bytes = p.limits.maxStorageBufferRange;
  info.max_token_blocks = p.limits.maxComputeWorkGroupCount[0];
  info.max_batch_blocks = p.limits.maxComputeWorkGroupCount[2];
  info.buffer_size_multiple = kBufferSizeMultiple;
  info.offset_alignment = static_cast<int64_t>(std::max<VkDeviceSize>(1, p.limits.minStorageBufferOffsetAlignment));
  info.version_feature = version_feature(p.apiVersion);
  return info;
}

}  // namespace

ProbeResult probe_vulkan() {
  void* lib = dlopen("libvulkan.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) lib = dlopen("libvulkan.so", RTLD_NOW | RTLD_LOCAL);
  if (!lib)
    return std::string("the Vulkan loader libvulkan.so.1 cannot be loaded (Debian: apt-get install libvulkan1 "
                       "mesa-vulkan-drivers, the latter for lavapipe on the CPU)");
  Api api;
  api.get_proc = reinterpret_cast<PFN_vkGetInstanceProcAddr>(dlsym(lib, "vkGetInstanceProcAddr"));
  if (!api.get_proc) return std::string("libvulkan.so.1 lacks vkGetInstanceProcAddr");
  api.create_instance = reinterpret_cast<PFN_vkCreateInstance>(api.get_proc(nullptr, "vkCreateInstance"));
  if (!api.create_instance) return std::string("the Vulkan loader does not provide vkCreateInstance");

  VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO, nullptr, "rope-gen", 1, nullptr, 0, VK_API_VERSION_1_0};
  VkInstanceCreateInfo create{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, nullptr, 0, &app, 0, nullptr, 0, nullptr};
  VkInstance instance = VK_NULL_HANDLE;
  if (const VkResult r = api.create_instance(&create, nullptr, &instance); r != VK_SUCCESS)
    return fmt::format("no Vulkan driver could create an instance (VkResult {}{})", static_cast<int>(r),
                       r == VK_ERROR_INCOMPATIBLE_DRIVER ? ": no Vulkan driver (ICD) is installed; on the CPU, "
                                                           "apt-get install mesa-vulkan-drivers"
                                                         : "");
  auto load = [&](const char* fn) { return api.get_proc(instance, fn); };
  api.destroy_instance = reinterpret_cast<PFN_vkDestroyInstance>(load("vkDestroyInstance"));
  api.enumerate = reinterpret_cast<PFN_vkEnumeratePhysicalDevices>(load("vkEnumeratePhysicalDevices"));
  api.properties = reinterpret_cast<PFN_vkGetPhysicalDeviceProperties>(load("vkGetPhysicalDeviceProperties"));
  api.features = reinterpret_cast<PFN_vkGetPhysicalDeviceFeatures>(load("vkGetPhysicalDeviceFeatures"));
  api.queues = reinterpret_cast<PFN_vkGetPhysicalDeviceQueueFamilyProperties>(
      load("vkGetPhysicalDeviceQueueFamilyProperties"));
  ProbeResult result = std::string("the Vulkan loader lacks instance functions");
  if (api.destroy_instance && api.enumerate && api.properties && api.features && api.queues) {
    uint32_t n = 0;
    api.enumerate(instance, &n, nullptr);
    std::vector<VkPhysicalDevice> devices(n);
    if (n > 0) api.enumerate(instance, &n, devices.data());
    devices.resize(n);
    result = devices.empty() ? ProbeResult(std::string("the Vulkan loader found no device (install a driver; on the CPU, "
                                                        "mesa-vulkan-drivers provides lavapipe)"))
                             : describe(api, ropegen::vulkan::halide_device_choice(devices, api.properties, api.queues));
  }
  if (api.destroy_instance) api.destroy_instance(instance, nullptr);
  return result;
}

}  // namespace ropegen::runtime
