// The schedule search (harness/search.h) on the Zero Bubble paper's cost model: it starts from
// the fastest generator within the limit (every generator's own simulated time the oracle), never
// ends slower, keeps every rank within the limit (the order's memory walked independently here),
// and its CSV, imported as a schedule file, simulates to the time it reported. Plus the limit's
// parser and the refusals.
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "stagecraft/base/error.h"
#include "stagecraft/harness/predict.h"
#include "stagecraft/harness/search.h"
#include "stagecraft/schedules/csv_io.h"
#include "stagecraft/schedules/generators.h"
#include "stagecraft/schedules/lower.h"
#include "stagecraft/schedules/validate.h"
#include "stagecraft/sim/scenario_checks.h"
#include "stagecraft/sim/topology.h"

namespace stagecraft::harness {
namespace {

using schedules::Op;
using schedules::OpKind;

sim::Scenario Paper(std::vector<std::string> sets = {}) {
  sets.push_back("pipeline.microbatches=12");
  sets.push_back("pipeline.ranks=4");
  sets.push_back("topology.devices_per_node=4");
  return sim::LoadScenario(std::string(STAGECRAFT_SOURCE_DIR) + "/scenarios/zero-bubble-paper.yaml", sets);
}

// One generator's one-step schedule simulated as simulate does it.
schedules::RunRecord GeneratorRun(const sim::Scenario& sc, const std::string& name) {
  sim::Scenario one = sc;
  one.pipeline.steps = 1;
  const sim::Topology topo(one.topology);
  return Predict(one, topo, ScenarioSchedules(one, {name}).front()).result;
}
// Its step time over the scenario's steps (AStepOfALongRunIsTheLargestSpanOfOne checks what
// that means).
int64_t GeneratorStepNs(const sim::Scenario& sc, const std::string& name) {
  return RunStepNs(GeneratorRun(sc, name), sc.pipeline.steps);
}

// The most forwards' activations a rank holds at once in `ops` (F +1, I -1/2, W -1/2, B -1),
// walked here apart from the search.
double PeakForwards(const std::vector<Op>& ops) {
  double now = 0, peak = 0;
  for (const Op& op : ops) {
    now += op.kind == OpKind::kF ? 1 : op.kind == OpKind::kB ? -1 : (op.kind == OpKind::kI || op.kind == OpKind::kW) ? -0.5 : 0;
    peak = std::max(peak, now);
  }
  return peak;
}

TEST(SearchMemoryLimit, ParsesSizesAndMultiplesOfP) {
  EXPECT_EQ(SearchMemoryLimit::Parse("2p", "x").forwards, 2);
  EXPECT_EQ(SearchMemoryLimit::Parse("1.5p", "x").forwards, 1.5);
  EXPECT_EQ(SearchMemoryLimit::Parse("2GiB", "x").bytes, int64_t{2} << 30);
  for (const char* bad : {"p", "0p", "-1p", "xp", "lots", "0GiB"}) {
    EXPECT_THROW(SearchMemoryLimit::Parse(bad, "--memory-limit"), InputError) << bad;
  }
}

TEST(Search, StartsFromTheFastestGeneratorWithinTheLimitAndNeverEndsSlower) {
  const sim::Scenario sc = Paper();
  SearchOptions o;
  o.max_evaluations = 400;
  o.memory_limit = SearchMemoryLimit::Parse("1p", "x");
  const SearchResult r = SearchSchedule(sc, o);
  // The oracle: each generator simulated alone; the start is the fastest that holds at most p
  // forwards on every rank (GPipe holds m, ZB-H2 more than p: both out).
  int64_t fastest = 0;
  std::string fastest_name;
  for (const schedules::GeneratorInfo& info : schedules::Generators()) {
    if (info.weights != schedules::WeightPolicy::kFlush || info.name == "dualpipe-v") continue;
    const std::string name(info.name);
    if (!schedules::CheckParams(info, sim::GeneratorParamsFor(sc.pipeline, info)).empty()) continue;
    sim::Scenario one = sc;
    one.pipeline.steps = 1;
    const schedules::Schedule s = ScenarioSchedules(one, {name}).front();
    bool fits = true;
    for (const auto& ops : s.ops) fits &= PeakForwards(ops) <= sc.pipeline.ranks * (1 + 1e-9);
    if (name == "zb-v") {  // two half stages per rank: each forward half a whole one
      fits = true;
      for (const auto& ops : s.ops) fits &= PeakForwards(ops) / 2 <= sc.pipeline.ranks * (1 + 1e-9);
    }
    if (!fits) continue;
    const int64_t ns = GeneratorStepNs(sc, name);
    if (fastest_name.empty() || ns < fastest) fastest = ns, fastest_name = name;
  }
  EXPECT_EQ(r.start_name, fastest_name);
  EXPECT_EQ(r.start_ns, fastest);
  EXPECT_LE(r.best_ns, r.start_ns);
  EXPECT_GT(r.evaluations, 0);
  EXPECT_EQ(r.memory_units, "forwards' activations");
  const double per_forward = r.best.shape.chunks == 1 ? 1.0 : 0.5;
  for (const auto& ops : r.best.ops) EXPECT_LE(PeakForwards(ops) * per_forward, sc.pipeline.ranks * (1 + 1e-9));
}

TEST(Search, ItsCsvSimulatesToTheTimeItReported) {
  const sim::Scenario sc = Paper();
  SearchOptions o;
  o.max_evaluations = 300;
  o.from = "zb-h1";
  o.memory_limit = SearchMemoryLimit::Parse("2p", "x");
  const SearchResult r = SearchSchedule(sc, o);
  EXPECT_EQ(r.start_name, "zb-h1");
  EXPECT_EQ(r.start_ns, GeneratorStepNs(sc, "zb-h1"));
  const std::string csv = schedules::ExportCsv(r.best, schedules::CsvForm::kComputeOnly);
  schedules::CsvImportOptions io;
  io.microbatches = sc.pipeline.microbatches;
  io.chunks = 0;
  const schedules::Schedule imported =
      schedules::Lower(schedules::ImportCsv(csv, "searched.csv", io), sc.pipeline.p2p, sc.pipeline.p2p_buffers);
  ASSERT_TRUE(schedules::Validate(imported).empty());
  sim::Scenario one = sc;
  one.pipeline.steps = 1;
  const sim::Topology topo(one.topology);
  const schedules::RunRecord run = Predict(one, topo, imported).result;
  EXPECT_EQ(run.makespan_ns(), r.best_makespan_ns);
  EXPECT_EQ(SteadyStepNs(run), r.best_steady_ns);
  EXPECT_EQ(RunStepNs(run, sc.pipeline.steps), r.best_ns);
}

// The bound, hand-worked on uniform costs (F = B = W = 1 ms per rank, p = 4, m = 8): each rank
// computes 8 x 3 = 24 ms whatever the placement, so no step of a long run is under 24 ms; and one
// step alone cannot end before rank 3 has computed its 24 ms after the forwards of the stages
// before its first: 3 ms on 4 stages in a loop, 1.5 ms on 8 (V, or interleaved). ZB-H2 and ZB-V
// have no bubble in a long run (the paper's "zero bubble"): their spans are 24 ms; one step alone,
// ZB-V's 25.5 ms is the shortest, on that bound. Over 1000 steps ZB-V takes (25.5 + 999 x 24) /
// 1000 ms per step, ZB-H2 (27 + 999 x 24) / 1000: the search starts from ZB-V, on the bound.
TEST(Search, BoundIsTheBusiestRanksComputeHandWorked) {
  const sim::Scenario sc =
      sim::LoadScenario(std::string(STAGECRAFT_SOURCE_DIR) + "/scenarios/uniform-costs.yaml", {"pipeline.steps=1000"});
  SearchOptions o;
  o.max_evaluations = 200;
  const SearchResult r = SearchSchedule(sc, o);
  const int64_t long_bound = (25'500'000 + 999 * int64_t{24'000'000}) / 1000;
  EXPECT_EQ(r.bound_ns, long_bound);
  EXPECT_EQ(r.start_name, "zb-v");
  EXPECT_EQ(r.start_makespan_ns, 25'500'000);
  EXPECT_EQ(r.start_steady_ns, 24'000'000);
  EXPECT_EQ(r.start_ns, long_bound);
  EXPECT_EQ(r.best_ns, long_bound);
  EXPECT_EQ(r.best_steady_ns, 24'000'000);

  sim::Scenario one = sc;
  one.pipeline.steps = 1;
  const SearchResult r1 = SearchSchedule(one, o);
  EXPECT_EQ(r1.bound_ns, 25'500'000);
  EXPECT_EQ(r1.bound_rank, 3);
  EXPECT_EQ(r1.best_ns, 25'500'000);
  EXPECT_NE(DescribeSearch(r1).find("can take under 25.500 ms"), std::string::npos) << DescribeSearch(r1);
  EXPECT_NE(DescribeSearch(r1).find("0.00% above it"), std::string::npos) << DescribeSearch(r1);

  // 1F1B's placement, a loop of 4 stages: rank 3 starts 3 ms in at the earliest.
  const sim::Topology topo(one.topology);
  const Prediction f1b = Predict(one, topo, ScenarioSchedules(one, {"1f1b"}).front());
  int rank = -1;
  EXPECT_EQ(PlacementBoundNs(f1b.schedule, f1b.result, 1, &rank), 27'000'000);
  EXPECT_EQ(rank, 3);
  EXPECT_EQ(PlacementBoundNs(f1b.schedule, f1b.result, 1000), (27'000'000 + 999 * int64_t{24'000'000}) / 1000);
}

// What "a step of a long run" means, from the simulator alone: k steps of a generator's schedule
// take its first step's makespan plus k - 1 times the largest per-rank span of that one step
// (each stage steps on its own, so steps overlap), on the paper's costs, for schedules whose
// spans differ from their makespan by much (ZB-2p: 1152.6 against 1236.6 ms at p = 8, m = 24).
TEST(Search, AStepOfALongRunIsTheLargestSpanOfOne) {
  const sim::Scenario base = sim::LoadScenario(std::string(STAGECRAFT_SOURCE_DIR) + "/scenarios/zero-bubble-paper.yaml");
  for (const std::string name : {"1f1b", "zb-h1", "zb-h2", "zb-v", "zb-2p"}) {
    auto makespan = [&](int steps) {
      sim::Scenario sc = base;
      sc.pipeline.steps = steps;
      const sim::Topology topo(sc.topology);
      return Predict(sc, topo, ScenarioSchedules(sc, {name}).front()).result;
    };
    const schedules::RunRecord one = makespan(1), four = makespan(4);
    EXPECT_NEAR(static_cast<double>(four.makespan_ns()),
                static_cast<double>(one.makespan_ns() + 3 * SteadyStepNs(one)), 4.0) << name;
  }
}

// No generator's simulated step is below the bound, on uneven per-rank costs and on the paper's,
// one step alone and per step of a long run.
TEST(Search, NoGeneratorBeatsTheBound) {
  for (const std::string steps : {"1", "1000"}) {
    for (const sim::Scenario& sc :
         {Paper({"pipeline.steps=" + steps}),
          Paper({"pipeline.steps=" + steps, "model.costs.forward=[1ms, 1.3ms, 0.8ms, 1.6ms]",
                 "model.costs.backward_input=[1.1ms, 1.2ms, 0.9ms, 1.7ms]",
                 "model.costs.backward_weight=[0.5ms, 0.7ms, 0.4ms, 0.9ms]"})}) {
      SearchOptions o;
      o.max_evaluations = 50;
      const SearchResult r = SearchSchedule(sc, o);
      ASSERT_GT(r.bound_ns, 0);
      for (const schedules::GeneratorInfo& info : schedules::Generators()) {
        if (!schedules::CheckParams(info, sim::GeneratorParamsFor(sc.pipeline, info)).empty()) continue;
        EXPECT_GE(RunStepNs(GeneratorRun(sc, std::string(info.name)), sc.pipeline.steps), r.bound_ns)
            << info.name << ", " << steps << " step(s)";
      }
      EXPECT_GE(r.best_ns, r.bound_ns);
    }
  }
}

// `pipeline.schedule: auto` runs exactly the order of the search's CSV named as a schedule file,
// for every step, and the run takes the step time the search reported.
TEST(Search, AutoRunsWhatTheSearchsCsvRuns) {
  const std::string scenario = std::string(STAGECRAFT_SOURCE_DIR) + "/tests/data/search-uneven-4.yaml";
  const sim::Scenario sc = sim::LoadScenario(scenario, {"pipeline.schedule=auto", "pipeline.search_evaluations=1500",
                                                        "pipeline.steps=3"});
  EXPECT_EQ(sc.pipeline.search_evaluations, 1500);
  SearchOptions o;
  o.max_evaluations = 1500;
  const SearchResult r = SearchSchedule(sc, o);
  const std::string csv_path = ::testing::TempDir() + "/auto_search.csv";
  {
    std::FILE* f = std::fopen(csv_path.c_str(), "w");
    ASSERT_NE(f, nullptr);
    const std::string csv = schedules::ExportCsv(r.best, schedules::CsvForm::kComputeOnly);
    ASSERT_EQ(std::fwrite(csv.data(), 1, csv.size(), f), csv.size());
    std::fclose(f);
  }
  const sim::Scenario from_file = sim::LoadScenario(scenario, {"pipeline.schedule=" + csv_path, "pipeline.steps=3"});
  const schedules::Schedule a = ScenarioSchedules(sc, {"auto"}).front();
  const schedules::Schedule b = ScenarioSchedules(from_file, {csv_path}).front();
  EXPECT_EQ(a.name, "auto");
  EXPECT_EQ(a.steps, 3);
  EXPECT_EQ(a.ops, b.ops);
  const sim::Topology topo(sc.topology);  // the three steps take what the search said per step
  EXPECT_NEAR(static_cast<double>(Predict(sc, topo, a).result.makespan_ns()) / 3, static_cast<double>(r.best_ns), 4);
  std::remove(csv_path.c_str());
}

// With data-parallel replicas the orders carry their REDUCE_GRADs and are judged with them:
// `auto` simulates to what the search reported.
TEST(Search, SearchesWithReplicas) {
  const sim::Scenario sc = sim::LoadScenario(std::string(STAGECRAFT_SOURCE_DIR) + "/scenarios/uniform-costs.yaml",
                                             {"pipeline.data_parallel=2", "topology.devices_per_node=8",
                                              "pipeline.search_evaluations=300", "pipeline.schedule=auto"});
  SearchOptions o;
  o.max_evaluations = 300;
  const SearchResult r = SearchSchedule(sc, o);
  const sim::Topology topo(sc.topology);
  const Prediction p = Predict(sc, topo, ScenarioSchedules(sc, {"auto"}).front());
  EXPECT_EQ(p.result.makespan_ns(), r.best_makespan_ns);
  EXPECT_GT(r.best_makespan_ns, 26'000'000);  // above the 25.5 ms of one replica: the all-reduce shows
}

TEST(Search, AutoAndItsEvaluationsAreCheckedWhereTheScenarioIsRead) {
  const std::string scenario = std::string(STAGECRAFT_SOURCE_DIR) + "/tests/data/search-uneven-4.yaml";
  EXPECT_NO_THROW((void)sim::LoadScenario(scenario, {"pipeline.schedule=[zb-h1, auto]"}));
  try {
    (void)sim::LoadScenario(scenario, {"pipeline.search_evaluations=0"});
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("pipeline.search_evaluations"), std::string::npos) << e.what();
  }
  try {
    (void)sim::LoadScenario(scenario, {"pipeline.schedule=autoo"});
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(", auto"), std::string::npos) << e.what();  // the known names list it
  }
}

