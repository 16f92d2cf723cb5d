// The executor against the independent sequential reference (reference.h), under mpirun with 4
// ranks: after 3 steps every schedule's weights match the reference trained on the same batches
// within 1e-5 relative; PipeDream and 2BW match the reference with their documented staleness.
// Also the calibration's transfers between ranks (harness/calibrate.h). Run as `mpirun -np 4
// exec_mpi_tests`; only rank 0 checks and reports. Some cases move their tensors through the
// host-staged transport (staged_transport.h). Built a second time with STAGECRAFT_TEST_CUDA=1
// as exec_mpi_gpu_tests: every case then runs on the cuda device, the ranks sharing the GPUs
// there are over host-staged MPI, and a machine without a CUDA device skips the whole run. On
// the cuda device every schedule also runs over NCCL when each rank has a GPU of its own, and
// one schedule in each reduced GEMM precision (tf32, bf16, fp16) within that precision's
// tolerance. With --needs-gpu-per-rank (ctest exec.mpi_gpu_nccl, which runs only the NCCL and
// data-parallel cases) a machine with fewer GPUs than ranks skips the whole run (exit 77).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>

#include "gpt_reference.h"
#include "reference.h"
#include "stagecraft/exec/backend.h"
#include "stagecraft/harness/calibrate.h"
#include "stagecraft/harness/search.h"
#include "stagecraft/exec/cpu_device.h"
#include "stagecraft/exec/mpi_transport.h"
#include "stagecraft/exec/replica_group.h"
#include "stagecraft/exec/runtime.h"
#include "stagecraft/exec/setup_rounds.h"
#include "stagecraft/exec/staged_transport.h"
#include "stagecraft/exec/cuda_device.h"
#include "stagecraft/exec/nccl_transport.h"
#include "stagecraft/schedules/csv_io.h"
#include "stagecraft/schedules/generators.h"
#include "stagecraft/schedules/lower.h"
#include "stagecraft/schedules/validate.h"
#include "stagecraft/schedules/weight_policy.h"
#include "stagecraft/sim/scenario_checks.h"

