// Calibration of a profile by the real executor (see calibration_runs.h).
#include "stagecraft/harness/calibration_runs.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "stagecraft/base/check.h"
#include "stagecraft/base/error.h"
#include "stagecraft/base/stats.h"
#include "stagecraft/exec/replica_group.h"
#include "stagecraft/exec/runtime.h"
#include "stagecraft/exec/setup_rounds.h"
#include "stagecraft/harness/calibrate.h"
#include "stagecraft/harness/measure.h"
#include "stagecraft/harness/predict.h"
#include "stagecraft/harness/profile_layers.h"
#include "stagecraft/schedules/generators.h"
#include "stagecraft/sim/costs.h"

namespace stagecraft::harness {
namespace {

// The schedules whose runs calibrate: one per kind of op mix. 1F1B (F, B, one STEP per step),
// ZB-1p (I and W apart on every rank: built from uniform costs it is ZB-H1's order with the first
// stage's B split too, which ZB-H1 fuses and so left rank 0's I and W unmeasured), PipeDream
// when the shape allows it (a STEP after every microbatch), and GPipe, the deep stash (every
// microbatch held), which gives only the stash's slopes (sim/stash.h). GPipe runs between the
// two per-step runs it is compared with, so a drift of the machine's speed over the
// calibration hits both sides alike.
constexpr const char* kCalibrationSchedules[] = {"1f1b", "gpipe", "zb-1p", "pipedream"};
constexpr const char* kDeepStashSchedule = "gpipe";

// Every rank's points as bytes, for gathering.
template <typename Point>
std::string PointsToBytes(const std::vector<Point>& points) {
  return std::string(reinterpret_cast<const char*>(points.data()), points.size() * sizeof(Point));
}
template <typename Point>
std::vector<Point> PointsFromBytes(const std::string& bytes) {
  std::vector<Point> points(bytes.size() / sizeof(Point));
  // A rank with no points sends nothing: an empty vector's data() may be null, not for memcpy.
  if (!points.empty()) std::memcpy(points.data(), bytes.data(), points.size() * sizeof(Point));
  return points;
}

// Beyond this the all-reduce has long reached its bus bandwidth and the fit extrapolates; it
// keeps a large model's sweep short and its buffer small (and within MPI's int count).
constexpr int64_t kMaxAllReduceBytes = int64_t{256} << 20;

// All-reduce sizes: x4 from 4 KiB while below `max_bytes`, then `max_bytes` (in whole floats).
std::vector<int64_t> AllReduceSizes(int64_t max_bytes) {
  max_bytes = std::min(max_bytes, kMaxAllReduceBytes);
  std::vector<int64_t> sizes;
  for (int64_t bytes = 4096; bytes < max_bytes; bytes *= 4) sizes.push_back(bytes);
  sizes.push_back(std::max<int64_t>(4096, max_bytes / 4 * 4));
  return sizes;
}

// The whole model's gradients: the most one stage of any split all-reduces.
int64_t GradBytes(const sim::Profile& profile) {
  int64_t bytes = 0;
  for (const sim::LayerProfile& layer : profile.layers) bytes += layer.grad_bytes;
  for (const auto& piece : {profile.embedding, profile.head}) bytes += piece ? piece->grad_bytes : 0;
  return bytes;
}

// The gradients' bytes of each stage under the split `layers_per_stage` (what its REDUCE_GRAD
// sums): its layers', with the embedding's on the first stage and the head's on the last, as the
// profile's cost model charges them (profile_costs.cpp).
std::vector<int64_t> StageGradBytes(const sim::Profile& profile, const std::vector<int>& layers_per_stage) {
  std::vector<int64_t> out;
  size_t layer = 0;
  for (const int count : layers_per_stage) {
    int64_t bytes = 0;
    for (int k = 0; k < count && layer < profile.layers.size(); ++k) bytes += profile.layers[layer++].grad_bytes;
    out.push_back(bytes);
  }
  if (!out.empty() && profile.embedding) out.front() += profile.embedding->grad_bytes;
  if (!out.empty() && profile.head) out.back() += profile.head->grad_bytes;
  return out;
}

// (bytes, ns from post to completion) of every REDUCE_GRAD of `record` from step `first_step` on.
void AddReduceGradTimes(const schedules::Schedule& s, const schedules::RunRecord& record,
                        const std::vector<int64_t>& stage_bytes, int first_step,
                        std::vector<std::pair<int64_t, int64_t>>* out) {
  for (int r = 0; r < s.ranks() && r < static_cast<int>(record.ranks.size()); ++r) {
    for (size_t i = 0; i < s.ops[r].size(); ++i) {
      const schedules::Op& op = s.ops[r][i];
      const schedules::OpTiming& t = record.ranks[r].ops[i];
      if (!schedules::ReducesGradients(op.kind) || op.step < first_step || t.start_ns < 0 || t.end_ns < t.start_ns) {
        continue;
      }
      out->emplace_back(stage_bytes.at(static_cast<size_t>(op.stage)), t.end_ns - t.start_ns);
    }
  }
}

// The all-reduces as the runs saw them set the fit's in-pipeline bus bandwidth when slower than
// its back-to-back one (InPipelineBusBandwidth).
void SetInPipelineAllReduce(const std::vector<std::pair<int64_t, int64_t>>& reduces, int n, RunsReport* report,
                            sim::Profile* profile) {
  if (!profile->allreduce || reduces.empty() || n < 2) return;
  std::vector<int64_t> times;
  for (const auto& [bytes, ns] : reduces) times.push_back(ns);
  report->reduces = reduces.size();
  report->reduce_median_ns = Median(times);
  const std::optional<double> seen = InPipelineBusBandwidth(reduces, n, profile->allreduce->latency_ns);
  if (seen && *seen < profile->allreduce->bus_bytes_per_s) profile->allreduce->pipeline_bus_bytes_per_s = *seen;
}

// Per size, the median over the ranks of each rank's median: ranks leave the barrier apart, and
// the first one out waits for the last inside its all-reduce.
std::vector<AllReducePoint> AllReduceMedians(const std::vector<std::string>& gathered) {
  std::vector<std::vector<AllReducePoint>> by_rank;
  for (const std::string& bytes : gathered) by_rank.push_back(PointsFromBytes<AllReducePoint>(bytes));
  std::vector<AllReducePoint> out;
  for (size_t i = 0; i < by_rank.at(0).size(); ++i) {
    std::vector<int64_t> times;
    for (const auto& points : by_rank) times.push_back(points.at(i).ns);
    out.push_back({by_rank[0][i].bytes, Median(times)});
  }
  return out;
}

}  // namespace

sim::P2pProfile CalibrateP2p(exec::Transport& transport, exec::Device& device, int64_t send_bytes) {
  const int n = transport.size();
  std::vector<int64_t> sizes = {4096, 16384, 65536, 262144, 1048576};
  if (send_bytes >= 4 && send_bytes % 4 == 0) sizes.push_back(send_bytes);
  const int64_t overlap_bytes = send_bytes >= 4 && send_bytes % 4 == 0 ? send_bytes : 65536;
  // What the ping-pongs and the overlap run move is connected before any of it is timed, as a
  // run's routes are (the NCCL transport makes its channels here).
  std::vector<exec::Route> routes;
  for (int a = 0; a < (n > 2 ? n : 1); ++a) {
    for (const int64_t bytes : sizes) {
      routes.push_back({a, (a + 1) % n, bytes / 4});
      routes.push_back({(a + 1) % n, a, bytes / 4});
    }
  }
  routes.push_back({0, 1, overlap_bytes / 4});
  transport.Prepare(routes);
  std::vector<PingPongPoint> mine;
  for (int a = 0; a < (n > 2 ? n : 1); ++a) {
    const std::vector<PingPongPoint> points = PingPong(transport, device, a, (a + 1) % n, sizes, 40);
    mine.insert(mine.end(), points.begin(), points.end());
  }
  const int64_t wait = WaitAfterCompute(transport, device, 0, 1, overlap_bytes, 1'000'000, 30);
  const std::vector<std::string> all_points = transport.Gather(PointsToBytes(mine), 0);
  const std::vector<std::string> waits = transport.Gather(std::to_string(wait), 0);
  if (transport.rank() != 0) return {};
  std::vector<PingPongPoint> points;
  for (const std::string& bytes : all_points) {
    const auto p = PointsFromBytes<PingPongPoint>(bytes);
    points.insert(points.end(), p.begin(), p.end());
  }
  sim::P2pProfile fit = FitLatencyBandwidth(points);
  fit.overlap = OverlapFraction(fit, overlap_bytes, std::stoll(waits.at(1)));
  return fit;
}

std::optional<sim::CollectiveFit> CalibrateAllReduce(exec::Backend backend, exec::Device& device,
                                                     exec::Transport& transport, const sim::Profile& profile,
                                                     std::chrono::nanoseconds deadline, exec::ReplicaGroup* replicas) {
  const int64_t max_bytes = GradBytes(profile);  // alike on every rank: the bytes follow the model
  // The job's own groups (one per pipeline rank), else one over the whole job, as the runtime
  // would make it. On cuda the runtime's replicas need NCCL between distinct GPUs, which
  // start-up has agreed on for every rank alike: the job's transport is NCCL's exactly then
  // (ranks sharing a GPU get host-staged MPI, and a data-parallel run there is refused, so there
  // is nothing to fit).
  std::unique_ptr<exec::ReplicaGroup> whole_job;
  exec::ReplicaGroup* group = replicas;
  if (group == nullptr) {
    const int n = transport.size();
    if (n < 2 || (backend == exec::Backend::kCuda && transport.Name() != "nccl")) return std::nullopt;
    whole_job = exec::MakeMpiReplicaGroup(exec::WorldLayout{1, n}, deadline);
    if (backend == exec::Backend::kCuda) whole_job = exec::MakeNcclReplicaGroup(std::move(whole_job), device, deadline);
    SC_CHECK(whole_job->size() == n, "one all-reduce group over the whole job");
    group = whole_job.get();
  }
  const std::vector<AllReducePoint> mine = AllReduceTimes(*group, device, AllReduceSizes(max_bytes), 20);
  const std::vector<std::string> gathered = transport.Gather(PointsToBytes(mine), 0);
  if (transport.rank() != 0) return std::nullopt;
  return FitAllReduce(AllReduceMedians(gathered), group->size());
}

sim::PipelineSpec CalibrationPipeline(const sim::Scenario& sc, int steps) {
  sim::PipelineSpec pipeline = sc.pipeline;
  pipeline.steps = steps;
  pipeline.chunks = 1;
  return pipeline;
}

std::vector<std::string> CalibrationSchedules(const sim::PipelineSpec& pipeline) {
  std::vector<std::string> names;
  for (const char* name : kCalibrationSchedules) {
    const schedules::GeneratorInfo* info = schedules::FindGenerator(name);
    if (info != nullptr && schedules::CheckParams(*info, sim::GeneratorParamsFor(pipeline, *info)).empty()) {
      names.emplace_back(name);
    }
  }
  return names;
}

namespace {

// What the calibration runs add up on rank 0.
struct RunSums {
  explicit RunSums(int ranks)
      : per_step(ranks), per_microbatch(ranks), shallow(ranks), deep(ranks),
        rank_overhead_sum(static_cast<size_t>(ranks), 0) {}
  std::vector<ScaleSums> per_step, per_microbatch;
  std::vector<StashSums> shallow, deep;  // the per-step runs' stash, and GPipe's
  int64_t overhead_sum = 0;
  std::vector<int64_t> rank_overhead_sum;
  int runs = 0;
  std::vector<int> layers;      // the split the runs used, one stage per rank
  std::vector<int64_t> waited;  // transfers a receiver waited through, ns
  JitterSums jitter;
  // REDUCE_GRADs run, (bytes, post to completion ns): of the schedules that update once a step
  // (the gradients summed after a step's compute, as the flush schedules run them), and of those
  // that update every microbatch (PipeDream's, back to back), used only without the first kind.
  std::vector<std::pair<int64_t, int64_t>> reduces, reduces_every_microbatch;

