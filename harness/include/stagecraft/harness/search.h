// `stagecraft search`: an op order per rank made for one job. It starts from the best schedule
// the generators make for the scenario (hand-written and Zero Bubble's automatic ones, flush
// policy, within the memory limit), then reorders ops within each rank by simulated annealing,
// with the simulator as the judge: a move takes one compute op to another place in its rank's
// list; an order that the validator refuses (an op before what it needs, a deadlock) or that
// holds more than the memory limit is dropped unsimulated; the shortest step wins.
// The schedule is one step (the CSV form a scenario names as pipeline.schedule repeats it).
//
// "Step" means simulate's step time for the scenario's pipeline.steps (RunStepNs): each stage
// steps its optimizer on its own, with no barrier across ranks, so consecutive steps overlap: a
// run takes the first step's makespan, then the largest per-rank span of one step per further
// step (SteadyStepNs; the Zero Bubble paper's cost, its bubble rate's denominator). So one step
// is judged by its makespan and a long run (pipeline.steps: 1000) by its spans.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "stagecraft/schedules/ir.h"
#include "stagecraft/schedules/run_record.h"
#include "stagecraft/sim/cost_table.h"
#include "stagecraft/scenario/scenario.h"

namespace stagecraft::harness {

// The per-rank memory limit on what the order changes (the activations held from an F to its
// backward, the W stashes from an I to its W), in the units the scenario's costs give them
// (bytes with the model's sizes, else a forward's activations as 1).
struct SearchMemoryLimit {
  // Bytes for the whole rank (weights, gradients, optimizer state, workspace and receive
  // buffers taken off first, as zb-auto does); 0: none, unless `forwards` is set.
  int64_t bytes = 0;
  // The Zero Bubble paper's limit, k·p·M_B: `forwards` microbatches' activations of the rank's
  // stages (k·p, with p the ranks); 0: not this form.
  double forwards = 0;
  // Parses "60GiB" (scenario/units.h sizes) or "<k>p" ("2p", "1.5p"); throws InputError naming
  // `what` on anything else.
  static SearchMemoryLimit Parse(std::string_view text, std::string_view what);
  std::string Describe() const;  // "60.00 GiB", "2p activations"
};

// The longest search a user may ask for (--budget, Python's budget): a day.
inline constexpr double kMaxSearchBudgetSeconds = 86400;

struct SearchOptions {
  double budget_seconds = 9;  // wall-clock time for the whole search, the starts included
  int64_t max_evaluations = 0;  // > 0: stop after this many moves tried (deterministic runs)
  uint64_t seed = 1;
  // The generator to start from; empty: the fastest within the limit.
  std::string from;
  // Unset (bytes 0, forwards 0): the scenario's pipeline.memory_limit, else the device memory
  // when the model gives sizes, else none.
  SearchMemoryLimit memory_limit;
  // Set by the caller to stop the search (Python's Ctrl-C): it then ends after the move it is
  // on, as if its budget were spent.
  const std::atomic<bool>* cancel = nullptr;
};

// One rank's share of the explanation: its bubble (idle share of the long-run step) and its peak of the
// order-dependent memory, before and after, and how many of its ops moved.
struct SearchRankChange {
  int rank = 0;
  double bubble_before = 0, bubble_after = 0;
  double memory_before = 0, memory_after = 0;  // in the limit's units
  int ops_moved = 0;
};

struct SearchResult {
  std::string start_name;             // the generator it started from
  std::vector<std::string> starts;    // every generator tried, "name: 12.3 ms" or why not
  schedules::Schedule start, best;    // one step, unlowered, with weights assigned
  int steps = 1;                      // the scenario's pipeline.steps, what the step is over
  int64_t start_ns = 0, best_ns = 0;  // simulated step times over `steps` steps (RunStepNs)
  int64_t start_makespan_ns = 0, best_makespan_ns = 0;  // one step alone
  int64_t start_steady_ns = 0, best_steady_ns = 0;      // a step of a long run (SteadyStepNs)
  // What no op order can beat over `steps` steps, on any placement the generators use
  // (PlacementBoundNs): the smallest of their bounds, and the rank and placement that set it.
  int64_t bound_ns = 0;
  int bound_rank = 0;
  std::string bound_placement;  // "loop, 8 stages", "V, 16 stages"
  double memory_limit = 0;            // rank 0's, in `memory_units` (0: none)
  std::string memory_units;           // "bytes" or "forwards' activations"
  int64_t evaluations = 0;            // moves simulated
  int64_t rejected = 0;               // moves refused unsimulated (invalid or over the limit)
  int64_t improvements = 0;           // new bests
  double seconds = 0;
  std::vector<SearchRankChange> ranks;
  // The moves that remain, against the start: "rank 3: 7W2 from 14 to 9" (at most `shown`).
  std::vector<std::string> moved;
};

// The step of a long run of `run`'s one-step order: the largest per-rank span (first F start to
// last compute end). A run of k steps takes the first step's makespan plus k - 1 of these.
int64_t SteadyStepNs(const schedules::RunRecord& run);
// Simulate's step time for a run of `steps` steps of that order: (makespan + (steps - 1) x
// SteadyStepNs) / steps.
int64_t RunStepNs(const schedules::RunRecord& one_step, int steps);

// A lower bound on the step time over `steps` steps (RunStepNs) of every op order with the stages
// and placement of `schedule` (lowered: the lists `run`'s timings index), from `run`, a
// simulation of it whose op times are those of every order (no stash, no drawn variation):
// - a rank runs its compute ops one at a time, so each step's span holds at least its compute
//   (its busy time, the same in every order): a long run's step is at least the busiest rank's;
// - and one step alone cannot end before each rank's compute has run after the earliest its
//   first op can start: a stage's first forward waits for one microbatch's forwards through every
//   stage before it (transfers counted as free).
// So (max over ranks of head + compute, plus steps - 1 times the busiest compute) / steps. Returns
// it, and in `rank` the rank that sets it (the one-step term's for one step, else the busiest).
int64_t PlacementBoundNs(const schedules::Schedule& schedule, const schedules::RunRecord& run, int steps,
                         int* rank = nullptr);

// Throws InputError when no generator gives a schedule within the memory limit.
SearchResult SearchSchedule(const sim::Scenario& scenario, const SearchOptions& options);

// The search result as text: the start, every generator's time, the result and why it is
// better (per rank bubble and memory), and the moves.
std::string DescribeSearch(const SearchResult& result);

}  // namespace stagecraft::harness
