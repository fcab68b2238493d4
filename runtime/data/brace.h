// defines: expand_braces, the shard-name patterns of WebDataset (the braceexpand package):
// "train-{000000..000146}.tar" -> train-000000.tar ... train-000146.tar (zero-padded to the width
// of the first number), "{a,b,c}" -> each alternative, several groups -> every combination in
// order (the first group varies slowest). Text without braces is one name.
#pragma once
#include <string>
#include <vector>

namespace dp::data {

// Throws UserError naming the pattern for an unclosed brace, an empty range or a range of more
// than 10 million names.
std::vector<std::string> expand_braces(const std::string& pattern);

}  // namespace dp::data
