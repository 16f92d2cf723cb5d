// TracePath (trace_path.h): one file name per schedule beside the one given.
#include "stagecraft/harness/trace_path.h"

namespace stagecraft::harness {

std::string TracePath(const std::string& path, const std::string& name, bool several) {
  if (!several) return path;
  // A schedule file's name may hold a folder ("orders/v.csv"): one file name of it.
  std::string schedule = name;
  for (char& c : schedule) {
    const bool safe = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
                      c == '_' || c == '.';
    if (!safe) c = '_';
  }
  const size_t dot = path.rfind('.');
  const size_t slash = path.rfind('/');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) return path + "." + schedule;
  return path.substr(0, dot) + "." + schedule + path.substr(dot);
}

}  // namespace stagecraft::harness
