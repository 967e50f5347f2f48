// The Vulkan side of an AOT library with a Vulkan target (linked into its
// archive only then; no Halide: the loader libvulkan.so.1 is dlopened, as
// Halide 21's Vulkan runtime in the same archive does itself).
//
// Halide's Vulkan runtime owns its VkInstance and VkDevice (it cannot adopt
// an application's: halide/Halide#8715) and can only run kernels on buffers
// it allocated (it cannot wrap a foreign VkBuffer: #8943). So a library's
// Vulkan tensors are device buffers its own runtime allocated
// (ropegen_library_device_alloc), and ready() checks, once, before that
// runtime is first used, that there is a device it can use: without one
// Halide 21's runtime fails deep inside (on some paths it aborts the
// process). It also gives that runtime the allocator setting rope-gen's
// JIT sets through HL_VK_ALLOC_CONFIG (runtime/device_call.h): every
// region a multiple of 256 bytes (Halide 21 mis-sizes others:
// halide/Halide#9223) — through the runtime's own setter, so it applies
// to this library's runtime only and changes no environment; a user's
// HL_VK_ALLOC_CONFIG is left to win.
//
// ropegen_vulkan_api (ropegen_c.h's ropegen_device_api) is what the
// generated header points the library at.
#define VK_NO_PROTOTYPES
#include <vulkan/vulkan.h>

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "ropegen/ropegen_c.h"

extern "C" {
const struct halide_device_interface_t* halide_vulkan_device_interface();
void halide_vulkan_set_alloc_config(const char* config);
}

namespace {

bool has_compute_queue(PFN_vkGetPhysicalDeviceQueueFamilyProperties queues, VkPhysicalDevice d) {
  uint32_t n = 0;
  queues(d, &n, nullptr);
  std::vector<VkQueueFamilyProperties> families(n);
  queues(d, &n, families.data());
  for (const auto& f : families)
    if (f.queueCount > 0 && (f.queueFlags & VK_QUEUE_COMPUTE_BIT)) return true;
  return false;
}

bool requested_type(const char* wanted, VkPhysicalDeviceType type) {
  if (std::strstr(wanted, "cpu")) return type == VK_PHYSICAL_DEVICE_TYPE_CPU;
  if (std::strstr(wanted, "integrated-gpu")) return type == VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU;
  if (std::strstr(wanted, "discrete-gpu")) return type == VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU;
  if (std::strstr(wanted, "virtual-gpu")) return type == VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU;
  if (std::strstr(wanted, "gpu"))
    return type == VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU || type == VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU;
  return false;
}

// Why the device Halide 21's runtime would pick (HL_VK_DEVICE_TYPE, else
// the first integrated or discrete GPU with a compute queue, else the
// first device) cannot run rope-gen's kernels; empty: it can.
std::string probe() {
  void* lib = dlopen("libvulkan.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return "the Vulkan loader libvulkan.so.1 cannot be loaded";
  auto get_proc = reinterpret_cast<PFN_vkGetInstanceProcAddr>(dlsym(lib, "vkGetInstanceProcAddr"));
  auto create = get_proc ? reinterpret_cast<PFN_vkCreateInstance>(get_proc(nullptr, "vkCreateInstance")) : nullptr;
  if (!create) return "libvulkan.so.1 lacks vkGetInstanceProcAddr / vkCreateInstance";
  VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO, nullptr, "rope-gen", 1, nullptr, 0, VK_API_VERSION_1_0};
  VkInstanceCreateInfo info{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, nullptr, 0, &app, 0, nullptr, 0, nullptr};
  VkInstance instance = VK_NULL_HANDLE;
  if (create(&info, nullptr, &instance) != VK_SUCCESS)
    return "no Vulkan driver could create an instance (no ICD installed? on the CPU: mesa-vulkan-drivers)";
  auto load = [&](const char* fn) { return get_proc(instance, fn); };
  auto destroy = reinterpret_cast<PFN_vkDestroyInstance>(load("vkDestroyInstance"));
  auto enumerate = reinterpret_cast<PFN_vkEnumeratePhysicalDevices>(load("vkEnumeratePhysicalDevices"));
  auto properties = reinterpret_cast<PFN_vkGetPhysicalDeviceProperties>(load("vkGetPhysicalDeviceProperties"));
  auto features = reinterpret_cast<PFN_vkGetPhysicalDeviceFeatures>(load("vkGetPhysicalDeviceFeatures"));
  auto queues = reinterpret_cast<PFN_vkGetPhysicalDeviceQueueFamilyProperties>(
      load("vkGetPhysicalDeviceQueueFamilyProperties"));
  std::string why = "the Vulkan loader lacks instance functions";
  if (destroy && enumerate && properties && features && queues) {
    uint32_t n = 0;
    enumerate(instance, &n, nullptr);
    std::vector<VkPhysicalDevice> devices(n);
    if (n > 0) enumerate(instance, &n, devices.data());
    devices.resize(n);
    if (devices.empty()) {
      why = "the Vulkan loader found no device";
    } else {
      const char* wanted = std::getenv("HL_VK_DEVICE_TYPE");
      VkPhysicalDevice pick = devices.front();
      for (VkPhysicalDevice d : devices) {
        VkPhysicalDeviceProperties p;
        properties(d, &p);
        const bool match = wanted && *wanted ? requested_type(wanted, p.deviceType)
                                             : p.deviceType == VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU ||
                                                   p.deviceType == VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU;
        if (match && has_compute_queue(queues, d)) {
          pick = d;
          break;
        }
      }
      VkPhysicalDeviceProperties p;
      VkPhysicalDeviceFeatures f;
      properties(pick, &p);
      features(pick, &f);
      // lowering/trig.cpp: the angle and its reduction are float64, the quadrant int64.
      why = f.shaderFloat64 && f.shaderInt64
                ? std::string()
                : std::string("Vulkan device ") + p.deviceName + " lacks " +
                      (!f.shaderFloat64 ? "shaderFloat64" : "shaderInt64") + ", which rope-gen's kernels need";
    }
  }
  if (destroy) destroy(instance, nullptr);
  return why;
}

int ready(int32_t device_id, ropegen_message* message) {
  // Once per process: the answer, and the runtime's allocator setting
  // before its first context.
  static const std::string why = [] {
    if (!std::getenv("HL_VK_ALLOC_CONFIG")) halide_vulkan_set_alloc_config("0:1:0:0:256");
    return probe();
  }();
  if (!why.empty()) {
    if (message) std::snprintf(message->text, sizeof message->text, "vulkan:%d: %s", device_id, why.c_str());
    return ROPEGEN_ERROR_UNSUPPORTED;
  }
  if (device_id != 0) {
    if (message)
      std::snprintf(message->text, sizeof message->text,
                    "vulkan:%d: the library's Vulkan runtime drives one device, vulkan:0 (Halide picks it; "
                    "HL_VK_DEVICE_TYPE chooses)",
                    device_id);
    return ROPEGEN_ERROR_INVALID_ARGUMENT;
  }
  return ROPEGEN_OK;
}

}  // namespace

extern "C" {
extern const ropegen_device_api ropegen_vulkan_api;
const ropegen_device_api ropegen_vulkan_api = {ROPEGEN_DEVICE_VULKAN, halide_vulkan_device_interface, ready};
}