namespace stagecraft {
namespace {

using testing::Staleness;

exec::Transport* g_transport = nullptr;

enum class Link { kMpi, kStaged, kNccl };  // how tensors move: MPI, MPI through host buffers, NCCL

#if STAGECRAFT_TEST_CUDA
constexpr bool kCuda = true;
std::unique_ptr<exec::Device> MakeTestDevice(exec::GemmPrecision precision) {
  return exec::MakeCudaDevice(exec::GpuForLocalRank(g_transport->rank(), exec::CudaDeviceCount()), precision);
}
#else
constexpr bool kCuda = false;
std::unique_ptr<exec::Device> MakeTestDevice(exec::GemmPrecision) { return exec::MakeCpuDevice(); }
#endif

// The reference is fp32 on the CPU. Reduced-precision GEMMs round their inputs to u (relative:
// tf32 2^-10 when the tensor cores truncate, bf16 2^-9, fp16 2^-11, each rounded to nearest or
// better); over 3 steps the weights move a few percent, so their error stays a small multiple
// of u. fp32 keeps the executor-vs-reference bound of every other case.
double ToleranceFor(exec::GemmPrecision precision) {
  switch (precision) {
    case exec::GemmPrecision::kFp32: return 1e-5;
    case exec::GemmPrecision::kTf32: return 8 * std::ldexp(1.0, -10);
    case exec::GemmPrecision::kBf16: return 8 * std::ldexp(1.0, -9);
    case exec::GemmPrecision::kFp16: return 8 * std::ldexp(1.0, -11);
  }
  return 0;
}

struct Case {
  std::string schedule;
  int ranks = 4;
  int chunks = 1;
  int microbatches = 8;
  int steps = 3;
  bool recompute = false;
  bool vertical_sync = false;
  std::string optimizer = "sgd";
  double lr = 0.1;
  float adam_lr = testing::kAdamLr;  // instead of lr when optimizer is "adam"
  bool residual = false;
  kernels::Activation activation = kernels::Activation::kGelu;
  kernels::LossKind loss = kernels::LossKind::kMse;
  std::vector<int> split{};  // layers per stage; empty: even
  Link link = kCuda ? Link::kStaged : Link::kMpi;
  exec::GemmPrecision precision = exec::GemmPrecision::kFp32;  // cuda only
  bool gpt = false;  // the transformer (testing::kTestGpt) instead of the MLP
  std::string csv = {};  // a schedule file's text (one step) to import instead of generating `schedule`
  int64_t dataset_microbatches = 0;  // the reference's data cycles through this many (0: all distinct)
  // D replicas of `ranks` ranks (ranks x D of the job's 4 processes), each with 1/D of the
  // microbatch size the reference trains with (data parallelism: the same training exactly).
  int data_parallel = 1;
  // training.lr_schedule and training.pipemare (the reference restates their rules).
  sim::LrScheduleSpec lr_schedule{};
  std::optional<sim::PipeMareSpec> pipemare{};
  std::string data{};  // a labelled set under the source tree the MLP classifies (model.h); "": synthetic
  bool step_graphs = false;  // execute --graphs on (step_graphs.h)
};

constexpr int kLayers = 8;

std::vector<int> SplitOf(const Case& c) {
  const int stages = c.ranks * c.chunks;
  return c.split.empty() ? std::vector<int>(stages, kLayers / stages) : c.split;
}

exec::TrainingConfig ConfigFor(const Case& c) {
  exec::TrainingConfig config;
  config.model.layers = kLayers;
  config.model.hidden = 24;
  config.model.residual = c.residual;
  config.model.activation = c.activation;
  config.model.loss = c.loss;
  config.model.seed = 7;
  config.microbatch_size = 4;
  config.optimizer = c.optimizer;
  config.lr = c.optimizer == "adam" ? c.adam_lr : static_cast<float>(c.lr);
  config.momentum = 0.9f;
  config.layers_per_stage = SplitOf(c);
  config.lr_schedule = c.lr_schedule;
  config.pipemare = c.pipemare;
  if (!c.data.empty()) config.model.data = exec::LoadLabeledSet(std::string(STAGECRAFT_SOURCE_DIR) + "/" + c.data, 24);
  if (c.gpt) {
    config.gpt = testing::kTestGpt;
    config.microbatch_size = 2;
  }
  // Each replica trains its slice of the reference's microbatch.
  config.microbatch_size /= c.data_parallel;
  config.data_parallel = c.data_parallel;
  return config;
}

// The links of one process of a data-parallel case: world rank w runs pipeline rank w % P of
// replica w / P over a pipeline transport of its replica and the group of its pipeline rank's
// replicas; the processes beyond P x D take no part.
struct ReplicaLinks {
  exec::WorldLayout layout;
  bool runs = false;
  std::unique_ptr<exec::Transport> pipeline;
  std::unique_ptr<exec::ReplicaGroup> group;
};
ReplicaLinks MakeReplicaLinks(int ranks, int replicas) {
  ReplicaLinks links;
  links.layout = {ranks, replicas};
  const int w = g_transport->rank();
  links.runs = w < links.layout.world();
  // Both split from the world (the idle processes: a pipeline together, a replica group each).
  const exec::MpiGroup world = exec::MpiGroup::World();
  links.pipeline = exec::MakeMpiTransport(world.Split(exec::PipelineKey(links.layout, w)));
  links.group = exec::MakeMpiReplicaGroup(world.Split(exec::ReplicaKey(links.layout, w)), exec::kDefaultWaitDeadline);
  return links;
}

// Runs the case on every rank; on rank 0 returns every layer's final [W | b] and the losses.
struct Outcome {
  std::vector<std::vector<float>> layers;  // the MLP's, per layer
  std::vector<std::vector<float>> stages;  // the transformer's, per stage
  std::vector<double> losses;
};
// Rank 0's Outcome from every rank's serialized run (`all`, by pipeline rank: replica 0's).
Outcome Collect(const schedules::Schedule& s, const exec::TrainingConfig& config, const std::vector<std::string>& all);

// A data-parallel case (c.data_parallel > 1): replica 0's run is the outcome; every other
// replica's final weights must equal replica 0's bit for bit (they apply the same summed
// gradients to the same weights), else the outcome's losses are cleared to fail the case.
Outcome RunReplicas(const Case& c, const exec::TrainingConfig& config, const schedules::Schedule& s) {
  ReplicaLinks links = MakeReplicaLinks(c.ranks, c.data_parallel);
  std::string mine;
  if (links.runs) {
    auto device = MakeTestDevice(c.precision);
    if (kCuda) {  // GPU memory: tensors and sums over NCCL (DataParallelUnavailable said it can)
      links.pipeline = exec::MakeNcclTransport(std::move(links.pipeline), *device);
      links.group = exec::MakeNcclReplicaGroup(std::move(links.group), *device, exec::kDefaultWaitDeadline);
    }
    const int rank = links.pipeline->rank(), replica = links.group->replica();
    const exec::Dataset data =
        exec::MakeDataset(*device, config, static_cast<int64_t>(c.microbatches) * c.steps, rank == s.shape.RankOf(0),
                          rank == s.shape.RankOf(s.stages() - 1), {}, replica);
    exec::RunHooks hooks;
    hooks.keep_final_params = true;
    mine = exec::SerializeRankRun(exec::RunRank(s, config, data, *device, *links.pipeline, hooks, links.group.get()));
  }
  const std::vector<std::string> all = g_transport->Gather(mine, 0);
  if (g_transport->rank() != 0) return {};
  const int ranks = s.ranks();
  Outcome out = Collect(s, config, std::vector<std::string>(all.begin(), all.begin() + ranks));
  for (int w = ranks; w < links.layout.world(); ++w) {
    const exec::RankRun theirs = exec::ParseRankRun(all[w]), ours = exec::ParseRankRun(all[w % ranks]);
    EXPECT_EQ(theirs.final_params, ours.final_params) << c.schedule << ": replica " << w / ranks << " rank "
                                                      << w % ranks << " holds other weights than replica 0";
    EXPECT_FALSE(ours.final_params.empty());
  }
  return out;
}

// The shape of case `c`'s schedule: its ranks, microbatches, chunks, steps and replicas.
schedules::GeneratorParams ShapeOf(const Case& c) {
  schedules::GeneratorParams p;
  p.ranks = c.ranks;
  p.microbatches = c.microbatches;
  p.chunks = c.chunks;
  p.steps = c.steps;
  p.data_parallel = c.data_parallel;
  return p;
}

Outcome RunPipeline(const Case& c, const exec::TrainingConfig& config) {
  schedules::GeneratorParams p = ShapeOf(c);
  p.recompute = c.recompute;
  p.vertical_sync = c.vertical_sync;
  schedules::CsvImportOptions imported;
  imported.chunks = 0;  // stages per rank and placement from the file
  imported.microbatches = c.microbatches;
  imported.steps = c.steps;
  imported.repeat_one_step = true;
  const schedules::Schedule s = schedules::Lower(c.csv.empty() ? schedules::Generate(c.schedule, p)
                                                               : schedules::ImportCsv(c.csv, c.schedule, imported));
  EXPECT_TRUE(schedules::Validate(s).empty());
  if (c.data_parallel > 1) return RunReplicas(c, config, s);
  auto device = MakeTestDevice(c.precision);
  std::unique_ptr<exec::Transport> own;  // over a second MPI transport of the same world
  if (c.link == Link::kStaged) own = exec::MakeStagedTransport(exec::MakeMpiTransport(), *device);
  if (c.link == Link::kNccl) own = exec::MakeNcclTransport(exec::MakeMpiTransport(), *device);
  exec::Transport& transport = own ? *own : *g_transport;
  const int rank = g_transport->rank();
  std::string mine;
  if (rank < s.ranks()) {
    const exec::Dataset data = exec::MakeDataset(*device, config, static_cast<int64_t>(c.microbatches) * c.steps, rank == s.shape.RankOf(0),
                                                 rank == s.shape.RankOf(s.stages() - 1));
    exec::RunHooks hooks;
    hooks.keep_final_params = true;  // compared with the reference's below
    hooks.step_graphs = c.step_graphs;
    mine = exec::SerializeRankRun(exec::RunRank(s, config, data, *device, transport, hooks));
  } else {
    exec::SetupRounds(*g_transport).Finish();  // the rounds that end RunRank's set-up
  }
  const std::vector<std::string> all = g_transport->Gather(mine, 0);
  if (rank != 0) return {};
  return Collect(s, config, all);
}

Outcome Collect(const schedules::Schedule& s, const exec::TrainingConfig& config, const std::vector<std::string>& all) {
  Outcome out;
  const int h = config.model.hidden;
  const int64_t layer_floats = static_cast<int64_t>(h) * h + h;
  out.layers.resize(config.model.layers);
  out.stages.resize(static_cast<size_t>(s.stages()));
  for (int r = 0; r < s.ranks(); ++r) {
    const exec::RankRun run = exec::ParseRankRun(all[r]);
    if (!run.record.losses.empty()) out.losses = run.record.losses;
    for (int chunk = 0; chunk < s.shape.chunks; ++chunk) {
      const int stage = s.shape.StageOf(r, chunk);
      if (config.gpt) {
        out.stages[stage] = run.final_params.at(chunk);
        continue;
      }
      int first = 0;
      for (int st = 0; st < stage; ++st) first += config.layers_per_stage[st];
      for (int l = 0; l < config.layers_per_stage[stage]; ++l) {
        const float* at = run.final_params.at(chunk).data() + l * layer_floats;
        out.layers[first + l].assign(at, at + layer_floats);
      }
    }
  }
  return out;
}

// The losses per step within the tolerance (relative); a data-parallel case prints its largest
// relative difference (the report's measure of "trains exactly as one pipeline of D·b").
void ExpectLossesMatch(const Case& c, const std::vector<double>& got, const std::vector<double>& want,
                       double tolerance) {
  ASSERT_EQ(got.size(), want.size()) << c.schedule;
  double worst = 0;
  for (size_t t = 0; t < want.size(); ++t) {
    EXPECT_NEAR(got[t], want[t], tolerance * std::abs(want[t])) << c.schedule << " step " << t;
    worst = std::max(worst, std::abs(got[t] - want[t]) / std::abs(want[t]));
  }
  if (c.data_parallel > 1) {
    std::printf("[ data-parallel ] %s%s P=%d x D=%d: max relative loss difference %.3g over %zu steps\n",
                c.schedule.c_str(), c.gpt ? " (gpt)" : "", c.ranks, c.data_parallel, worst, want.size());
  }
}

// The transformer: every stage's final weights against the sequential reference's, and the
// losses, within the tolerance; the weights really moved.
void ExpectGptMatchesReference(const Case& c, const exec::TrainingConfig& config, const Outcome& got,
                               Staleness staleness) {
  const testing::GptReferenceResult want =
      testing::TrainGptReference(exec::WholeBatch(config), c.microbatches, c.steps, staleness, c.vertical_sync);
  const double tolerance = ToleranceFor(c.precision);
  ASSERT_EQ(got.stages.size(), want.stage_params.size());
  for (size_t st = 0; st < want.stage_params.size(); ++st) {
    const std::vector<float>& ref = want.stage_params[st];
    ASSERT_EQ(got.stages[st].size(), ref.size()) << c.schedule << " stage " << st;
    double diff2 = 0, ref2 = 0, moved2 = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
      const double d = got.stages[st][i] - ref[i], m = ref[i] - want.initial_params[st][i];
      diff2 += d * d, ref2 += double{ref[i]} * ref[i], moved2 += m * m;
    }
    EXPECT_LE(std::sqrt(diff2 / ref2), tolerance) << c.schedule << " stage " << st << " (relative L2 error)";
    EXPECT_GT(std::sqrt(moved2 / ref2), 1e-3) << c.schedule << " stage " << st << " (the weights moved)";
  }
  ExpectLossesMatch(c, got.losses, want.losses, tolerance);
}

void ExpectMatchesReference(const Case& c, Staleness staleness) {
  const exec::TrainingConfig config = ConfigFor(c);
  const Outcome got = RunPipeline(c, config);
  if (g_transport->rank() != 0) return;
  if (c.gpt) return ExpectGptMatchesReference(c, config, got, staleness);
  testing::ReferenceConfig rc;
  rc.model = config.model;
  rc.microbatch_size = exec::WholeBatch(config).microbatch_size;  // D·b with D replicas
  rc.microbatches = c.microbatches;
  rc.steps = c.steps;
  rc.optimizer = c.optimizer;
  rc.lr = config.lr;
  rc.momentum = config.momentum;
  rc.staleness = staleness;
  rc.layers_per_stage = config.layers_per_stage;
  rc.vertical_sync = c.vertical_sync;
  rc.dataset_microbatches = c.dataset_microbatches;
  rc.warmup_steps = c.lr_schedule.warmup_steps;
  rc.decay = std::string(sim::Name(c.lr_schedule.decay));
  rc.min_lr = c.lr_schedule.min_lr;
  if (c.pipemare) {
    rc.lr_reschedule_steps = c.pipemare->lr_reschedule_steps;
    rc.correction = c.pipemare->correction;
    rc.correction_decay = c.pipemare->correction_decay;
  }
  const testing::ReferenceResult want = testing::TrainReference(rc);
  const std::vector<testing::LayerParams> init = testing::ReferenceInitialParams(config.model);
  const double tolerance = ToleranceFor(c.precision);
  const int h = config.model.hidden;
  for (int l = 0; l < config.model.layers; ++l) {
    ASSERT_EQ(got.layers[l].size(), static_cast<size_t>(h) * h + h) << "layer " << l;
    double diff2 = 0, ref2 = 0, moved2 = 0, max_diff = 0, max_ref = 0;
    for (int64_t i = 0; i < static_cast<int64_t>(h) * h + h; ++i) {
      const bool bias = i >= static_cast<int64_t>(h) * h;
      const double ref = bias ? want.biases[l][i - h * h] : want.weights[l][i];
      const double start = bias ? init[l].bias[i - h * h] : init[l].weight[i];
      const double d = got.layers[l][i] - ref;
      diff2 += d * d;
      ref2 += ref * ref;
      moved2 += (ref - start) * (ref - start);
      max_diff = std::max(max_diff, std::abs(d));
      max_ref = std::max(max_ref, std::abs(ref));
    }
    EXPECT_LE(std::sqrt(diff2 / ref2), tolerance) << c.schedule << " layer " << l << " (relative L2 error)";
    EXPECT_LE(max_diff, tolerance * max_ref) << c.schedule << " layer " << l << " (max error vs max |w|)";
    // The training really moved the weights, so matching them means something.
    EXPECT_GT(std::sqrt(moved2 / ref2), 1e-3) << c.schedule << " layer " << l;
  }
  ExpectLossesMatch(c, got.losses, want.losses, tolerance);
}

// Every registered generator, with the staleness its weight policy documents: adding a
// schedule to the table adds it here.
struct ScheduleCase {
  Case c;
  Staleness staleness = Staleness::kFlush;
};
ScheduleCase CaseFor(const schedules::GeneratorInfo& info) {
  ScheduleCase sc{.c = {.schedule = std::string(info.name), .chunks = info.interleaved ? 2 : 1}};
  if (schedules::PolicyInfo(info.weights).update_per_microbatch) {
    sc.c.lr = 0.02;  // stale weights, an update per microbatch: a smaller step stays stable
    sc.c.adam_lr = testing::kAdamLrPerMicrobatch;  // and updates m times a step (gpt_reference.h)
    sc.staleness = info.weights == schedules::WeightPolicy::kStash ? Staleness::kPipeDream : Staleness::kPipeMare;
  } else if (info.weights == schedules::WeightPolicy::kTwoBW) {
    sc.staleness = Staleness::kTwoBW;
  }
  return sc;
}

std::vector<const schedules::GeneratorInfo*> AllGenerators() {
  std::vector<const schedules::GeneratorInfo*> all;
  for (const schedules::GeneratorInfo& info : schedules::Generators()) {
    if (info.in_all) all.push_back(&info);  // spilled is not executed yet
  }
  return all;
}
std::string TestName(const ::testing::TestParamInfo<const schedules::GeneratorInfo*>& p) {
  std::string name(p.param->name);
  for (char& ch : name) {
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  }
  return name;
}

class EverySchedule : public ::testing::TestWithParam<const schedules::GeneratorInfo*> {};
TEST_P(EverySchedule, MatchesReference) {
  const ScheduleCase sc = CaseFor(*GetParam());
  ExpectMatchesReference(sc.c, sc.staleness);
}
INSTANTIATE_TEST_SUITE_P(Generators, EverySchedule, ::testing::ValuesIn(AllGenerators()), TestName);

// Every schedule on the transformer, with Adam (its update is the same size whatever the
// gradient's, so every weight moves measurably in 3 steps).
class EveryScheduleGpt : public ::testing::TestWithParam<const schedules::GeneratorInfo*> {};
TEST_P(EveryScheduleGpt, MatchesReference) {
  ScheduleCase sc = CaseFor(*GetParam());
  sc.c.gpt = true;
  sc.c.optimizer = "adam";
  ExpectMatchesReference(sc.c, sc.staleness);
}
INSTANTIATE_TEST_SUITE_P(Generators, EveryScheduleGpt, ::testing::ValuesIn(AllGenerators()), TestName);
// The search's orders (harness/search.h) in the table: each, through the CSV `stagecraft search`
// writes, trains to the reference like a generator's. The cases are ones where the search moves
// ops off its start (checked), so they are orders no generator writes.
struct SearchedCase {
  const char* label;
  const char* scenario;  // under the source tree
  const char* from;      // the start; empty: the fastest generator
  int64_t evaluations;
};
const SearchedCase kSearchedCases[] = {
    {"uneven_from_zb_h1", "tests/data/search-uneven-4.yaml", "zb-h1", 1500},
    {"mlp_cpu", "scenarios/mlp-cpu.yaml", "", 3000},
};
ScheduleCase SearchedScheduleCase(const SearchedCase& searched) {
  const sim::Scenario sc = sim::LoadScenario(std::string(STAGECRAFT_SOURCE_DIR) + "/" + searched.scenario);
  harness::SearchOptions options;
  options.max_evaluations = searched.evaluations;
  options.from = searched.from;
  const harness::SearchResult r = harness::SearchSchedule(sc, options);
  EXPECT_NE(r.best.ops, r.start.ops) << searched.label << ": the search left " << r.start_name << " as it was";
  return {.c = {.schedule = std::string(searched.label) + ".csv",
                .ranks = r.best.ranks(),
                .chunks = r.best.shape.chunks,
                .microbatches = r.best.microbatches,
                .csv = schedules::ExportCsv(r.best, schedules::CsvForm::kComputeOnly)}};
}
std::string SearchedName(const ::testing::TestParamInfo<SearchedCase>& p) { return p.param.label; }

class EverySearchedSchedule : public ::testing::TestWithParam<SearchedCase> {};
TEST_P(EverySearchedSchedule, MatchesReference) {
  const ScheduleCase sc = SearchedScheduleCase(GetParam());
  ExpectMatchesReference(sc.c, sc.staleness);
}
TEST_P(EverySearchedSchedule, GptMatchesReference) {
  ScheduleCase sc = SearchedScheduleCase(GetParam());
  sc.c.gpt = true;
  sc.c.optimizer = "adam";
  ExpectMatchesReference(sc.c, sc.staleness);
}
INSTANTIATE_TEST_SUITE_P(Searched, EverySearchedSchedule, ::testing::ValuesIn(kSearchedCases), SearchedName);

TEST(RuntimeMpi, GptZbH2Recompute) {
  ExpectMatchesReference({.schedule = "zb-h2", .recompute = true, .optimizer = "adam", .gpt = true}, Staleness::kFlush);
}

// An imported V schedule (PyTorch's CSV, one step, its placement inferred) trains to the
// reference's weights like a generated one: GPipe's order down the V and back, p = 2, m = 2,
// with a sharding action PyTorch writes and the import skips.
TEST(RuntimeMpi, ImportedVSchedule) {
  const std::string v =
      "0F0,0F1,3F0,3F1,3B0,3B1,0B0,0B1\n"
      "1UNSHARD,1F0,1F1,2F0,2F1,2B0,2B1,1B0,1B1\n";
  ExpectMatchesReference({.schedule = "v-gpipe.csv", .ranks = 2, .chunks = 2, .microbatches = 2, .csv = v},
                         Staleness::kFlush);
  ExpectMatchesReference(
      {.schedule = "v-gpipe.csv", .ranks = 2, .chunks = 2, .microbatches = 2, .optimizer = "adam", .gpt = true, .csv = v},
      Staleness::kFlush);
}

// PyTorch's DualPipeV order for p = 2, m = 4 as its CSV writes it, overlapped pairs included,
// trains to the reference's weights (MLP and GPT).
TEST(RuntimeMpi, ImportedDualPipeVWithOverlappedPairs) {
  const std::string v =
      "0F0,0F1,0F2,3F0,3I0,3W0,3F1,(0F3;3B1)OVERLAP_F_B,(3F2;0B0)OVERLAP_F_B,3B2,(3F3;0B1)OVERLAP_F_B,3B3,"
      "0I2,0W2,0I3,0W3\n"
      "1F0,2F0,1F1,2F1,1F2,2B0,(2F2;1B0)OVERLAP_F_B,(1F3;2B1)OVERLAP_F_B,(2F3;1B1)OVERLAP_F_B,2B2,1B2,"
      "2I3,1I3,2W3,1W3\n";
  ExpectMatchesReference({.schedule = "dualpipe-v.csv", .ranks = 2, .chunks = 2, .microbatches = 4, .csv = v},
                         Staleness::kFlush);
  ExpectMatchesReference({.schedule = "dualpipe-v.csv", .ranks = 2, .chunks = 2, .microbatches = 4, .gpt = true,
                          .csv = v},
                         Staleness::kFlush);
}

// PyTorch's interleaved order at m = p (its capped warm-up, not Megatron's), imported.
TEST(RuntimeMpi, ImportedPyTorchInterleavedAtMEqualsP) {
  ExpectMatchesReference({.schedule = "interleaved-pytorch.csv", .ranks = 2, .chunks = 2, .microbatches = 2,
                          .csv = "0F0,0F1,2F0,2F1,2B0,2B1,0B0,0B1\n1F0,1F1,3F0,3B0,3F1,3B1,1B0,1B1\n"},
                         Staleness::kFlush);
}
// Interleaved with m not a multiple of p (PyTorch's flexible order).
TEST(RuntimeMpi, InterleavedThreeMicrobatchesOnTwoRanks) {
  ExpectMatchesReference({.schedule = "interleaved", .ranks = 2, .chunks = 2, .microbatches = 3}, Staleness::kFlush);
}

// Data parallelism (DESIGN.md §9): D replicas of microbatch size b train exactly as one pipeline
// of microbatch size D·b. Every schedule as P = 2 ranks x D = 2 replicas (the job's 4
// processes) and P = 1 x D = 2 (2 of them; a generator that cannot run on one rank is skipped
// alike on every rank), against the sequential reference trained at D·b; every replica ends
// with replica 0's weights.
// On the cuda device replicas sum GPU memory over NCCL (the MPI group sums host memory), which
// needs a GPU per process: why they cannot run here ("" when they can). Every rank sees the same
// machine, so all skip alike.
std::string DataParallelUnavailable() {
  if (!kCuda) return "";
  if (!exec::HaveNccl()) return "this build has no NCCL";
  if (!exec::EveryProcessHasItsOwnGpu(exec::GpuForLocalRank(g_transport->rank(), exec::CudaDeviceCount()))) {
    return "replicas on the cuda device need NCCL and a GPU per process";
  }
  return "";
}
bool Generates(const Case& c) {
  try {
    return schedules::Validate(schedules::Lower(schedules::Generate(c.schedule, ShapeOf(c)))).empty();
  } catch (const std::exception&) {
    return false;
  }
}
class EveryScheduleDataParallel : public ::testing::TestWithParam<const schedules::GeneratorInfo*> {};
TEST_P(EveryScheduleDataParallel, TwoRanksTimesTwoReplicasMatchReference) {
  if (const std::string why = DataParallelUnavailable(); !why.empty()) GTEST_SKIP() << why;
  ScheduleCase sc = CaseFor(*GetParam());
  sc.c.ranks = 2;
  sc.c.data_parallel = 2;
  ExpectMatchesReference(sc.c, sc.staleness);
}
TEST_P(EveryScheduleDataParallel, OneRankTimesTwoReplicasMatchReference) {
  if (const std::string why = DataParallelUnavailable(); !why.empty()) GTEST_SKIP() << why;
  ScheduleCase sc = CaseFor(*GetParam());
  sc.c.ranks = 1;
  sc.c.data_parallel = 2;
  if (!Generates(sc.c)) GTEST_SKIP() << sc.c.schedule << " does not run on one rank";
  ExpectMatchesReference(sc.c, sc.staleness);
}
INSTANTIATE_TEST_SUITE_P(Generators, EveryScheduleDataParallel, ::testing::ValuesIn(AllGenerators()), TestName);

// The transformer's replicas take whole sequences of each microbatch: 1F1B on 2 ranks and GPipe
// on one, Adam.
TEST(RuntimeMpi, DataParallelGpt) {
  if (const std::string why = DataParallelUnavailable(); !why.empty()) GTEST_SKIP() << why;
  ExpectMatchesReference({.schedule = "1f1b", .ranks = 2, .optimizer = "adam", .gpt = true, .data_parallel = 2},
                         Staleness::kFlush);
  ExpectMatchesReference({.schedule = "gpipe", .ranks = 1, .optimizer = "adam", .gpt = true, .data_parallel = 2},
                         Staleness::kFlush);
}

// The MPI replica group on its own: the job's 4 processes as P = 2 x D = 2. World rank w posts
// {w, 1, 10 + w} twice; each pipeline rank's group sums over its replicas (ranks p and p + 2),
// one sum completed by polling, one by a wait. The pipeline transport of each replica ranks its
// processes 0, 1, and the losses' mean over the replicas is replica 0's to hold.
TEST(ReplicaGroupMpi, SumsOverEachPipelineRanksReplicas) {
  if (kCuda) GTEST_SKIP() << "the MPI group sums host memory (the cpu device's)";
  ReplicaLinks links = MakeReplicaLinks(2, 2);
  const int w = g_transport->rank();
  std::vector<float> a = {float(w), 1, float(10 + w)}, b = a;
  const exec::ReplicaGroup::Request ra = links.group->PostSum(a.data(), 3);
  const exec::ReplicaGroup::Request rb = links.group->PostSum(b.data(), 3);
  while (!links.group->Test(ra)) {
  }
  links.group->Wait(rb);
  const std::vector<double> mean = exec::MeanOverReplicas(links.group->host(), {double(w), 1.0});
  const std::string mine = fmt::format("{} {} {} {} {} {} {} {} {} {}", a[0], a[1], a[2], b == a ? "same" : "other",
                                       links.group->replica(), links.group->size(), links.pipeline->rank(),
                                       links.pipeline->size(), mean[0], mean[1]);
  const std::vector<std::string> all = g_transport->Gather(mine, 0);
  if (w != 0) return;
  for (int r = 0; r < 4; ++r) {
    const int q = r % 2;  // pipeline rank; replicas q and q + 2 sum
    // Replica 0 (r < 2) holds the mean of the world ranks q and q + 2; replica 1 its own.
    const std::string mean_text = r < 2 ? fmt::format("{} 1", double(2 * q + 2) / 2) : fmt::format("{} 1", double(r));
    EXPECT_EQ(all[r], fmt::format("{} 2 {} same {} 2 {} 2 {}", 2 * q + 2, 20 + 2 * q + 2, r / 2, q, mean_text))
        << "world rank " << r;
  }
}

// Every schedule over NCCL, when every rank of the job has a GPU of its own (the ranks sharing a
// GPU above cannot use it). Every rank sees the same machine, so all skip alike.
// Why the NCCL cases cannot run here; empty when they can.
std::string NcclUnavailable() {
  if (!kCuda) return "NCCL runs on the cuda device";
  const int gpus = exec::CudaDeviceCount();
  // The GPU MakeTestDevice gives this rank.
  if (exec::HaveNccl() && exec::EveryProcessHasItsOwnGpu(exec::GpuForLocalRank(g_transport->rank(), gpus))) return {};
  return fmt::format("NCCL needs a GPU per rank: {} ranks, {} GPU(s){}", g_transport->size(), gpus,
                     exec::HaveNccl() ? "" : ", and this build has no NCCL");
}
class EveryScheduleOverNccl : public ::testing::TestWithParam<const schedules::GeneratorInfo*> {};
TEST_P(EveryScheduleOverNccl, MatchesReference) {
  if (const std::string why = NcclUnavailable(); !why.empty()) GTEST_SKIP() << why;
  ScheduleCase sc = CaseFor(*GetParam());
  sc.c.link = Link::kNccl;
  ExpectMatchesReference(sc.c, sc.staleness);
}
// With step graphs (issue 57): a flush schedule's steady step is captured with its NCCL
// transfers, the receives waits on the GPU, and launched again each later step (5 steps: three
// replayed); the others run call by call. Either way the weights are the reference's.
TEST_P(EveryScheduleOverNccl, MatchesReferenceWithStepGraphs) {
  if (const std::string why = NcclUnavailable(); !why.empty()) GTEST_SKIP() << why;
  ScheduleCase sc = CaseFor(*GetParam());
  sc.c.link = Link::kNccl;
  sc.c.step_graphs = true;
  sc.c.steps = 5;
  ExpectMatchesReference(sc.c, sc.staleness);
}
INSTANTIATE_TEST_SUITE_P(Generators, EveryScheduleOverNccl, ::testing::ValuesIn(AllGenerators()), TestName);

// Options and shapes on top of the schedules.
// Static loss scaling: the loss gradient times a power of two, divided back out in the update,
// is exact in binary floating point, so the weights and losses are those of the unscaled run bit
// for bit (MSE and cross-entropy, a flush and a per-microbatch update). A scale left in the
// gradients would move the weights 2^16 times as far.
TEST(RuntimeMpi, LossScaleIsTakenBackOutBitForBit) {
  for (const Case& c : {Case{.schedule = "1f1b", .ranks = 2}, Case{.schedule = "pipedream", .ranks = 2, .lr = 0.02},
                        Case{.schedule = "zb-h1", .ranks = 2, .optimizer = "adam", .gpt = true}}) {
    exec::TrainingConfig plain = ConfigFor(c);
    exec::TrainingConfig scaled = plain;
    scaled.loss_scale = 65536.0f;
    const Outcome a = RunPipeline(c, plain);
    const Outcome b = RunPipeline(c, scaled);
    if (g_transport->rank() != 0) continue;
    EXPECT_EQ(a.losses, b.losses) << c.schedule;
    EXPECT_FALSE(a.losses.empty()) << c.schedule;
    EXPECT_EQ(c.gpt ? a.stages : a.layers, c.gpt ? b.stages : b.layers) << c.schedule;
  }
}

TEST(RuntimeMpi, PipeDreamVerticalSync) {
  ExpectMatchesReference({.schedule = "pipedream", .vertical_sync = true, .lr = 0.02}, Staleness::kPipeDream);
}
// PipeMare's techniques and the learning-rate schedule against the reference's restatement:
// the correction alone, the rescheduling with a warm-up and cosine decay, both with Adam.
TEST(RuntimeMpi, PipeMareCorrection) {
  ExpectMatchesReference({.schedule = "pipemare", .lr = 0.02, .pipemare = sim::PipeMareSpec{0, true, 0.8}},
                         Staleness::kPipeMare);
}
TEST(RuntimeMpi, PipeMareRescheduledWithWarmupAndCosineDecay) {
  ExpectMatchesReference({.schedule = "pipemare", .lr = 0.05,
                          .lr_schedule = {.warmup_steps = 1, .decay = sim::LrDecay::kCosine, .min_lr = 0.005},
                          .pipemare = sim::PipeMareSpec{2, false, 0.9}},
                         Staleness::kPipeMare);
}
TEST(RuntimeMpi, PipeMareBothTechniquesAdam) {
  ExpectMatchesReference({.schedule = "pipemare", .optimizer = "adam", .adam_lr = testing::kAdamLrPerMicrobatch,
                          .pipemare = sim::PipeMareSpec{2, true, 0.9}},
                         Staleness::kPipeMare);
}
// A real labelled set instead of the teacher's data: the executor and the reference read the
// same rows (exec::MicrobatchInput / MicrobatchTarget), and train to the same weights.
TEST(RuntimeMpi, MlpClassifiesALabelledSet) {
  ExpectMatchesReference({.schedule = "1f1b", .loss = kernels::LossKind::kCrossEntropy,
                          .data = "tests/data/labeled-tiny.csv"},
                         Staleness::kFlush);
  ExpectMatchesReference({.schedule = "pipemare", .lr = 0.02, .loss = kernels::LossKind::kCrossEntropy,
                          .pipemare = sim::PipeMareSpec{0, true, 0.9}, .data = "tests/data/labeled-tiny.csv"},
                         Staleness::kPipeMare);
}
TEST(RuntimeMpi, OneFOneBLinearDecay) {
  ExpectMatchesReference({.schedule = "1f1b", .steps = 4,
                          .lr_schedule = {.warmup_steps = 2, .decay = sim::LrDecay::kLinear}},
                         Staleness::kFlush);
}
TEST(RuntimeMpi, OneFOneBAdam) { ExpectMatchesReference({.schedule = "1f1b", .optimizer = "adam"}, Staleness::kFlush); }
TEST(RuntimeMpi, ZbH1Recompute) { ExpectMatchesReference({.schedule = "zb-h1", .recompute = true}, Staleness::kFlush); }
TEST(RuntimeMpi, ZbH2ResidualCrossEntropy) {
  ExpectMatchesReference({.schedule = "zb-h2", .residual = true, .loss = kernels::LossKind::kCrossEntropy},
                         Staleness::kFlush);
}
TEST(RuntimeMpi, ZbH1Relu) {
  ExpectMatchesReference({.schedule = "zb-h1", .activation = kernels::Activation::kRelu}, Staleness::kFlush);
}
TEST(RuntimeMpi, PipeDreamUnevenSplit) {
  ExpectMatchesReference({.schedule = "pipedream", .lr = 0.02, .split = {3, 1, 2, 2}}, Staleness::kPipeDream);
}
// A run of more microbatches than a dataset holds (exec::kMaxDatasetMicrobatches, 64) cycles
// through its 64: 3 steps of 32 train the reference's microbatches 64..95 on the data of 0..31.
TEST(RuntimeMpi, ARunLongerThanItsDatasetCyclesThroughIt) {
  ExpectMatchesReference({.schedule = "1f1b", .microbatches = 32, .dataset_microbatches = 64}, Staleness::kFlush);
}
TEST(RuntimeMpi, TwoRanksOfFourAndOneMicrobatch) {
  ExpectMatchesReference({.schedule = "1f1b", .ranks = 2, .microbatches = 1}, Staleness::kFlush);
}
// Through host buffers (how ranks sharing a GPU move tensors): the same weights.
TEST(RuntimeMpi, HostStagedZbH2) {
  ExpectMatchesReference({.schedule = "zb-h2", .link = Link::kStaged}, Staleness::kFlush);
}
TEST(RuntimeMpi, HostStagedPipeDream) {
  ExpectMatchesReference({.schedule = "pipedream", .lr = 0.02, .link = Link::kStaged}, Staleness::kPipeDream);
}
TEST(RuntimeMpi, HostStagedInterleavedTwoRanks) {
  ExpectMatchesReference({.schedule = "interleaved", .ranks = 2, .chunks = 2, .link = Link::kStaged},
                         Staleness::kFlush);
}

// The cuda device's reduced GEMM precisions (cuda_plan.h), each within its own tolerance.
TEST(RuntimeMpi, GemmPrecisions) {
  if (!kCuda) GTEST_SKIP() << "GEMM precisions other than fp32 are the cuda device's";
  for (const auto precision : {exec::GemmPrecision::kTf32, exec::GemmPrecision::kBf16, exec::GemmPrecision::kFp16}) {
    SCOPED_TRACE("precision " + std::to_string(static_cast<int>(precision)));
    ExpectMatchesReference({.schedule = "1f1b", .precision = precision}, Staleness::kFlush);
  }
}


// A receive that nobody sends ends on the transport's deadline with one message naming the
// transfer, instead of hanging; the cancelled receive leaves nothing pending (the barrier after
// it and every later case still match).
// What decides NCCL against host staging: every process of the node sees every other's string,
// in node-rank order (the test's 4 processes run on one node).
TEST(RuntimeMpi, GatherOnNodeSeesEveryProcessOfTheNode) {
  const std::vector<std::string> all = exec::MpiGatherOnNode("rank " + std::to_string(g_transport->rank()));
  ASSERT_EQ(all.size(), static_cast<size_t>(exec::MpiLocalSize()));
  for (size_t r = 0; r < all.size(); ++r) EXPECT_EQ(all[r], "rank " + std::to_string(r));
  EXPECT_THROW(exec::MpiGatherOnNode(std::string(256, 'x')), std::invalid_argument);
}

TEST(TransportDeadline, AReceiveNobodySendsEndsOnTheDeadline) {
  auto transport = exec::MakeMpiTransport(std::chrono::milliseconds(300));
  std::string mine = "-";
  if (transport->rank() == 1) {
    std::vector<float> buffer(4);
    const auto start = std::chrono::steady_clock::now();
    const exec::Transport::Request r = transport->Irecv(buffer.data(), 4, 0, 4242);
    try {
      transport->Wait(r);
      mine = "returned";
    } catch (const std::runtime_error& e) {
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      const std::string what = e.what();
      mine = what.find("the MPI receive from rank 0 (tag 4242) did not complete within 0.3 s") != std::string::npos &&
                     seconds >= 0.3 && seconds < 10
                 ? "timed out"
                 : what + " after " + std::to_string(seconds) + " s";
    }
  }
  const std::vector<std::string> all = g_transport->Gather(mine, 0);
  if (g_transport->rank() == 0) {
    EXPECT_EQ(all.at(1), "timed out");
  }
}

// Gather and Broadcast move a text of any size in pieces (MPI counts are int, and a rank's
// measurements of a large run pass 2^31 bytes): with pieces of 7 bytes, texts of 0 to 300
// bytes, one of them empty, arrive whole and in order, as does a broadcast of 1000 bytes.
TEST(TransportPieces, GatherAndBroadcastOfTextsLongerThanOnePiece) {
  auto transport = exec::MakeMpiTransport(exec::kDefaultWaitDeadline, 7);
  const auto text_of = [](int rank) {
    std::string t;
    for (int i = 0; i < rank * 97 + (rank == 1 ? 0 : 9); ++i) t.push_back(static_cast<char>('a' + (i * 7 + rank) % 26));
    if (rank == 1) t.clear();  // a rank with nothing to say
    return t;
  };
  const std::vector<std::string> all = transport->Gather(text_of(transport->rank()), 0);
  std::string broadcast;
  if (transport->rank() == 0) {
    ASSERT_EQ(static_cast<int>(all.size()), transport->size());
    for (int r = 0; r < transport->size(); ++r) EXPECT_EQ(all[r], text_of(r)) << "rank " << r;
    for (int i = 0; i < 1000; ++i) broadcast.push_back(static_cast<char>(i % 251));
  } else {
    EXPECT_TRUE(all.empty());
  }
  transport->Broadcast(&broadcast, 0);
  ASSERT_EQ(broadcast.size(), 1000u);
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(broadcast[i], static_cast<char>(i % 251)) << i;
}

// Set-up outside the deadline: rank 0 builds for four times the deadline, showing progress
// between pieces of work shorter than it; every other rank, done at once, waits through it
// without timing out, in more than one round, and all leave the rounds together.
TEST(SetupRoundsMpi, AWaitCountsOnlyThePeersLastPieceOfWork) {
  constexpr auto kDeadline = std::chrono::milliseconds(400);
  auto transport = exec::MakeMpiTransport(kDeadline);
  exec::SetupRounds rounds(*transport);
  std::string mine;
  try {
    if (transport->rank() == 0) {
      const auto until = std::chrono::steady_clock::now() + 4 * kDeadline;
      while (std::chrono::steady_clock::now() < until) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));  // one piece of work
        rounds.Beat();
      }
    }
    rounds.Finish();
    mine = "finished after " + std::to_string(rounds.rounds()) + " rounds";
  } catch (const std::exception& e) {
    mine = e.what();
  }
  const std::vector<std::string> all = g_transport->Gather(mine, 0);
  if (g_transport->rank() != 0) return;
  // Every rank joined the same rounds, at least one per kBeatInterval of rank 0's 1.6 s.
  for (const std::string& seen : all) EXPECT_EQ(seen, all.front());
  int rounds_seen = 0;
  ASSERT_EQ(std::sscanf(all.front().c_str(), "finished after %d rounds", &rounds_seen), 1) << all.front();
  EXPECT_GE(rounds_seen, 4 * kDeadline / exec::SetupRounds::kBeatInterval / 2);
}

