// The short human formats of sizes and durations in summaries, tables and messages ("1.50 KiB",
// "12.3 ms"), for every library.
#pragma once

#include <cstdint>
#include <string>

namespace stagecraft {

// "512 B", "1.50 KiB", "80.00 GiB": binary units, two decimals above one KiB.
std::string FormatBytes(int64_t bytes);

// "300 ns", "2.00 us", "12.3 ms", "150 ms", "1.50 s": three significant digits.
std::string FormatDuration(int64_t ns);

}  // namespace stagecraft
