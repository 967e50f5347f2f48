#include "kit_library.h"

#include <dlfcn.h>

#include <map>
#include <stdexcept>

namespace kit {

RunFn load_library(const std::string& dir, const std::string& spec) {
  static std::map<std::string, RunFn> loaded;
  const std::string path = dir + "/libs/" + spec + ".so";
  if (auto it = loaded.find(path); it != loaded.end()) return it->second;
  // RTLD_LOCAL: each library carries its own Halide runtime.
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) throw std::runtime_error("cannot load " + path + ": " + dlerror());
  auto run = reinterpret_cast<RunFn>(dlsym(lib, "kit_run"));
  if (!run) throw std::runtime_error(path + " has no kit_run");
  return loaded[path] = run;
}

}  // namespace kit
