// The Zero Bubble automatic scheduler's heuristic (Qi et al., "Zero Bubble (Almost) Pipeline
// Parallelism", ICLR 2024, §3.1 and Appendix; written from the paper and the authors'
// `manual_order` in megatron/core/pipeline_parallel/zerobubble/scheduler/zb.py): given each
// stage's T_F, T_B (the input gradient, our I), T_W, the transfer time T_comm, the memory each
// pass adds (F: +M_B; B: M_W - M_B; W: -M_W) and a memory limit per stage, it orders each
// stage's F, B and W passes, one stage per rank:
// - warm-up: as many F as the memory limit allows and as fit before the first B can arrive;
// - steady state: one F and one B per microbatch, W passes placed into the gaps (a W that ends
//   before the next F's or B's input can arrive), and W passes taken early when the memory
//   limit would otherwise be passed;
// - the W passes left at the end.
// It tries the heuristic's 8 settings (bubble allowed before the first B, B prioritized over F,
// greedy W filling; each on or off) and keeps the one of the shortest span.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "stagecraft/schedules/ir.h"

namespace stagecraft::schedules {

// The costs (ir.h's StagePassCosts, max_mem set) and the microbatches of one step.
struct ZbAutoCosts : StagePassCosts {
  int microbatches = 1;
  // The refinement step after the heuristic (zb_ilp.h): at most this many branch-and-bound
  // nodes of its integer program (0: the heuristic's order as it is). A node count, not a time,
  // so every rank of an execute makes the same order.
  int64_t refine_nodes = 0;
};

// `costs` with the limit of `pending` forwards' activations on every stage (ZB-1p: p, ZB-2p:
// 2p, p = stages).
ZbAutoCosts ZbAutoLimit(ZbAutoCosts costs, double pending);

// Every stage alike: F, B and W 1 each, no transfer time, memory F +1, B -1/2, W -1/2 (the
// ratio M_W = M_B / 2 of a transformer layer; GeneratorParams::costs when null).
StagePassCosts UniformPassCosts(int stages);

struct ZbAutoOrder {
  // Per stage, its passes in order: kind (kF, kI for the paper's B, kW) and microbatch.
  std::vector<std::vector<std::pair<OpKind, int>>> order;
  std::vector<std::vector<double>> end;  // per stage, each pass's end time under the costs
  double span = 0;  // the longest stage span: first F start to last W end (the paper's cost)
  // With the refinement: the heuristic's span, and how the refinement ended (zb_ilp.h).
  double heuristic_span = 0;
  std::string refinement;
};

// The best of the heuristic's settings, refined when costs.refine_nodes > 0. Returns nullopt with `why` set when no setting fits
// the memory limit (a W would have to run before its B).
std::optional<ZbAutoOrder> ZbAutoSchedule(const ZbAutoCosts& costs, std::string* why);

}  // namespace stagecraft::schedules
