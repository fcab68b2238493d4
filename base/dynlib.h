// defines: DynLib, a shared library opened at run time (dlopen), so the binary runs where it is
// absent; its symbols looked up by name.
#pragma once
#include <dlfcn.h>

#include <string>
#include <vector>

namespace dp {

class DynLib {
 public:
  // Global: the library's symbols resolve later loads' (PMIx loads its own plugins, which resolve
  // symbols of the library itself). Local: they stay private to it (MKL, whose cblas_sgemm must not
  // take the place of OpenBLAS's, which the binary links).
  enum class Scope { Global, Local };
  // Tries each name in turn; handle() is null when none loads (error() then says why).
  explicit DynLib(const std::vector<std::string>& names, Scope scope = Scope::Global) {
    for (const auto& n : names) {
      handle_ = ::dlopen(n.c_str(), RTLD_NOW | (scope == Scope::Global ? RTLD_GLOBAL : RTLD_LOCAL));
      if (handle_) {
        name_ = n;
        return;
      }
      const char* e = ::dlerror();
      error_ += (error_.empty() ? "" : "; ") + std::string(e ? e : n + ": not found");
    }
  }
  // Never dlclose'd: the libraries keep threads and atexit handlers of their own.
  DynLib(const DynLib&) = delete;
  DynLib& operator=(const DynLib&) = delete;
  void* handle() const { return handle_; }
  const std::string& name() const { return name_; }
  const std::string& error() const { return error_; }
  // The symbol as a function pointer of type F, or nullptr.
  template <class F>
  F sym(const char* symbol) const {
    return handle_ ? reinterpret_cast<F>(::dlsym(handle_, symbol)) : nullptr;
  }

 private:
  void* handle_ = nullptr;
  std::string name_, error_;
};

}  // namespace dp
