// defines: quoted_string, a string in double quotes that reads back as itself both as a JSON
// string and as a TOML basic string (one line): '"' and '\' escaped with a backslash, the control
// characters (below U+0020, and DEL) as \u00XX, every other byte as it is. For names written into
// JSON (`dptrain memory --json`) and keys written into config.toml.
#pragma once
#include <string>
#include <string_view>

namespace dp {

std::string quoted_string(std::string_view s);

}  // namespace dp
