// defines: utf8_valid_prefix, the length of the longest valid UTF-8 prefix of a byte string.
//
// Valid means RFC 3629: shortest forms only, no surrogates (U+D800..U+DFFF), nothing above
// U+10FFFF. TOML text must be valid UTF-8, so a value the user gives on the command line is
// checked before it becomes a config string that config.toml would write out.
#pragma once
#include <cstddef>
#include <string_view>

namespace dp {

// The number of leading bytes of s that form whole, valid UTF-8 characters; s.size() when all of
// s is valid.
size_t utf8_valid_prefix(std::string_view s);

inline bool utf8_valid(std::string_view s) { return utf8_valid_prefix(s) == s.size(); }

}  // namespace dp
