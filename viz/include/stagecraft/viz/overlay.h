// Predicted vs measured: ops of two traces of the same schedule matched by (rank, op_index),
// aligned at step start, with the disagreement of each.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "stagecraft/viz/trace_set.h"

namespace stagecraft::viz {

struct MatchedOp {
  int predicted = -1;  // index into the predicted trace's ops
  int measured = -1;   // index into the measured trace's ops
  // (measured start − its step's start in the measured trace) − (the same in the predicted
  // trace): traces aligned at the start of every step, so an early step's error does not
  // count again in every later op.
  int64_t start_diff_ns = 0;
  int64_t duration_diff_ns = 0;  // measured duration − predicted duration
  int64_t Disagreement() const;  // |start_diff| + |duration_diff|
};

struct Overlay {
  std::string error;  // non-empty: overlay refused (e.g. different schedules), one line
  // Added to every measured time so both traces start their first step together
  // (measured_aligned = measured − offset_ns).
  int64_t offset_ns = 0;
  std::vector<MatchedOp> matched;  // by predicted op index order
  int unmatched_predicted = 0;
  int unmatched_measured = 0;
  // matched indices sorted by Disagreement(), largest first.
  std::vector<int> by_disagreement;
  // For the measured trace: index of its match in `matched` per measured op (-1: none).
  std::vector<int> match_of_measured;
  std::vector<int> match_of_predicted;
};

// Requires the same schedule name (and rank count); otherwise returns error "cannot overlay:
// predicted is <a>, measured is <b>" (side by side still works).
Overlay MatchTraces(const LoadedTrace& predicted, const LoadedTrace& measured);

}  // namespace stagecraft::viz
