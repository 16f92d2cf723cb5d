// Bad user input (flags, CSV, JSON, YAML, traces): an exception whose message already says
// where the input came from (file:line:col or file: key) and what was expected. Commands
// catch it once at the top, print it as one line and exit non-zero.
#pragma once

#include <stdexcept>

namespace stagecraft {

class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace stagecraft
