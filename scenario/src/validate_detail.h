// What validate.cpp shares with the scenario's loader. Internal to scenario/src.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "stagecraft/schedules/generators.h"
#include "stagecraft/scenario/validate.h"

namespace stagecraft::sim::detail {

// The problems found so far.
struct Problems {
  std::vector<ScenarioProblem> list;
  void Add(std::string_view key, std::string message) { list.push_back({std::string(key), std::move(message)}); }
  size_t size() const { return list.size(); }
};

// "unknown schedule 'NAME' (known: ..., or a .csv schedule file)"; `alone`: the only one named
// (where `all` would also do).
std::string UnknownSchedule(std::string_view name, bool alone);

}  // namespace stagecraft::sim::detail
