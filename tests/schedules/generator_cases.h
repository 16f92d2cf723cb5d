// Test helpers for the schedule tests: generator parameters in one call, and every generator
// over small shapes it accepts (ranks 1, 2, 4; microbatches 1, 4, 8; steps 1, 2; chunks 2 for
// interleaved, else 1) for the round-trip tests.
#pragma once

#include <string>
#include <vector>

#include "stagecraft/schedules/generators.h"

namespace stagecraft::schedules::test_cases {

inline GeneratorParams Params(int ranks, int microbatches, int steps = 1, int chunks = 1) {
  GeneratorParams p;
  p.ranks = ranks;
  p.microbatches = microbatches;
  p.steps = steps;
  p.chunks = chunks;
  return p;
}

// A list's action strings, space separated ("0F0 0OFFLOAD_ACT0 0F1 ..."): the oracle a
// hand-worked list is written in.
inline std::string Actions(const std::vector<Op>& ops, int microbatches) {
  std::string out;
  for (const Op& op : ops) out += (out.empty() ? "" : " ") + ActionString(op, microbatches);
  return out;
}

struct GeneratorCase {
  const GeneratorInfo* info;
  GeneratorParams params;
};

inline std::vector<GeneratorCase> SmallGeneratorCases() {
  std::vector<GeneratorCase> cases;
  for (const GeneratorInfo& info : Generators()) {
    for (int ranks : {1, 2, 4}) {
      for (int microbatches : {1, 4, 8}) {
        for (int steps : {1, 2}) {
          GeneratorParams p;
          p.ranks = ranks;
          p.microbatches = microbatches;
          p.steps = steps;
          p.chunks = info.interleaved ? 2 : 1;
          if (info.check(p).empty()) cases.push_back({&info, p});
        }
      }
    }
  }
  return cases;
}

}  // namespace stagecraft::schedules::test_cases
