// What `stagecraft profile` measures beyond the isolated layers (docs/accuracy.md),
// so the simulator can predict a pipeline as the executor really runs it:
//   - point-to-point transfers between neighbour ranks as placed: a ping-pong in the style of
//     nccl-tests (one-way time = half a round trip, median over repeats) over message sizes,
//     fitted to latency + bytes / bandwidth, and how much of a transfer overlaps the receiver's
//     compute (a wait measured after the receiver computed past the send);
//   - the data-parallel all-reduce over every rank of the job: post to completion, as the
//     runtime waits for it, median over repeats per size, fitted to the ring form
//     2(n-1)·latency + 2(n-1)/n·bytes / bus bandwidth (collectives.h);
//   - per-rank scales: each op kind's time inside a calibration run of the real executor
//     (several microbatches in flight, every rank busy) against the same op's isolated cost;
//   - the runtime's overhead per op, from the calibration run's bubble split.
// Every function here is host logic over a Transport, a Device and run records, so the same
// code calibrates any backend.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <optional>
#include <utility>
#include <vector>

#include "stagecraft/exec/device.h"
#include "stagecraft/exec/replica_group.h"
#include "stagecraft/exec/transport.h"
#include "stagecraft/schedules/ir.h"
#include "stagecraft/schedules/run_record.h"
#include "stagecraft/sim/costs.h"
#include "stagecraft/scenario/profile.h"

namespace stagecraft::harness {

struct PingPongPoint {
  int64_t bytes = 0;
  int64_t oneway_ns = 0;
};

// Ranks `a` and `b` bounce a message of each size `repeats` times (after a few untimed
// bounces); every rank must call it (the others only join the barriers). The median one-way
// time per size, on `a` (empty elsewhere). Sizes are multiples of 4 bytes.
std::vector<PingPongPoint> PingPong(exec::Transport& transport, exec::Device& device, int a, int b,
                                    const std::vector<int64_t>& sizes, int repeats);

// `a` sends `bytes` to `b` as in a pipeline: b's receive is posted ahead, a sends while b
// computes (spins outside MPI) for `compute_ns`, and a computes after sending; then both wait.
// The median of b's wait over `repeats`, on `b` (0 elsewhere). A transfer that overlaps the
// computing leaves nothing to wait for.
int64_t WaitAfterCompute(exec::Transport& transport, exec::Device& device, int a, int b, int64_t bytes, int64_t compute_ns,
                         int repeats);

// Least-squares fit of oneway = latency + bytes / bandwidth over the points (at least two
// distinct sizes). A negative intercept is clamped to 0 latency.
sim::P2pProfile FitLatencyBandwidth(const std::vector<PingPongPoint>& points);

// The overlap fraction from one size: 1 - wait_after_compute / (fitted time - latency),
// clamped to [0, 1].
double OverlapFraction(const sim::P2pProfile& fit, int64_t bytes, int64_t wait_after_compute_ns);

struct AllReducePoint {
  int64_t bytes = 0;
  int64_t ns = 0;  // from the post to the completion
};

// Every rank of `group` sums a buffer of each size in place, `repeats` times (after a few untimed
// ones), waiting with the group's own Wait (the poll a STEP's wait for its REDUCE_GRAD uses);
// this rank's median per size. Every rank of the group calls it. Sizes are multiples of 4 bytes.
std::vector<AllReducePoint> AllReduceTimes(exec::ReplicaGroup& group, exec::Device& device,
                                           const std::vector<int64_t>& sizes, int repeats);

// Least-squares fit of time = s·latency + x / bus_bandwidth, with s = 2(n-1) steps and
// x = 2(n-1)/n·bytes, over the points of an all-reduce over n = `ranks` ranks. A negative
// latency is clamped to 0 (and the bandwidth refitted through the origin). None for fewer than
// two ranks or two distinct sizes, or when time does not grow with the bytes.
std::optional<sim::CollectiveFit> FitAllReduce(const std::vector<AllReducePoint>& points, int ranks);

// The bus bandwidth all-reduces over n ranks showed inside runs, from their (bytes, ns from post
// to completion): the median over them of 2(n-1)/n·bytes / (ns - 2(n-1)·latency_ns). Those
// within the latency say nothing of the bandwidth; none left (or n < 2): nullopt.
std::optional<double> InPipelineBusBandwidth(const std::vector<std::pair<int64_t, int64_t>>& reduces, int n,
                                             int64_t latency_ns);

// The run as if each rank had had its device alone: where ranks share a device
// (`rank_devices[r]` is rank r's device, as sim::PipelineSpec::RankDevices gives it; empty, or
// no device named twice: the record comes back as it is), each compute op and STEP keeps its
// start and ends after the device time it had, the integral over its run of 1 / n(t), n(t) the
// ops of its device running at t (itself included): the model the simulator time-slices a
// shared device by (sim/compute_streams.h), undone, so a calibration's per-op scales measure
// the ops and not the sharing the simulator applies again. Gaps and transfers are left as
// they were.
schedules::RunRecord WithoutSharing(const schedules::Schedule& schedule, const schedules::RunRecord& record,
                                    const std::vector<int>& rank_devices);

// What of a rank's gaps its device spent on other ranks: where ranks share a device
// (`rank_devices` as for WithoutSharing), a rank whose input is in hand, or whose receive copy
// is due, waits while another rank of the device runs a compute op or STEP; the simulator
// makes it wait its turn itself (sim/compute_streams.h), so the runtime's overhead and the
// transfers a calibration or a replay reads off the gaps leave that time out.
class HeldByOthers {
 public:
  HeldByOthers(const schedules::Schedule& schedule, const schedules::RunRecord& record,
               const std::vector<int>& rank_devices);
  // How much of [start_ns, end_ns) the other ranks of `rank`'s device ran compute (0 on a
  // device of its own).
  int64_t In(int rank, int64_t start_ns, int64_t end_ns) const;
  bool empty() const { return empty_; }

