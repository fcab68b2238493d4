// defines: the libFuzzer target of the config parser (runtime/config.h): the input is a cfg file,
// optionally followed by "\n--\n" and one --set override per line. Parsing may throw UserError
// (one clear line), never crash or read garbage; a config that parses round-trips through its
// resolved TOML.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "base/error.h"
#include "runtime/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string in(reinterpret_cast<const char*>(data), size);
  const size_t split = in.find("\n--\n");
  const std::string text = in.substr(0, split);
  std::vector<std::string> overrides;
  if (split != std::string::npos) {
    size_t start = split + 4;
    while (start <= in.size()) {
      const size_t nl = in.find('\n', start);
      overrides.push_back(in.substr(start, nl == std::string::npos ? std::string::npos : nl - start));
      if (nl == std::string::npos) break;
      start = nl + 1;
    }
  }
  dp::Config c;
  try {
    c = dp::parse_config(text, "fuzz.cfg", overrides);
  } catch (const dp::UserError&) {
    return 0;
  }
  const std::string resolved = dp::to_toml(c);
  try {
    // The same file name: the resolved text's first line names its source.
    if (dp::to_toml(dp::parse_config(resolved, "fuzz.cfg", {})) != resolved) std::abort();
  } catch (const dp::UserError&) {
    std::abort();  // the resolved config of a valid one must parse
  }
  return 0;
}
