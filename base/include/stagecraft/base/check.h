// Always-on invariant checks: a broken invariant is a bug in stagecraft, not bad input, so it
// prints where and what, then aborts (bad input is an InputError instead, see error.h).
#pragma once

#include <string>

namespace stagecraft {

[[noreturn]] void CheckFailed(const char* expr, const char* file, int line, const std::string& msg);

}  // namespace stagecraft

#define SC_CHECK(cond, msg)                                                  \
  do {                                                                       \
    if (!(cond)) ::stagecraft::CheckFailed(#cond, __FILE__, __LINE__, (msg)); \
  } while (0)