 private:
  std::vector<std::vector<std::pair<int64_t, int64_t>>> spans_;  // [rank]: the others' spans, merged, in order
  bool empty_ = true;
};

// Measured and isolated time summed per op kind over a calibration run's compute ops and STEPs.
struct ScaleSums {
  static constexpr size_t kKinds = std::size(sim::kOpScaleFields);  // F, B, I, W, STEP
  double measured[kKinds] = {};
  double isolated[kKinds] = {};
};

// Adds every compute op and STEP of `schedule` (lowered) from step `first_step` on to the sums
// of its rank: its measured duration in `record` and its duration under `isolated` (the
// profile's layers alone, sim::CostsFromProfile). `sums` has one entry per rank.
void AddScaleSums(const schedules::Schedule& schedule, const schedules::RunRecord& record,
                  const sim::CostTable& isolated, int first_step, std::vector<ScaleSums>* sums);

// How much one op's time varies between its runs, without the slow drift of the machine:
// per rank and kind, the ratios measured / isolated in op order; half the mean squared
// difference of consecutive ratios (the von Neumann estimate of their variance, which a
// trend hardly moves) over the squared mean ratio, summed over all pairs of every run added.
struct JitterSums {
  double sum = 0;  // of ((r[i+1] - r[i]) / mean)^2 / 2
  int64_t pairs = 0;
  double Cv() const;  // sqrt(sum / pairs); 0 without pairs
};
void AddJitter(const schedules::Schedule& schedule, const schedules::RunRecord& record,
               const sim::CostTable& isolated, int first_step, JitterSums* sums);

// The same sums per rank for F, B, I and W, with the stash each op ran at (sim::StashDepths),
// weighted by its isolated time: what the shallow runs and the deep one (GPipe) each saw.
struct StashSums {
  static constexpr size_t kKinds = std::size(sim::kStashFields);  // F, B, I, W
  double measured[kKinds] = {};
  double isolated[kKinds] = {};
  double depth_isolated[kKinds] = {};  // sum of depth x isolated
  double deepest = 0;                  // the deepest stash an op ran at
  // Each op's measured / isolated, for the spread: their count, sum and sum of squares.
  int64_t ops[kKinds] = {};
  double ratio_sum[kKinds] = {};
  double ratio_squares[kKinds] = {};
};
void AddStashSums(const schedules::Schedule& schedule, const schedules::RunRecord& record,
                  const sim::CostTable& isolated, int first_step, std::vector<StashSums>* sums);

// A rank's stash model from its shallow runs and its deep one: per kind, `at` the shallow
// runs' mean depth, and the slope that takes the shallow runs' measured / isolated to the deep
// run's over the difference of their mean depths (at least 0: a deeper stash is not taken to
// speed an op up; 0 where either lacks the kind or the depths differ by under half a
// microbatch); `deep` the deepest the deep run went. None without a deep run. The slope is kept
// only where it exceeds two standard errors of itself (StashSlope::noise: the two runs' per-op
// ratio spreads over their op counts, over the depths' difference); below that, or with fewer
// than two ops on a side, it is 0.
std::optional<sim::StashScale> StashOf(const StashSums& shallow, const StashSums& deep);

// measured / isolated per kind, within [0.001, 1000]; a kind with no ops keeps `fallback`'s.
sim::OpScale ScaleOf(const ScaleSums& sums, const sim::OpScale& fallback);

// How long the transfers took that a receiver waited through from their start (the send's
// post) to their arrival: the bubble split's transfer gaps that directly follow a wait gap.
// With ranks that shared a device (`rank_devices`, as for WithoutSharing), each less the time
// the receiver's device ran another rank's compute (HeldByOthers).
std::vector<int64_t> WaitedTransfers(const schedules::Schedule& schedule, const schedules::RunRecord& record,
                                     const std::vector<int>& rank_devices = {});

// The runtime's overhead per op of the run (the bubble split's overhead over the ops of every
// rank's list), and the same for each rank over its own list; with ranks that shared a device,
// the overhead gaps less the time their device ran another rank's compute (HeldByOthers).
int64_t OverheadPerOp(const schedules::Schedule& schedule, const schedules::RunRecord& record,
                      const std::vector<int>& rank_devices = {});
std::vector<int64_t> OverheadPerOpByRank(const schedules::Schedule& schedule, const schedules::RunRecord& record,
                                         const std::vector<int>& rank_devices = {});
// Both from one split of the run's bubbles.
struct OpOverheads {
  int64_t per_op = 0;
  std::vector<int64_t> by_rank;
};
OpOverheads OverheadsPerOp(const schedules::Schedule& schedule, const schedules::RunRecord& record,
                           const std::vector<int>& rank_devices = {});

}  // namespace stagecraft::harness
