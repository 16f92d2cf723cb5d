// Step graphs: which ops of a rank's list a device with graphs (device_graphs.h) captures once
// and launches again every later step, instead of issuing their calls one by one. Plain host
// logic, tested on the CPU; the runtime (runtime.cpp) carries it out.
//
// A step is replayed only when replaying it does exactly what issuing it would: every step of
// the rank's list is the same ops in the same order (but for the step they belong to), the
// weights are updated in place (a flush schedule: one version, the same buffers every step), and
// nothing in the step needs the host between its compute ops (no collective or copy, no replicas,
// and no transfer unless the transport records its transfers into graphs: nccl,
// Transport::CapturesTransfers, whose receives are then waits on the device). Inside a step the
// compute passes (F, B, I, W), with the SENDs and RECVs between them where they are recorded, are
// captured in runs of consecutive ones (segments); a STEP is issued as it comes, each step, since
// its rate and its optimizer's step count change. What a replayed pass reads that changes with the
// step (its microbatch's inputs and targets) is copied into buffers of fixed address before the
// step's first launch, and the losses it writes are copied out of one after its last.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "stagecraft/schedules/ir.h"
#include "stagecraft/schedules/run_record.h"

namespace stagecraft::exec {

// What the runtime knows besides the schedule.
struct StepGraphConditions {
  bool device_has_graphs = false;  // Device::graphs() is not null
  bool requested = false;          // RunHooks::step_graphs (`execute --graphs on`)
  bool replicas = false;           // data parallelism: REDUCE_GRAD needs the host each step
  bool optimizer_on_host = false;
  bool pipemare = false;           // the correction moves the weights around each backward
  bool faults = false;             // an injected fault changes one step
  bool transfers_captured = false; // Transport::CapturesTransfers: SEND and RECV are recorded
};

struct StepGraphPlan {
  bool enabled = false;
  // Why not, when not enabled: one line naming the first condition that failed.
  std::string why_not;
  int ops_per_step = 0;
  // Steps before it run eagerly (the first warms the memory pool and the GEMM plans); this one is
  // captured as it runs; every later one is replayed.
  int capture_step = 1;
  // By op offset within a step: the segment (0, 1, ...) that captures it, or -1 for an op issued
  // eagerly every step (a STEP).
  std::vector<int> segment_of;
  int segments = 0;
};

StepGraphPlan PlanStepGraphs(const schedules::Schedule& schedule, int rank, const StepGraphConditions& conditions);

// Copies that bring the dataset microbatches of run microbatches [first, first + count) into a
// window of `count` slots, the dataset cycling through its `dataset_microbatches` (slot j holds
// run microbatch first + j, dataset microbatch (first + j) % dataset_microbatches): runs of
// consecutive dataset microbatches, one copy each.
struct WindowCopy {
  int64_t from = 0;   // first dataset microbatch
  int64_t to = 0;     // first slot
  int64_t count = 0;  // microbatches
  friend bool operator==(const WindowCopy&, const WindowCopy&) = default;
};
std::vector<WindowCopy> WindowCopies(int64_t first, int64_t count, int64_t dataset_microbatches);

// The device's idle time between a rank's consecutive compute ops (F, B, I, W, STEP) from step
// `from_step` on, read from the run's stamps (`timings`, by op of `ops`): each op's gap is its
// start less the previous compute op's end (0 when it started before: never negative), the
// first op of `from_step` counting its gap after the step before. Apart: the gaps between two
// consecutive passes of one segment of `plan` in one step (inside one graph when replayed, a
// transfer's post or wait between them recorded there too); with a plan not enabled they count
// nothing. What issue 57 judges step graphs by, per op (cuda_bench's BM_StepGraphs).
struct StepIdle {
  int64_t ops = 0;  // gaps counted
  int64_t idle_ns = 0;
  int64_t passes = 0;  // of them, between two passes of a segment
  int64_t pass_idle_ns = 0;
};
StepIdle IdleBetweenOps(const std::vector<schedules::Op>& ops, const std::vector<schedules::OpTiming>& timings,
                        const StepGraphPlan& plan, int from_step);

}  // namespace stagecraft::exec