// The calibration's transfers (harness/calibrate.h) between ranks 1 and 2 of the job, the others
// only joining the barriers: the ping-pong reports one point per size, with a positive one-way
// time, on rank 1 alone, and the wait after computing is rank 2's alone; every rank returns.
// What each rank saw is gathered to rank 0, which checks it.
TEST(CalibrateMpi, PingPongAndWaitReportOnTheirRanks) {
  if (g_transport->size() < 3) GTEST_SKIP() << "needs 3 ranks";  // every rank skips alike
  if (kCuda) GTEST_SKIP() << "the calibration runs on the cpu device";
  auto device = exec::MakeCpuDevice();
  const std::vector<int64_t> sizes = {4096, 65536, 1048576};
  const std::vector<harness::PingPongPoint> points = harness::PingPong(*g_transport, *device, 1, 2, sizes, 5);
  const int64_t wait = harness::WaitAfterCompute(*g_transport, *device, 1, 2, 65536, 100'000, 5);
  // "<sizes with a positive time, comma-separated> | <wait is zero?>"
  std::string mine;
  for (const harness::PingPongPoint& p : points) mine += std::to_string(p.oneway_ns > 0 ? p.bytes : -p.bytes) + ",";
  mine += wait == 0 ? "|0" : wait > 0 ? "|+" : "|-";
  const std::vector<std::string> all = g_transport->Gather(mine, 0);
  if (g_transport->rank() != 0) return;
  for (int r = 0; r < static_cast<int>(all.size()); ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    EXPECT_EQ(all[r], r == 1 ? "4096,65536,1048576,|0" : r == 2 ? "|+" : "|0");
  }
}

}  // namespace
}  // namespace stagecraft

