// What the fuzz harnesses share: the input as text, and its harness lines (lines that start
// with a marker, e.g. "#set " for a scenario's --set overrides), so corpus files stay readable.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace stagecraft::fuzz {

inline std::string_view AsText(const uint8_t* data, size_t size) {
  return std::string_view(reinterpret_cast<const char*>(data), size);
}

// The rest of every line of `text` that starts with `marker`, in order.
inline std::vector<std::string> MarkedLines(std::string_view text, std::string_view marker) {
  std::vector<std::string> found;
  for (size_t start = 0; start < text.size();) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(start, end - start);
    if (line.starts_with(marker)) found.emplace_back(line.substr(marker.size()));
    start = end + 1;
  }
  return found;
}

}  // namespace stagecraft::fuzz
