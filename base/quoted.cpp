// defines: quoted_string (base/quoted.h).
#include "base/quoted.h"

#include <fmt/format.h>

namespace dp {

std::string quoted_string(std::string_view s) {
  std::string q = "\"";
  for (char ch : s) {
    const auto u = static_cast<unsigned char>(ch);
    if (ch == '"' || ch == '\\') q += '\\', q += ch;
    else if (u < 0x20 || u == 0x7F) q += fmt::format("\\u{:04X}", u);
    else q += ch;
  }
  return q + "\"";
}

}  // namespace dp