int main(int argc, char** argv) {
  stagecraft::exec::MpiSession session(&argc, &argv);
  auto transport = stagecraft::exec::MakeMpiTransport();
  stagecraft::g_transport = transport.get();
#if STAGECRAFT_TEST_CUDA
  // Every rank sees the same machine, so all skip alike; ctest reads exit code 77 as skipped.
  if (stagecraft::exec::CudaDeviceCount() == 0) {
    if (transport->rank() == 0) std::printf("SKIPPED: no CUDA device on this machine (exec_mpi_gpu_tests)\n");
    transport->Barrier();
    return 77;
  }
#endif
  ::testing::InitGoogleTest(&argc, argv);
#if STAGECRAFT_TEST_CUDA
  // The cases over NCCL (ctest exec.mpi_gpu_nccl) need a GPU of its own per rank: with fewer, the
  // whole run is skipped with the reason (exit 77), so ctest does not count it as passed.
  if (std::find(argv + 1, argv + argc, std::string("--needs-gpu-per-rank")) != argv + argc) {
    const int gpus = stagecraft::exec::CudaDeviceCount();
    const bool own = stagecraft::exec::EveryProcessHasItsOwnGpu(
        stagecraft::exec::GpuForLocalRank(transport->rank(), gpus));  // as MakeTestDevice picks
    if (!stagecraft::exec::HaveNccl() || !own) {
      if (transport->rank() == 0) {
        std::printf("SKIPPED: the NCCL cases need a GPU per rank and NCCL: %d ranks, %d GPU(s)%s (exec_mpi_gpu_tests)\n",
                    transport->size(), gpus, stagecraft::exec::HaveNccl() ? "" : ", and this build has no NCCL");
      }
      transport->Barrier();
      return 77;
    }
  }
#endif
  if (transport->rank() != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  const int failed = RUN_ALL_TESTS();
  transport->Barrier();
  return failed;
}
