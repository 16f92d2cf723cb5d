// The Zero Bubble automatic scheduler's refinement step (Qi et al., "Zero Bubble (Almost)
// Pipeline Parallelism", ICLR 2024, §3.1; written from the paper and the authors' first release,
// megatron/core/pipeline_parallel/auto_schedule.py, build_ilp): after the heuristic, an integer
// linear program over the order of each stage's F, B (our I) and W passes, started from the
// heuristic's order and solved by CBC (COIN-OR, Debian's coinor-libcbc-dev) within a time
// limit. Per stage the passes of one kind run in microbatch order (F_j before F_j+1, ...), so
// the unknowns are, for each pair of passes the dependencies leave unordered (a B or W of an
// earlier microbatch against an F or B of a later one), which runs first, and each pass's end
// time. The program:
// - each pass ends at least its cost after its inputs (an F after the previous stage's F and
//   the transfer, a B after the next stage's B and the transfer, the last stage's B after its
//   F, a W after its B, each after the previous microbatch's pass of its kind);
// - of two unordered passes of a stage, the later one ends at least its cost after the earlier
//   (a big-M pair of rows per binary);
// - before and after each pass the stage holds at most its memory limit (F adds M_B, B adds
//   M_W - M_B, W frees M_W: each pass's own plus those ordered before it);
// - minimise the longest stage span (first F's start to the stage's last end), with the
//   paper's tightening: a stage's span is at least any pass's end plus the costs of the passes
//   that still follow it on the stage, less the first F's start.
// The heuristic's order is a feasible start, so the result is never worse than it.
#pragma once

#include <string>

#include "stagecraft/schedules/zb_auto.h"

namespace stagecraft::schedules {

struct ZbIlpResult {
  ZbAutoOrder order;        // the best order found: `start` when the solver found none better
  double lower_bound = 0;   // the solver's bound on the span (0 when it stopped before one)
  bool optimal = false;     // proven optimal within the solver's tolerance
  bool improved = false;    // shorter than the start
  std::string status;       // how the solver ended, in words
};

// Whether this build has the solver (false: ZbIlpRefine returns its start, status says why).
bool ZbIlpAvailable();

// The program's size for `costs`: the binaries (unordered pairs), p * 3 m (m - 1) / 2.
int64_t ZbIlpBinaries(const ZbAutoCosts& costs);

// How long the solver may search: branch-and-bound nodes (0: no limit; the same order on every
// run) and seconds (0: no limit; a time limit makes the result depend on the machine's speed).
struct ZbIlpLimits {
  int64_t nodes = 0;
  double seconds = 0;
  int64_t max_binaries = 20000;  // larger programs are left as they are (status says so)
};

// Refines `start` (an order ZbAutoSchedule made under `costs`, its span ASAP) within `limits`.
ZbIlpResult ZbIlpRefine(const ZbAutoCosts& costs, const ZbAutoOrder& start, const ZbIlpLimits& limits);

// The longest stage span of per-stage orders `order` under `costs` when every pass starts as
// soon as its inputs and its stage allow (the heuristic's and the simulator's timing), or -1
// when an order breaks a dependency of the stage's own passes or the memory limit.
double ZbOrderSpan(const ZbAutoCosts& costs, const std::vector<std::vector<std::pair<OpKind, int>>>& order);

}  // namespace stagecraft::schedules
