// defines: the words of messages: closest_match, the "did you mean" helper for unknown names
// (Levenshtein distance), join, and counted ("1 step", "3 steps").
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace dp {

size_t edit_distance(const std::string& a, const std::string& b);
// The candidate nearest to `word`, or "" when none is reasonably close (distance > max(2, len/2)).
std::string closest_match(const std::string& word, const std::vector<std::string>& candidates);
// "a, b, c"
std::string join(const std::vector<std::string>& items, const std::string& sep = ", ");
// "1 step", "0 steps", "3 steps": n and the noun, plural (noun + "s") unless n is 1.
std::string counted(int64_t n, const std::string& noun);

}  // namespace dp