  // One run of `s` (`record`: every rank's, joined), against the profile's isolated costs;
  // `deep_run`: GPipe's, whose ops say only how a deep stash slows them.
  void Add(const sim::Scenario& sc, const sim::Profile& profile, const schedules::Schedule& s,
           const schedules::RunRecord& record, const std::vector<int>& layers_per_stage,
           const std::vector<int>& devices, int steps, bool deep_run) {
    const int first = steps > 1 ? 1 : 0;  // step 0 starts cold
    const bool every_microbatch = sim::UpdatesEveryMicrobatch(s);
    const sim::CostTable isolated = sim::CostsFromProfile(sc, profile, s.shape, every_microbatch, false);
    layers = layers_per_stage;
    // The ops' own times, without the time-slicing of ranks that share a device, which the
    // simulator applies itself.
    const schedules::RunRecord alone = WithoutSharing(s, record, devices);
    if (deep_run) {
      AddStashSums(s, alone, isolated, first, &deep);
      return;
    }
    if (!every_microbatch) AddStashSums(s, alone, isolated, first, &shallow);
    AddScaleSums(s, alone, isolated, first, every_microbatch ? &per_microbatch : &per_step);
    // The overhead and transfers without the turns another rank held a shared device for.
    const OpOverheads overheads = OverheadsPerOp(s, record, devices);
    overhead_sum += overheads.per_op;
    for (size_t r = 0; r < rank_overhead_sum.size(); ++r) rank_overhead_sum[r] += overheads.by_rank[r];
    AddJitter(s, alone, isolated, first, &jitter);
    const std::vector<int64_t> w = WaitedTransfers(s, record, devices);
    waited.insert(waited.end(), w.begin(), w.end());
    AddReduceGradTimes(s, record, StageGradBytes(profile, layers_per_stage), first,
                       every_microbatch ? &reduces_every_microbatch : &reduces);
    ++runs;
  }

