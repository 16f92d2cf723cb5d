// The plan (harness/plan.h) on a small transformer on 2 nodes of 2 devices: its space counted by
// hand, its best never slower than any configuration of the space simulated directly (the
// pruning drops nothing that would place), every configuration it calls feasible within the
// memory limit by the simulator's own peaks, its Pareto front undominated, its floors below
// every run (Plan checks that itself), its winner written as a scenario that simulates to the
// same step, and its refusals.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "stagecraft/base/error.h"
#include "stagecraft/harness/plan.h"
#include "stagecraft/harness/predict.h"
#include "stagecraft/schedules/budget.h"
#include "stagecraft/schedules/generators.h"
#include "stagecraft/sim/scenario_checks.h"
#include "stagecraft/sim/topology.h"

namespace stagecraft::harness {
namespace {

// tests/data/plan-tiny.yaml: 8 layers of hidden 1024 (8 heads) on 2 nodes of 2 devices of 8 GiB.

class PlanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("plan_test_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
    path_ = (dir_ / "tiny.yaml").string();
    std::filesystem::copy_file(std::string(STAGECRAFT_SOURCE_DIR) + "/tests/data/plan-tiny.yaml", path_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  sim::Scenario Tiny() const { return sim::LoadScenario(path_); }
  static PlanOptions Options(int top = 100) {
    PlanOptions o;
    o.gpus = 4;
    o.global_batch = 8;
    o.top = top;
    o.threads = 2;
    o.refine = 0;
    return o;
  }

  std::filesystem::path dir_;
  std::string path_;
};

// Simulates `c` as `simulate` would from the scenario with the plan's overrides.
Prediction Direct(const std::string& path, const PlanConfig& c, const PlanOptions& o) {
  const sim::Scenario sc = sim::LoadScenario(path, ConfigOverrides(c, o));
  const sim::Topology topo(sc.topology);
  return Predict(sc, topo, ScenarioSchedules(sc, sc.pipeline.schedules).front());
}

// N = 4 on nodes of 2, B = 8, 1F1B, no recompute, even split. Layouts P x D x T: T = 1: (1, 4),
// (2, 2), (4, 1); T = 2: (1, 2), (2, 1); T = 4: (1, 1), refused (4 does not divide the node's 2
// devices). Microbatch splits b x m = B / D: D = 4: 2; D = 2: 3; D = 1: 4. ZeRO 0 and 1 where
// D > 1. So (1, 4, 1): 2 x 2, (2, 2, 1): 3 x 2, (4, 1, 1): 4, (1, 2, 2): 3 x 2, (2, 1, 2): 4 = 24.
TEST_F(PlanTest, CountsTheSpaceAsWorkedByHand) {
  PlanOptions o = Options();
  o.schedules = {"1f1b"};
  o.recompute = {sim::Recompute::kNone};
  o.partitions = {sim::Partition::kEven};
  const PlanResult r = Plan(Tiny(), o);
  EXPECT_EQ(r.layouts, 6);
  EXPECT_EQ(r.layouts_rejected[static_cast<int>(PlanReject::kTopology)], 1);
  EXPECT_EQ(r.layouts_rejected[static_cast<int>(PlanReject::kBatch)], 0);
  EXPECT_EQ(r.enumerated, 24);
  EXPECT_EQ(r.simulated, 24);  // top 100: nothing pruned, and 8 GiB holds them all
  EXPECT_EQ(r.entries.size(), 24u);
  std::vector<std::string> seen;
  for (const PlanEntry& e : r.entries) {
    const PlanConfig& c = e.config;
    EXPECT_EQ(int64_t{c.data_parallel} * c.microbatch_size * c.microbatches, 8) << DescribeConfig(c);
    EXPECT_EQ(c.ranks * c.data_parallel * c.tensor_parallel, 4) << DescribeConfig(c);
    EXPECT_TRUE(c.zero == 0 || c.data_parallel > 1) << DescribeConfig(c);
    seen.push_back(DescribeConfig(c));
  }
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(std::unique(seen.begin(), seen.end()), seen.end()) << "each configuration once";
}

// A global batch of 3 on 4 devices: D = 2 and D = 4 do not divide it.
TEST_F(PlanTest, RefusesTheLayoutsWhoseReplicasCannotShareTheBatch) {
  PlanOptions o = Options();
  o.global_batch = 3;
  o.schedules = {"1f1b"};
  o.recompute = {sim::Recompute::kNone};
  o.partitions = {sim::Partition::kEven};
  const PlanResult r = Plan(Tiny(), o);
  // (1, 4, 1), (2, 2, 1) and (1, 2, 2) cannot; (4, 1, 1) and (2, 1, 2) take b x m = 3 as 1 x 3 or 3 x 1.
  EXPECT_EQ(r.layouts_rejected[static_cast<int>(PlanReject::kBatch)], 3);
  EXPECT_EQ(r.enumerated, 4);
}

// With pruning (K = 2), the best is never slower than any configuration of the space that fits,
// each simulated here directly as `simulate` runs the scenario with the plan's overrides.
TEST_F(PlanTest, BestIsNeverSlowerThanAnyConfigurationSimulatedDirectly) {
  PlanOptions o = Options(2);
  o.schedules = {"gpipe", "1f1b", "interleaved", "zb-h1", "zb-v", "zb-2p"};
  const PlanResult r = Plan(Tiny(), o);
  ASSERT_NE(r.best(), nullptr);
  EXPECT_LT(r.simulated, r.enumerated) << "K = 2 prunes";
  const int64_t best_ns = r.best()->metrics.makespan_ns;
  int checked = 0;
  for (const int p : {1, 2, 4}) {
    for (const int t : {1, 2}) {
      if (4 % (p * t) != 0) continue;
      const int d = 4 / (p * t);
      for (const int b : {1, 2}) {
        for (const std::string& name : o.schedules) {
          PlanConfig c;
          c.schedule = name;
          c.ranks = p;
          c.data_parallel = d;
          c.tensor_parallel = t;
          c.microbatch_size = b;
          c.microbatches = 8 / (d * b);
          c.chunks = name == "interleaved" || name == "zb-v" ? 2 : 1;
          if (p == 1 && name != "gpipe" && name != "1f1b") continue;  // keep to shapes every generator takes
          if (name == "interleaved" && c.microbatches % p != 0) continue;
          for (const sim::Recompute rc : {sim::Recompute::kNone, sim::Recompute::kFull}) {
            c.recompute = rc;
            Prediction direct;
            try {
              direct = Direct(path_, c, o);
            } catch (const InputError&) {
              continue;  // a shape the generator refuses
            }
            if (direct.metrics.AnyOom()) continue;
            ++checked;
            EXPECT_LE(best_ns, direct.metrics.makespan_ns) << DescribeConfig(c);
          }
        }
      }
    }
  }
  EXPECT_GT(checked, 40);
}

// Every configuration called feasible fits by the simulator's peak on every rank; a limit
// between the smallest and the largest peak leaves some out, and the best within it is the
// fastest of the unlimited run's entries that fit under that limit.
TEST_F(PlanTest, FeasibleMeansWithinTheLimitOnEveryRank) {
  PlanOptions o = Options(1000);
  o.schedules = {"gpipe", "1f1b", "zb-h1"};
  const PlanResult all = Plan(Tiny(), o);
  std::vector<int64_t> peaks;
  for (const PlanEntry& e : all.entries) peaks.push_back(e.peak_bytes);
  std::sort(peaks.begin(), peaks.end());
  o.memory_limit_bytes = peaks[peaks.size() / 2];
  const PlanResult limited = Plan(Tiny(), o);
  EXPECT_EQ(limited.memory_limit_bytes, o.memory_limit_bytes);
  int fitting = 0;
  for (const PlanEntry& e : limited.entries) {
    int64_t most = 0;
    for (const auto& rank : e.metrics.ranks_detail) most = std::max(most, rank.peak_memory_bytes);
    EXPECT_EQ(e.fits, most <= o.memory_limit_bytes && !e.metrics.AnyOom()) << DescribeConfig(e.config);
    fitting += e.fits;
  }
  EXPECT_GT(fitting, 0);
  EXPECT_GT(limited.rejected[static_cast<int>(PlanReject::kMemory)], 0);
  int64_t fastest = INT64_MAX;
  for (const PlanEntry& e : all.entries) {
    if (e.peak_bytes <= o.memory_limit_bytes) fastest = std::min(fastest, e.metrics.makespan_ns);
  }
  ASSERT_NE(limited.best(), nullptr);
  EXPECT_EQ(limited.best()->metrics.makespan_ns, fastest);
}

// The front: no fitting entry is both faster and smaller than one on it, and every fitting entry
// off it is matched by one on it.
TEST_F(PlanTest, ParetoFrontIsUndominated) {
  PlanOptions o = Options(3);
  const PlanResult r = Plan(Tiny(), o);
  ASSERT_FALSE(r.pareto.empty());
  EXPECT_EQ(r.entries[r.pareto.back()].metrics.makespan_ns, r.best()->metrics.makespan_ns);
  const auto dominates = [](const PlanEntry& a, const PlanEntry& b) {
    return a.peak_bytes <= b.peak_bytes && a.metrics.makespan_ns <= b.metrics.makespan_ns &&
           (a.peak_bytes < b.peak_bytes || a.metrics.makespan_ns < b.metrics.makespan_ns);
  };
  for (const int i : r.pareto) {
    for (const PlanEntry& e : r.entries) {
      if (e.fits) {
        EXPECT_FALSE(dominates(e, r.entries[i])) << DescribeConfig(r.entries[i].config);
      }
    }
  }
  for (size_t i = 0; i < r.entries.size(); ++i) {
    if (!r.entries[i].fits || std::find(r.pareto.begin(), r.pareto.end(), static_cast<int>(i)) != r.pareto.end()) continue;
    const bool matched = std::any_of(r.pareto.begin(), r.pareto.end(), [&](int k) {
      return r.entries[k].peak_bytes <= r.entries[i].peak_bytes &&
             r.entries[k].metrics.makespan_ns <= r.entries[i].metrics.makespan_ns;
    });
    EXPECT_TRUE(matched) << DescribeConfig(r.entries[i].config);
  }
}

// The winner written as a scenario (ScenarioText of the file with the plan's overrides), read
// back from another directory, simulates to the plan's step, and its pipeline is the winner's.
TEST_F(PlanTest, WrittenBestSimulatesToThePlansStep) {
  PlanOptions o = Options(3);
  const PlanResult r = Plan(Tiny(), o);
  ASSERT_NE(r.best(), nullptr);
  const PlanConfig& c = r.best()->config;
  const std::string text = sim::ScenarioText(path_, ConfigOverrides(c, o));
  std::filesystem::create_directories(dir_ / "elsewhere");
  const std::string written = (dir_ / "elsewhere" / "best.yaml").string();
  std::ofstream(written) << text;
  const sim::Scenario sc = sim::LoadScenario(written);
  EXPECT_EQ(sc.pipeline.schedules, std::vector<std::string>{c.schedule});
  EXPECT_EQ(sc.pipeline.ranks, c.ranks);
  EXPECT_EQ(sc.pipeline.data_parallel, c.data_parallel);
  EXPECT_EQ(sc.pipeline.tensor_parallel, c.tensor_parallel);
  EXPECT_EQ(sc.pipeline.microbatches, c.microbatches);
  EXPECT_EQ(sc.pipeline.microbatch_size, c.microbatch_size);
  EXPECT_EQ(sc.pipeline.recompute, c.recompute);
  const sim::Topology topo(sc.topology);
  const Prediction p = Predict(sc, topo, ScenarioSchedules(sc, sc.pipeline.schedules).front());
  EXPECT_EQ(p.metrics.makespan_ns, r.best()->metrics.makespan_ns);
}

TEST_F(PlanTest, RefusesWhatTheTopologyCannotTake) {
  PlanOptions o = Options();
  o.gpus = 5;
  EXPECT_THROW(Plan(Tiny(), o), InputError);  // 4 devices
  o.gpus = 3;
  try {
    Plan(Tiny(), o);
    ADD_FAILURE() << "3 devices are not whole nodes of 2";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("--gpus 3"), std::string::npos) << e.what();
  }
  o.gpus = 4;
  o.global_batch = 0;
  EXPECT_THROW(Plan(Tiny(), o), InputError);
}

TEST_F(PlanTest, SaysWhyNothingFits) {
  PlanOptions o = Options();
  o.memory_limit_bytes = 1 << 20;
  try {
    Plan(Tiny(), o);
    ADD_FAILURE() << "nothing fits in 1 MiB";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("no configuration of 4 devices for a global batch of 8 fits in 1.00 MiB"), std::string::npos)
        << what;
    EXPECT_NE(what.find("out of memory"), std::string::npos) << what;
  }
}

// The message of the InputError `plan` throws, or "" when it throws none.
std::string PlanError(const sim::Scenario& sc, const PlanOptions& o) {
  try {
    Plan(sc, o);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

// "Why the leaders win" is per step: each entry's split (mean over ranks) sums to its step
// time, makespan / steps, with 3 steps as with 1 (the simulator's definitions, DESIGN.md §4).
// With grad_reduce_overlap the reduce runs beside the stage's last backward: the floors wait for
// none of it after that backward, so no run falls below them (Plan's own SC_CHECK stops the plan
// when one does; a slow link across the nodes makes the reduce longer than the backwards, where
// the floors that waited for it whole passed the runs).
TEST_F(PlanTest, TheFloorsHoldWhenTheReduceRunsBesideTheLastBackward) {
  PlanOptions o = Options(1000);
  o.gpus = 4;
  o.global_batch = 16;
  const sim::Scenario sc =
      sim::LoadScenario(path_, {"pipeline.grad_reduce_overlap=true", "topology.links.1.bandwidth=1GB/s"});
  const PlanResult r = Plan(sc, o);
  ASSERT_FALSE(r.entries.empty());
  int overlapped = 0;
  for (const PlanEntry& e : r.entries) {
    EXPECT_LE(e.bound_ms, e.metrics.step_time_ms) << DescribeConfig(e.config);
    overlapped += e.config.data_parallel > 1;
  }
  EXPECT_GT(overlapped, 0);
}

// Virtual stages only on a pipeline of two ranks or more (Megatron-LM refuses them at P = 1); the
// V schedules likewise.
TEST_F(PlanTest, ChunksOnlyWhereThereIsAPipeline) {
  PlanOptions o = Options(1000);
  o.schedules = {"interleaved", "zb-v", "1f1b"};
  const PlanResult r = Plan(Tiny(), o);
  int chunked = 0;
  for (const PlanEntry& e : r.entries) {
    if (e.config.chunks > 1) {
      ++chunked;
      EXPECT_GT(e.config.ranks, 1) << DescribeConfig(e.config);
    }
  }
  EXPECT_GT(chunked, 0);
}

TEST_F(PlanTest, TheStepSplitIsPerStep) {
  PlanOptions o = Options(3);
  o.schedules = {"1f1b", "zb-h1"};
  const PlanResult r = Plan(sim::LoadScenario(path_, {"pipeline.steps=3"}), o);
  ASSERT_FALSE(r.entries.empty());
  for (const PlanEntry& e : r.entries) {
    ASSERT_EQ(e.metrics.steps, 3);
    double sum = 0;
    for (const double part : e.mean_step_split_ms) sum += part;
    EXPECT_NEAR(sum, e.metrics.makespan_ms / 3, 1e-9 * e.metrics.makespan_ms) << DescribeConfig(e.config);
    EXPECT_NEAR(sum, e.metrics.step_time_ms, 1e-9 * e.metrics.makespan_ms) << DescribeConfig(e.config);
  }
}

// The whole work is estimated before the search: past --max-plan-ops the configurations with
// the most microbatches are left out, down to the largest m whose configurations' ops (summed
// here from budget.h's estimate, m by m) still fit.
TEST_F(PlanTest, ABudgetKeepsTheConfigurationsWithTheFewestMicrobatches) {
  PlanOptions o = Options();
  o.schedules = {"1f1b"};
  o.recompute = {sim::Recompute::kNone};
  o.partitions = {sim::Partition::kEven};
  const PlanResult whole = Plan(Tiny(), o);
  ASSERT_EQ(whole.entries.size(), 24u);  // the hand-worked space, every one simulated
  std::map<int, double> ops_by_m;
  const sim::Scenario tiny = Tiny();
  const schedules::GeneratorInfo& info = *schedules::FindGenerator("1f1b");
  for (const PlanEntry& e : whole.entries) {
    const sim::Scenario sc = ScenarioFor(tiny, e.config, o);
    ops_by_m[e.config.microbatches] += schedules::EstimateSize(info, sim::GeneratorParamsFor(sc.pipeline, info)).ops;
  }
  double total = 0;
  for (const auto& [m, ops] : ops_by_m) total += ops;
  EXPECT_DOUBLE_EQ(whole.space_ops, total);
  EXPECT_EQ(whole.max_microbatches, 0) << "within the default budget nothing is left out";
  // A budget that holds the configurations of m <= 2 but not those of m = 4.
  ASSERT_TRUE(ops_by_m.count(2) && ops_by_m.count(4));
  o.max_plan_ops = static_cast<int64_t>(ops_by_m[1] + ops_by_m[2]);
  const PlanResult narrow = Plan(Tiny(), o);
  EXPECT_EQ(narrow.max_microbatches, 2);
  int64_t kept = 0;
  for (const PlanEntry& e : whole.entries) kept += e.config.microbatches <= 2 ? 1 : 0;
  EXPECT_EQ(static_cast<int64_t>(narrow.entries.size()), kept);
  EXPECT_EQ(narrow.rejected[static_cast<int>(PlanReject::kPlanBudget)], 24 - kept);
  for (const PlanEntry& e : narrow.entries) EXPECT_LE(e.config.microbatches, 2) << DescribeConfig(e.config);
  ASSERT_FALSE(narrow.notes.empty());
  EXPECT_NE(narrow.notes.front().find("--max-plan-ops"), std::string::npos) << narrow.notes.front();
  // One the fewest microbatches alone pass is refused, naming the batch and the flag.
  o.max_plan_ops = static_cast<int64_t>(ops_by_m[1]) - 1;
  const std::string why = PlanError(Tiny(), o);
  EXPECT_NE(why.find("--global-batch 8"), std::string::npos) << why;
  EXPECT_NE(why.find("--max-plan-ops"), std::string::npos) << why;
}

// A batch of a billion on 4 devices is refused at once (the runaway took 84 s and 3 GB
// before std::bad_alloc): what the budget keeps are microbatches too large for any device.
TEST_F(PlanTest, ABillionSamplesAreRefusedBeforeTheSearch) {
  PlanOptions o = Options();
  o.global_batch = 1'000'000'000;
  const std::string why = PlanError(Tiny(), o);
  EXPECT_NE(why.find("no configuration of 4 devices for a global batch of 1000000000 fits"), std::string::npos) << why;
  EXPECT_NE(why.find("--max-plan-ops"), std::string::npos) << why;
}

TEST_F(PlanTest, RefusesNumbersOutOfTheirRanges) {
  const auto refused = [&](const char* flag, auto set) {
    PlanOptions o = Options();
    set(o);
    const std::string why = PlanError(Tiny(), o);
    EXPECT_EQ(why.rfind(flag, 0), 0u) << flag << ": " << why;
  };
  refused("--threads", [](PlanOptions& o) { o.threads = 1000; });  // past 4 per core, and past 256
  refused("--threads", [](PlanOptions& o) { o.threads = -1; });
  refused("--refine:", [](PlanOptions& o) { o.refine = -1; });
  refused("--refine-seconds", [](PlanOptions& o) { o.refine_seconds = std::nan(""); });
  refused("--refine-seconds", [](PlanOptions& o) { o.refine_seconds = -1; });
  refused("--refine-seconds", [](PlanOptions& o) { o.refine_seconds = std::numeric_limits<double>::infinity(); });
  refused("--search-evaluations", [](PlanOptions& o) { o.search_evaluations = -1; });
  refused("--zero", [](PlanOptions& o) { o.zero = {0, 4}; });
  refused("--max-chunks", [](PlanOptions& o) { o.max_chunks = 1; });
  refused("--max-microbatch-size", [](PlanOptions& o) { o.max_microbatch_size = -1; });
  refused("--max-plan-ops", [](PlanOptions& o) { o.max_plan_ops = -1; });
  refused("--max-ops", [](PlanOptions& o) { o.max_ops = -1; });
  refused("--top", [](PlanOptions& o) { o.top = 0; });
  refused("--global-batch", [](PlanOptions& o) { o.global_batch = int64_t{1} << 62; });  // past 4 x 2^24 x 2^24
  EXPECT_LE(MaxPlanThreads(), 256);
  EXPECT_GE(MaxPlanThreads(), 4);
}

// When nothing was tried, the reason is named, not the memory.
TEST_F(PlanTest, SaysWhyNothingWasTried) {
  PlanOptions o = Options();
  o.schedules = {"auto"};
  std::string why = PlanError(Tiny(), o);
  EXPECT_EQ(why.rfind("--schedules auto: not a schedule plan can enumerate", 0), 0u) << why;
  o = Options();
  o.tensor_parallel = {3};
  why = PlanError(Tiny(), o);
  EXPECT_EQ(why.rfind("--tensor-parallel 3: divides no layout of 4 devices", 0), 0u) << why;
  o.tensor_parallel = {4};  // divides 4, but leaves the node of 2 devices
  why = PlanError(Tiny(), o);
  EXPECT_NE(why.find("no configuration of 4 devices for a global batch of 8 can run (1 layouts, 1 layouts: topology)"),
            std::string::npos)
      << why;
  EXPECT_EQ(why.find("fits in"), std::string::npos) << why;
  o.tensor_parallel = {2, 3};  // 3 is left out with a note, 2 is planned
  const PlanResult r = Plan(Tiny(), o);
  EXPECT_NE(std::find(r.notes.begin(), r.notes.end(), "--tensor-parallel 3 divides no layout of 4 devices: left out"),
            r.notes.end());
  for (const PlanEntry& e : r.entries) EXPECT_EQ(e.config.tensor_parallel, 2);
}

// The plan replaces the pipeline's layout, so the layout written is no reason to refuse the
// scenario; the rest still is.
TEST_F(PlanTest, TheLayoutItReplacesIsNotValidated) {
  const std::vector<std::string> layout = {"pipeline.data_parallel=4", "pipeline.chunks=3",
                                           "pipeline.schedule=interleaved", "pipeline.partition=[1, 1]"};
  EXPECT_THROW(sim::LoadScenario(path_, layout), InputError);
  const sim::Scenario sc = sim::LoadScenarioForNewLayout(path_, layout);
  EXPECT_EQ(sc.pipeline.data_parallel, 4);  // as written
  PlanOptions o = Options(1);
  EXPECT_NE(Plan(sc, o).best(), nullptr);
  std::vector<std::string> one_layer = {"model.transformer.layers=1"};
  EXPECT_THROW(sim::LoadScenario(path_, one_layer), InputError);  // 2 ranks
  EXPECT_EQ(sim::LoadScenarioForNewLayout(path_, one_layer).model.transformer->layers, 1);
  try {
    sim::LoadScenarioForNewLayout(path_, {"model.transformer.heads=3"});
    ADD_FAILURE() << "heads must divide hidden, whatever the layout";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("model.transformer.heads"), std::string::npos) << e.what();
  }
}

// Just below the smallest peak of any configuration with every stash on the device nothing
// fits; with a host, plan tries the fastest configurations with every stash offloaded, keeps
// those that fit (each simulating, from the overrides it would write, to the same step and
// peak), and says so.
TEST_F(PlanTest, OffloadsWhenNothingFitsWithoutIt) {
  const std::vector<std::string> host = {"topology.host.memory=64GiB", "topology.host.bandwidth=64GB/s"};
  const sim::Scenario sc = sim::LoadScenario(path_, host);
  const PlanResult all = Plan(sc, Options());
  int64_t smallest = std::numeric_limits<int64_t>::max();
  for (const PlanEntry& e : all.entries) {
    EXPECT_EQ(e.config.offload_activations, 0) << DescribeConfig(e.config);
    smallest = std::min(smallest, e.peak_bytes);
  }
  PlanOptions o = Options();
  o.memory_limit_bytes = smallest - 1;
  const PlanResult r = Plan(sc, o);
  ASSERT_FALSE(r.entries.empty());
  for (const PlanEntry& e : r.entries) {
    if (!e.fits) continue;
    EXPECT_EQ(e.config.offload_activations, 1) << DescribeConfig(e.config);
    EXPECT_LE(e.peak_bytes, o.memory_limit_bytes);
    EXPECT_NE(DescribeConfig(e.config).find(" offload 1"), std::string::npos);
    std::vector<std::string> sets = ConfigOverrides(e.config, o);
    sets.insert(sets.end(), host.begin(), host.end());
    const sim::Scenario again = sim::LoadScenario(path_, sets);
    const Prediction p = Predict(again, sim::Topology(again.topology), ScenarioSchedules(again, {e.config.schedule}).front());
    EXPECT_DOUBLE_EQ(p.metrics.step_time_ms, e.metrics.step_time_ms) << DescribeConfig(e.config);
    EXPECT_EQ(p.metrics.ranks_detail[p.metrics.WorstMemoryRank()].peak_memory_bytes, e.peak_bytes);
  }
  ASSERT_NE(r.best(), nullptr);
  EXPECT_TRUE(std::any_of(r.notes.begin(), r.notes.end(), [](const std::string& n) {
    return n.find("fit with every stash offloaded to the host (pipeline.offload.activations: 1)") != std::string::npos;
  }));
  // Without a host there is nowhere to offload to.
  EXPECT_NE(PlanError(Tiny(), o).find("fits in"), std::string::npos);
}

// Just below the smallest peak of the configurations that fit with every stash offloaded, those
// fit no more; with a host that can take the optimizer's step (its DRAM's bandwidth stated), plan
// tries them again with the optimizer on the host too (ZeRO-Offload), keeps what fits (each
// simulating from its overrides to the same step and peak) and says so. A host that cannot take
// the step (a GPU's, its bandwidth not stated) leaves nothing that fits.
TEST_F(PlanTest, PutsTheOptimizerOnTheHostWhenOffloadingStashesIsNotEnough) {
  const std::vector<std::string> host = {"topology.host.memory=64GiB", "topology.host.bandwidth=64GB/s",
                                         "topology.host.memory_bandwidth=200GB/s"};
  const sim::Scenario sc = sim::LoadScenario(path_, host);
  int64_t smallest = std::numeric_limits<int64_t>::max();
  for (const PlanEntry& e : Plan(sc, Options()).entries) smallest = std::min(smallest, e.peak_bytes);
  PlanOptions o = Options();
  o.memory_limit_bytes = smallest - 1;
  int64_t offloaded = std::numeric_limits<int64_t>::max();
  for (const PlanEntry& e : Plan(sc, o).entries) {
    if (e.fits) offloaded = std::min(offloaded, e.peak_bytes);
  }
  ASSERT_LT(offloaded, smallest);
  o.memory_limit_bytes = offloaded - 1;
  const PlanResult r = Plan(sc, o);
  ASSERT_NE(r.best(), nullptr);
  for (const PlanEntry& e : r.entries) {
    if (!e.fits) continue;
    EXPECT_TRUE(e.config.optimizer_on_host) << DescribeConfig(e.config);
    EXPECT_EQ(e.config.offload_activations, 1) << DescribeConfig(e.config);
    EXPECT_LE(e.peak_bytes, o.memory_limit_bytes);
    EXPECT_NE(DescribeConfig(e.config).find(" offload 1 optimizer-host"), std::string::npos);
    std::vector<std::string> sets = ConfigOverrides(e.config, o);
    sets.insert(sets.end(), host.begin(), host.end());
    const sim::Scenario again = sim::LoadScenario(path_, sets);
    EXPECT_EQ(again.pipeline.offload.optimizer, sim::OptimizerPlace::kHost);
    const Prediction p = Predict(again, sim::Topology(again.topology), ScenarioSchedules(again, {e.config.schedule}).front());
    EXPECT_DOUBLE_EQ(p.metrics.step_time_ms, e.metrics.step_time_ms) << DescribeConfig(e.config);
    EXPECT_EQ(p.metrics.ranks_detail[p.metrics.WorstMemoryRank()].peak_memory_bytes, e.peak_bytes);
  }
  EXPECT_TRUE(std::any_of(r.notes.begin(), r.notes.end(), [](const std::string& n) {
    return n.find("fit with the optimizer on the host too (pipeline.offload.optimizer: host)") != std::string::npos;
  }));
  const sim::Scenario gpu_host = sim::LoadScenario(path_, {host[0], host[1]});
  EXPECT_NE(PlanError(gpu_host, o).find("nor do the 16 fastest with every stash offloaded to the host"),
            std::string::npos)
      << PlanError(gpu_host, o);
}

}  // namespace
}  // namespace stagecraft::harness
