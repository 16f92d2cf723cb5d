// The plan's floors (plan.h), internal to the harness: what no run of a configuration can beat,
// from its cost table (closed forms) and from its schedule's op order (before lowering). Each is
// a lower bound on the simulator's own numbers, so pruning by them never drops a configuration
// the simulation would rank higher; Plan checks every simulated run against them (SC_CHECK).
#pragma once

#include <cstdint>
#include <vector>

#include "stagecraft/schedules/ir.h"
#include "stagecraft/sim/cost_table.h"
#include "stagecraft/scenario/scenario.h"
#include "stagecraft/sim/topology.h"

namespace stagecraft::harness::detail {

// What the floors need of a cost table, per stage, for one shape.
struct StageFloors {
  schedules::Shape shape;
  std::vector<int64_t> forward_ns, backward_ns, input_ns, step_ns;  // backward: the cheaper of B and I + W
  std::vector<int64_t> static_bytes;      // weights (one version), gradients, optimizer state
  std::vector<int64_t> activation_bytes;  // held from an F to its B or I
  std::vector<int64_t> hop_forward_ns;    // stage s to s + 1 alone on its route (0 on one rank)
  std::vector<int64_t> hop_backward_ns;   // stage s + 1 to s
  // The gradient all-reduce alone (empty: one replica; 0 with grad_reduce_overlap, AddReduceFloors).
  std::vector<double> reduce_alone_ns;
  bool timed = true;  // false: measured costs (spread, overheads, fits): no time floor
};

// Everything but the all-reduces, which take a while to plan on a large topology: AddReduceFloors
// adds them, for the configurations that get as far as their op order.
StageFloors FloorsOf(const sim::Scenario& scenario, const sim::Topology& topology, const sim::CostTable& costs,
                     const schedules::Shape& shape);
void AddReduceFloors(const sim::Scenario& scenario, const sim::Topology& topology, const sim::CostTable& costs,
                     StageFloors* floors);

// The closed forms, for m microbatches and `steps` steps, whatever the op order:
//   memory: on each rank, its stages' static bytes and the smallest of their activations (an F
//     holds its own while it runs);
//   time: each rank's compute after the forwards that reach its first stage; and after its first
//     backward can start (every stage's forward, then the backwards down to its last stage), its
//     backward passes, then the gradient all-reduce alone and the STEP of one of its stages.
int64_t MemoryFloor(const StageFloors& f);
int64_t TimeFloorNs(const StageFloors& f, int microbatches, int steps);

// The floors of one op order (unlowered, or lowered: transfers hold no stream): the memory of its most activations held
// at once on each rank, and its critical path with every op at its cost, every transfer alone
// on its route and every STEP after its stage's all-reduce alone: the schedule's bubble formula
// at these costs (with replicas, each STEP where lowering moves it). Returns -1 for the time when
// the order cannot run (a deadlock).
int64_t OrderMemoryFloor(const StageFloors& f, const schedules::Schedule& schedule);
int64_t OrderTimeFloorNs(const StageFloors& f, const schedules::Schedule& schedule);

}  // namespace stagecraft::harness::detail
