// Validation: every problem in a schedule, not only the first. Checks that each
// (stage, microbatch, step) has exactly one F and either one B or one I+W pair, in a legal
// order on the rank its stage lives on; that every version read exists and is produced
// before it is read; that SEND/RECV pairs match (peers, FIFO order per channel); and that
// the dependency graph is acyclic (Boost.Graph), reporting a cycle as a deadlock with the
// ops on it.
#pragma once

#include <atomic>
#include <cstddef>
#include <string>
#include <vector>

#include "stagecraft/schedules/ir.h"

namespace stagecraft::schedules {

enum class DiagCode {
  kBadShape,        // shape / microbatch counts out of range
  kWrongRank,       // op on a rank its stage does not live on
  kBadIndex,        // stage / microbatch / step out of range
  kMissing,         // a required F / backward / SEND / RECV / STEP is absent
  kDuplicate,       // the same op appears twice
  kMixedBackward,   // both B and I/W for one microbatch
  kOrder,           // B before F, W before I, RECV after its consumer, read before STEP ...
  kVersion,         // version read that no STEP produces, or B reads another version than F
  kCommMismatch,    // SEND/RECV peer wrong, unmatched, or out of FIFO order on its channel
  kDeadlock,        // cycle in the dependency graph
};
std::string_view DiagCodeName(DiagCode code);

struct Diagnostic {
  DiagCode code;
  // One line that names the ops by rank, index and action string; it never starts with the
  // code's own name, which a reader prints before it ("deadlock: cycle of 4 ops: ...").
  std::string message;
};

// `stop`, when set by another thread, ends the checks early: it throws StopRequested (base/stop.h).
std::vector<Diagnostic> Validate(const Schedule& schedule, const std::atomic<bool>* stop = nullptr);

// How many diagnostics SummarizeDiagnostics writes out before "and K more".
inline constexpr size_t kSummarizedDiagnostics = 3;

// `diags` (not empty) as one line for an error message: "N problem(s): CODE: message; CODE:
// message; ...", the first `shown` of them, then "; and K more".
std::string SummarizeDiagnostics(const std::vector<Diagnostic>& diags, size_t shown = kSummarizedDiagnostics);

}  // namespace stagecraft::schedules
