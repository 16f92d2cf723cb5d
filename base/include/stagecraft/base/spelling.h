// "Did you mean": the edit distance between two names, and the known name nearest to one a user
// typed, for unknown keys, flags and names in every library.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>

namespace stagecraft {

// Levenshtein distance: the fewest single-character insertions, deletions and substitutions
// that turn `a` into `b`.
size_t EditDistance(std::string_view a, std::string_view b);

// The name of `known` nearest to `word` within `max_edits` (the first of equals), compared as
// they are, or lowered when `ignore_case`; "" when none is that near: a typo, not another name.
std::string NearestName(std::string_view word, std::span<const std::string_view> known, size_t max_edits = 2,
                        bool ignore_case = false);

}  // namespace stagecraft
