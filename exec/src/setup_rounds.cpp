// Set-up rounds (setup_rounds.h).
#include "stagecraft/exec/setup_rounds.h"

namespace stagecraft::exec {

SetupRounds::SetupRounds(Transport& transport) : transport_(transport), last_(std::chrono::steady_clock::now()) {}

void SetupRounds::Beat() {
  if (std::chrono::steady_clock::now() - last_ < kBeatInterval) return;
  ++rounds_;
  transport_.EveryRank(false);
  last_ = std::chrono::steady_clock::now();
}

void SetupRounds::Finish() {
  do {
    ++rounds_;
  } while (!transport_.EveryRank(true));
  last_ = std::chrono::steady_clock::now();
}

}  // namespace stagecraft::exec
