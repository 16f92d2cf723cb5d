// Atomic file output: nothing is ever half-written. The text goes to a temporary file in the
// same folder, which is renamed over the target only once it is complete.
#pragma once

#include <string>
#include <string_view>

namespace stagecraft {

// Throws InputError naming the path when it cannot be written (the temporary is removed).
void WriteTextFileAtomically(const std::string& path, std::string_view text);

}  // namespace stagecraft
