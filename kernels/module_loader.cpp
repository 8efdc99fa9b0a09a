#include "kernels/module_loader.h"

#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <vector>

namespace trainsim::kernels {
namespace {

std::string executable_dir() {
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "";
  const std::string path(buf, static_cast<std::size_t>(n));
  const std::size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash);
}

bool exists(const std::string& path) {
  struct stat st{};
  return ::stat(path.c_str(), &st) == 0;
}

}  // namespace

void* load_module(const ModuleSpec& spec, std::string& why) {
  std::vector<std::string> candidates;
  const char* env = *spec.env != '\0' ? std::getenv(spec.env) : nullptr;
  if (env != nullptr && *env != '\0') {
    candidates.emplace_back(env);
  } else {
    const std::string dir = executable_dir();
    if (!dir.empty()) candidates.push_back(dir + "/" + spec.file);
    if (*spec.build_path != '\0') candidates.emplace_back(spec.build_path);
  }
  std::string looked;
  for (const std::string& path : candidates) {
    if (!exists(path)) {
      looked += (looked.empty() ? "" : ", ") + path;
      continue;
    }
    void* handle = ::dlopen(path.c_str(), RTLD_NOW | (spec.global ? RTLD_GLOBAL : RTLD_LOCAL));
    if (handle == nullptr) {
      const char* e = ::dlerror();
      why = "the module " + path + " cannot be loaded: " + (e != nullptr ? e : "?");
      return nullptr;
    }
    void* entry = ::dlsym(handle, spec.entry);
    if (entry == nullptr) {
      why = "the module " + path + " has no entry point " + spec.entry;
      return nullptr;
    }
    return entry;
  }
  why = std::string("the module ") + spec.file + " is not installed (looked for " + looked + ")";
  return nullptr;
}

}  // namespace trainsim::kernels
