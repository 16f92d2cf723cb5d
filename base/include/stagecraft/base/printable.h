// Text from the user (a YAML value, a CSV field, a file name) echoed in a message must not
// drive the terminal: Printable keeps valid UTF-8 and printable ASCII and writes every other
// byte as an escape, so a message is always one line of plain text.
#pragma once

#include <string>
#include <string_view>

namespace stagecraft {

// `text` with newline, carriage return and tab written as the two characters \n, \r and \t,
// every other control byte, DEL and each byte that is not part of a valid UTF-8 sequence as
// \xNN; printable ASCII and valid multi-byte UTF-8 ("µs") are kept as they are.
std::string Printable(std::string_view text);

}  // namespace stagecraft
