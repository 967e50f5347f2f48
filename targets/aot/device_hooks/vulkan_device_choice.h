// The Vulkan device Halide 21's runtime picks (its vulkan_context.h):
// HL_VK_DEVICE_TYPE's type when set, else the first integrated or discrete
// GPU with a compute queue, else the first device. rope-gen checks that
// device before Halide's runtime first runs, in the JIT
// (runtime/vulkan_probe.cpp) and in AOT libraries (vulkan_hooks.cpp): one
// copy of the rule for both. Header-only: the hooks link no rope-gen library.
#pragma once

#define VK_NO_PROTOTYPES
#include <vulkan/vulkan.h>

#include <cstdlib>
#include <cstring>
#include <vector>

namespace ropegen::vulkan {

inline bool has_compute_queue(PFN_vkGetPhysicalDeviceQueueFamilyProperties queues, VkPhysicalDevice d) {
  uint32_t n = 0;
  queues(d, &n, nullptr);
  std::vector<VkQueueFamilyProperties> families(n);
  queues(d, &n, families.data());
  for (const auto& f : families)
    if (f.queueCount > 0 && (f.queueFlags & VK_QUEUE_COMPUTE_BIT)) return true;
  return false;
}

inline bool matches_requested_type(const char* wanted, VkPhysicalDeviceType type) {
  if (std::strstr(wanted, "cpu")) return type == VK_PHYSICAL_DEVICE_TYPE_CPU;
  if (std::strstr(wanted, "integrated-gpu")) return type == VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU;
  if (std::strstr(wanted, "discrete-gpu")) return type == VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU;
  if (std::strstr(wanted, "virtual-gpu")) return type == VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU;
  if (std::strstr(wanted, "gpu"))
    return type == VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU || type == VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU;
  return false;
}

// `devices` is not empty.
inline VkPhysicalDevice halide_device_choice(const std::vector<VkPhysicalDevice>& devices,
                                             PFN_vkGetPhysicalDeviceProperties properties,
                                             PFN_vkGetPhysicalDeviceQueueFamilyProperties queues) {
  const char* wanted = std::getenv("HL_VK_DEVICE_TYPE");
  for (VkPhysicalDevice d : devices) {
    VkPhysicalDeviceProperties p;
    properties(d, &p);
    const bool match = wanted && *wanted ? matches_requested_type(wanted, p.deviceType)
                                         : p.deviceType == VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU ||
                                               p.deviceType == VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU;
    if (match && has_compute_queue(queues, d)) return d;
  }
  return devices.front();
}

}  // namespace ropegen::vulkan