TEST(Search, TheSameSeedAndEvaluationsGiveTheSameSchedule) {
  SearchOptions o;
  o.max_evaluations = 200;
  o.seed = 7;
  o.from = "zb-h1";
  const SearchResult a = SearchSchedule(Paper(), o), b = SearchSchedule(Paper(), o);
  EXPECT_EQ(a.best, b.best);
  EXPECT_EQ(a.evaluations, b.evaluations);
}

TEST(Search, RefusesALimitNoGeneratorMeetsAndAStartItCannotSearch) {
  SearchOptions o;
  o.max_evaluations = 10;
  o.memory_limit = SearchMemoryLimit::Parse("0.1p", "x");
  try {
    (void)SearchSchedule(Paper(), o);
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("no generator gives a schedule within the memory limit"), std::string::npos)
        << e.what();
  }
  o.memory_limit = {};
  o.from = "pipedream";
  EXPECT_THROW((void)SearchSchedule(Paper(), o), InputError);
  o.from = "no-such";
  EXPECT_THROW((void)SearchSchedule(Paper(), o), InputError);
  o.from = "";
  o.memory_limit = SearchMemoryLimit::Parse("1GiB", "x");  // explicit costs give no sizes
  EXPECT_THROW((void)SearchSchedule(Paper(), o), InputError);
}

}  // namespace
}  // namespace stagecraft::harness
