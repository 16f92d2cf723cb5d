// Set-up rounds (setup_rounds.h).
#include "stagecraft/exec/setup_rounds.h"

#include <cstdio>
#include <cstdlib>
#include <thread>

namespace stagecraft::exec {
namespace {

// STAGECRAFT_TEST_SLOW_SETUP=RANK:MS: MS on rank RANK, else 0.
std::chrono::milliseconds SlowSetup(int rank) {
  const char* value = std::getenv("STAGECRAFT_TEST_SLOW_SETUP");
  int slow_rank = -1, ms = 0;
  if (value == nullptr || std::sscanf(value, "%d:%d", &slow_rank, &ms) != 2 || slow_rank != rank || ms < 0) {
    return std::chrono::milliseconds(0);
  }
  return std::chrono::milliseconds(ms);
}

}  // namespace

SetupRounds::SetupRounds(Transport& transport)
    : transport_(transport), slow_(SlowSetup(transport.rank())), last_(std::chrono::steady_clock::now()) {}

void SetupRounds::Beat() {
  if (slow_.count() > 0) std::this_thread::sleep_for(slow_);
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
