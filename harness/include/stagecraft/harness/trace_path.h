// Where each schedule's trace goes when one --trace names several schedules' traces: simulate
// and execute write them by this rule, compare --trace reads them by it.
#pragma once

#include <string>

namespace stagecraft::harness {

// `path` itself for one schedule; "<stem>.<schedule><ext>" when there are several, with any
// character of the schedule's name but letters, digits, '-', '_' and '.' written as '_'.
std::string TracePath(const std::string& path, const std::string& schedule, bool several);

}  // namespace stagecraft::harness
