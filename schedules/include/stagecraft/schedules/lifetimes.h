// The one lifetime analysis over one rank's op list (DESIGN.md §2, §10).
// - Weight versions: per local stage and version, the STEP that produces it, its readers and last
//   reader, and the STEP that replaces it as the newest. The IR's analysis takes its peaks from
//   it, the simulator's memory model its readers, the executor's weight store when a version is
//   freed and whether a STEP updates in place.
// - Activation intervals: per stage-microbatch, the op that stashes its activations and the op
//   that frees them, and likewise Zero Bubble's weight-gradient stash (each kind's MemoryEffect,
//   op_kinds.h, says which ops open and close them). The IR's analysis (PeakHeld, the in-flight
//   and pending-W peaks), the search's memory floor and the simulator's stash depths read them;
//   the simulator's memory model applies the same effects at the ops' simulated times.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "stagecraft/schedules/ir.h"

namespace stagecraft::schedules {

// One version of one stage; positions are indices in the rank's op list, -1 for none.
struct VersionLife {
  int produced_at = -1;           // its STEP; -1 for version 0, there from the start
  int last_read_at = -1;          // the last op reading it (weights.h VersionRead: a STEP reads its base)
  int last_compute_read_at = -1;  // the last F, B, I or W reading it
  int compute_readers = 0;        // how many F, B, I and W read it
  int replaced_at = -1;           // the STEP after which a newer version is the newest; -1: never
};

class WeightLifetimes {
 public:
  // The versions of every stage with ops on `rank` (ops of a stage out of range are left out).
  WeightLifetimes(const Schedule& schedule, int rank);

  // By version, those of `stage` this rank's ops produce or read (empty for a stage without ops
  // here; versions in between that none names are default lives).
  const std::vector<VersionLife>& Of(int stage) const;
  // Calls fn(stage, lives) for every stage with ops on the rank, in no particular order.
  template <typename Fn>
  void ForEachStage(Fn&& fn) const {
    for (const auto& [stage, lives] : stages_) fn(stage, lives);
  }

  // A STEP at `op_index` updates its base version in place: no later op reads that version. False
  // for every other op (PipeDream's stash and 2BW's second version make a STEP copy first).
  bool StepInPlace(int op_index) const { return in_place_[static_cast<size_t>(op_index)]; }
  const std::vector<bool>& StepsInPlace() const { return in_place_; }

  // The most versions of `stage` alive at once: a version lives from its STEP (version 0: from the
  // start) until the later of its last F/B/I/W reader and the STEP that replaces it, and hands
  // over to the new one at that STEP (an in-place update is one version). 1 with no STEPs.
  int PeakVersions(int stage) const;

 private:
  std::unordered_map<int32_t, std::vector<VersionLife>> stages_;
  std::vector<bool> in_place_;  // by op index
};

// What one op stashes and a later op frees: the activations of a stage-microbatch (F to its B or
// I) or its weight-gradient stash (I to its W). Positions are indices in the rank's op list.
struct StashInterval {
  int opened_at = -1;
  int closed_at = -1;  // -1: still held after the last op
  // The last copy of them to host memory in between (an OFFLOAD of tensor activations) and the
  // RELOAD after it: off the device from the OFFLOAD's end until the RELOAD's start; -1 for none.
  int offloaded_at = -1;
  int reloaded_at = -1;
};

class ActivationLifetimes {
 public:
  // A closing op with no open interval of its stage, step and microbatch closes nothing.
  explicit ActivationLifetimes(const std::vector<Op>& rank_ops);

  const std::vector<StashInterval>& Activations() const { return activations_; }
  // Which activation interval op `i` opens, closes, offloads or reloads (an index into
  // Activations()), -1 for none.
  int ActivationsAt(size_t i) const { return activations_at_[i]; }
  // How many stage-microbatches' activations are held as op `i` starts, wherever they are (a B
  // or I counts its own; i == the list's size: after the last op).
  int HeldBefore(size_t i) const { return held_before_[i]; }
  // How many of them are in device memory then (an OFFLOAD's own until it ends, a RELOAD's own
  // from its start).
  int ResidentBefore(size_t i) const { return resident_before_[i]; }
  // What op `i` does to that count: +1 an F, and a RELOAD that brings its interval back; -1 a B
  // or I whose activations are on the device, and an OFFLOAD that takes them off; else 0.
  int ResidentChange(size_t i) const { return resident_change_[i]; }
  // The most stage-microbatches held at once, wherever they are, as any of the first `count` ops
  // starts or after the last of them (analysis.h PeakInflight).
  int PeakInflight(size_t count) const;
  // The most weight-gradient stashes (I done, W not yet) held at once.
  int PeakPendingW() const { return peak_pending_w_; }

 private:
  std::vector<StashInterval> activations_;
  std::vector<int> activations_at_;  // by op index
  std::vector<int> held_before_;     // by op index, one more at the end
  std::vector<int> resident_before_;  // likewise
  std::vector<int8_t> resident_change_;  // by op index
  int peak_pending_w_ = 0;
};

}  // namespace stagecraft::schedules
