// The failure path of SC_CHECK.
#include "stagecraft/base/check.h"

#include <cstdio>
#include <cstdlib>

namespace stagecraft {

void CheckFailed(const char* expr, const char* file, int line, const std::string& msg) {
  std::fprintf(stderr, "stagecraft: internal check failed at %s:%d: %s (%s)\n", file, line, expr, msg.c_str());
  std::abort();
}

}  // namespace stagecraft