  // The profile's fields from the sums (runs > 0).
  void Finish(int data_parallel, sim::Profile* profile, RunsReport* report) {
    profile->op_overhead_ns = overhead_sum / runs;
    profile->op_time_cv = jitter.Cv();
    // The transfers as the pipeline saw them set the bandwidth their data moves at, when slower
    // than the ping-pong's (a sender's hot cache, a busy peer); the ping-pong's latency and
    // overlap stay. A median within the latency (small, eager messages) says nothing of it.
    if (profile->p2p && !waited.empty() && profile->send_bytes > 0) {
      const int64_t median = Median(waited);
      if (median > profile->p2p->latency_ns) {
        const double seen =
            static_cast<double>(profile->send_bytes) * 1e9 / static_cast<double>(median - profile->p2p->latency_ns);
        if (seen < profile->p2p->bytes_per_s) profile->p2p->pipeline_bytes_per_s = seen;
      }
      report->waited = waited.size();
      report->waited_median_ns = median;
    }
    SetInPipelineAllReduce(reduces.empty() ? reduces_every_microbatch : reduces, data_parallel, report, profile);
    const size_t ranks = per_step.size();
    profile->ranks.resize(ranks);
    for (size_t r = 0; r < ranks; ++r) {
      sim::RankScale& k = profile->ranks[r];
      k.layers = layers.at(r);
      k.op_overhead_ns = rank_overhead_sum[r] / runs;
      k.per_step = ScaleOf(per_step[r], sim::OpScale{});
      k.per_microbatch = ScaleOf(per_microbatch[r], k.per_step);
      k.stash = StashOf(shallow[r], deep[r]);
    }
    report->per_step = std::move(per_step);
    report->per_microbatch = std::move(per_microbatch);
  }
};

// Whether every microbatch held at once fits where the job's own schedules do: if not, the
// stash goes unmeasured rather than the profile failing (every rank decides alike).
bool DeepStashFits(const sim::Scenario& sc, const sim::PipelineSpec& pipeline, const schedules::Schedule& s) {
  sim::Scenario deep_sc = sc;
  deep_sc.pipeline = pipeline;
  try {
    return !Predict(deep_sc, sim::Topology(deep_sc.topology), s).metrics.AnyOom();
  } catch (const InputError&) {  // not predictable here: not run either
    return false;
  }
}

}  // namespace

RunsReport CalibrateRuns(
    const sim::Scenario& sc, const exec::TrainingConfig& base, int steps, exec::Device& device,
    exec::Transport& transport, sim::Profile* profile, exec::ReplicaGroup* replicas) {
  const int ranks = transport.size();
  RunSums sums(ranks);
  RunsReport report;
  sim::PipelineSpec pipeline = CalibrationPipeline(sc, steps);
  exec::TrainingConfig one = base;  // without the job's replicas, one pipeline
  if (replicas == nullptr) pipeline.data_parallel = one.data_parallel = 1;
  const exec::TrainingConfig& job = replicas == nullptr ? one : base;
  const int64_t total = int64_t{pipeline.microbatches} * steps;
  exec::SetupRounds setup(transport);  // the first run's set-up ends the dataset's
  SC_CHECK((replicas != nullptr) == (pipeline.data_parallel > 1), "the replicas' group with replicas");
  const exec::Dataset data = exec::MakeDataset(device, job, total, transport.rank() == 0, transport.rank() == ranks - 1,
                                               [&] { setup.Beat(); }, replicas != nullptr ? replicas->replica() : 0);
  for (const std::string& name : CalibrationSchedules(pipeline)) {
    pipeline.schedules = {name};
    const schedules::Schedule s = ScenarioSchedules(pipeline, {name}).at(0);
    const bool deep_run = name == kDeepStashSchedule;
    if (deep_run && !DeepStashFits(sc, pipeline, s)) {
      report.deep_stash_left_out = true;
      continue;
    }
    exec::TrainingConfig config = job;
    config.layers_per_stage = sim::StageLayers(sc, s.shape);
    const exec::RankRun run = exec::RunRank(s, config, data, device, transport, {}, replicas);
    const std::vector<std::string> all = transport.Gather(exec::SerializeRankRun(run), 0);
    if (transport.rank() != 0) continue;
    sums.Add(sc, *profile, s, JoinRankRuns(s, all, {}), config.layers_per_stage, pipeline.RankDevices(), steps,
             deep_run);
  }
  if (transport.rank() == 0 && sums.runs > 0) sums.Finish(pipeline.data_parallel, profile, &report);
  return report;
}

}  // namespace stagecraft::harness
