#include "runtime/last_dispatch.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

namespace dp {
namespace {
struct Record {
  char name[96] = {};
  const char* type = nullptr;
  const char* pass = nullptr;
};
thread_local Record t_last;
}  // namespace

std::string dispatch_site(const std::string& layer_name, const char* layer_type, const char* pass) {
  return fmt::format("layer '{}' ({}), {}", layer_name, layer_type, pass);
}

void note_dispatch(const std::string& layer_name, const char* layer_type, const char* pass) noexcept {
  const size_t n = std::min(layer_name.size(), sizeof t_last.name - 1);
  std::memcpy(t_last.name, layer_name.data(), n);
  t_last.name[n] = '\0';
  t_last.type = layer_type;
  t_last.pass = pass;
}

std::string last_dispatch() {
  if (t_last.pass == nullptr) return "";
  return dispatch_site(t_last.name, t_last.type, t_last.pass);
}

}  // namespace dp
