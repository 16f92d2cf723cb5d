// Edit distance and the nearest known name (spelling.h).
#include "stagecraft/base/spelling.h"

#include <algorithm>
#include <cctype>
#include <vector>

namespace stagecraft {

size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string NearestName(std::string_view word, std::span<const std::string_view> known, size_t max_edits,
                        bool ignore_case) {
  const auto folded = [&](std::string_view text) {
    std::string out(text);
    if (ignore_case) {
      for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
    return out;
  };
  const std::string w = folded(word);
  std::string_view best;
  size_t best_distance = max_edits + 1;
  for (std::string_view candidate : known) {
    const size_t d = EditDistance(w, folded(candidate));
    if (d < best_distance) best = candidate, best_distance = d;
  }
  return std::string(best);
}

}  // namespace stagecraft
