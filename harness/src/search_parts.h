// The schedule search's parts (search.h): the starting points and how an order is judged
// (search_start.cpp), the annealing over op orders (search_anneal.cpp) and what changed
// (search_report.cpp).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "stagecraft/harness/search.h"
#include "stagecraft/schedules/ir.h"
#include "stagecraft/schedules/run_record.h"
#include "stagecraft/sim/costs.h"
#include "stagecraft/sim/engine.h"
#include "stagecraft/scenario/scenario.h"
#include "stagecraft/sim/topology.h"

namespace stagecraft::harness::search_parts {

using schedules::Op;
using schedules::OpKind;
using schedules::Schedule;

// What the op order decides of a rank's memory, per stage: an F adds `act` until its B frees it;
// an I swaps it for `stash`, which its W frees.
struct OrderMemory {
  std::vector<double> act, stash;
  std::vector<double> limit;  // per rank; +inf: none

  double Delta(const Op& op) const;
  double Peak(const std::vector<Op>& ops) const;
  bool Fits(const std::vector<Op>& ops, int rank) const { return Peak(ops) <= limit[rank] * (1 + 1e-12); }
};

// One starting point: a generator's one-step schedule and what judging it needs.
struct Candidate {
  std::string name;
  Schedule schedule;  // unlowered, weights assigned
  sim::CostTable costs;
  OrderMemory memory;
  std::string units;
  schedules::RunRecord run;  // its simulated step
  int64_t step_ns = 0;       // RunStepNs over the scenario's steps
};

class Judge {
 public:
  Judge(const sim::Scenario& sc, const sim::Topology& topo, int steps);
  // The order's simulated step (its record in `record`), or nothing when the validator refuses
  // it.
  std::optional<int64_t> StepNs(const Schedule& unlowered, const sim::CostTable& costs,
                                schedules::RunRecord* record) const;

 private:
  const sim::Scenario& sc_;
  const sim::Topology& topo_;
  int steps_;
  sim::SimConfig config_;
};

// The op order's memory on each rank of `s` and the limit (`units`: what it is counted in).
OrderMemory MemoryOf(const sim::Scenario& sc, const Schedule& s, const sim::CostTable& costs,
                     const SearchMemoryLimit& limit, std::string* units);

// Every flush-policy generator's one-step schedule tried as a start (each named in
// result->starts with its time or why not); the fastest that fits, or InputError naming why
// none does (`path`: the scenario's, for the error). Sets the result's bound (PlacementBoundNs) over the starts.
Candidate BestStart(const sim::Scenario& sc, const std::string& path, const Judge& judge, int steps,
                    const SearchMemoryLimit& limit, const SearchOptions& options, SearchResult* result);

// Simulated annealing from `start` until the options' budget; the best
// order into result->best and its run into *best_run.
void Anneal(const Candidate& start, const Judge& judge, const SearchOptions& options,
            const std::function<double()>& elapsed, SearchResult* result, schedules::RunRecord* best_run);

// Whether moving leaves each (stage, microbatch)'s F, B or I, W in order on the rank.
bool LocalOrderHolds(const std::vector<Op>& ops, size_t at);

// Each rank's bubble and memory before and after, and the moves (result->ranks, ->moved).
void DescribeChanges(const Candidate& start, const schedules::RunRecord& best_run, SearchResult* result);

}  // namespace stagecraft::harness::search_parts
