// Set-up outside every deadline: while ranks build their runs (data, stages, reserved memory)
// at different speeds, a rank that is done waits only as long as its peers show no progress.
// Builders call Beat() between pieces of work; a rank that is done calls Finish(), which joins
// rounds until every rank is done. Each round is one collective over all ranks
// (Transport::EveryRank, under the transport's deadline), so a peer that is still building
// holds a round open for at most one piece of its work plus kBeatInterval, however long its
// whole set-up takes, and a hung peer still runs into the deadline.
#pragma once

#include <chrono>
#include <cstdint>

#include "stagecraft/exec/transport.h"

namespace stagecraft::exec {

class SetupRounds {
 public:
  // How often a builder joins a round: often enough that a waiting peer sees progress well
  // within any deadline (`--timeout` is at least 1 µs, but a useful one is seconds), rarely
  // enough that the rounds cost nothing next to the work.
  static constexpr std::chrono::milliseconds kBeatInterval{100};

  explicit SetupRounds(Transport& transport);

  // Between two pieces of this rank's set-up: joins a round (as not done) once kBeatInterval
  // has passed since this object's last round. A test hook slows one rank's set-up down:
  // with STAGECRAFT_TEST_SLOW_SETUP=RANK:MS in the environment, rank RANK sleeps MS ms in each
  // Beat, as if each piece of its work took that much longer.
  void Beat();
  // This rank's set-up is done: joins rounds until every rank's is. Throws TimeoutError when a
  // round does not complete within the deadline (a peer hung, or one piece of its set-up took
  // that long).
  void Finish();

  int rounds() const { return rounds_; }  // joined so far, for tests

 private:
  Transport& transport_;
  std::chrono::milliseconds slow_{0};  // the test hook's delay on this rank
  std::chrono::steady_clock::time_point last_;
  int rounds_ = 0;
};

}  // namespace stagecraft::exec
