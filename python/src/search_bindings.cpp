// The schedule search in Python (harness/search.h), as `stagecraft search` runs it: the same
// options and checks, the searched order, its CSV and its explanation; interruptible by Ctrl-C.
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include <fmt/format.h>
#include <pybind11/stl.h>

#include "bindings.h"
#include "interruptible.h"
#include "stagecraft/base/error.h"
#include "stagecraft/harness/search.h"
#include "stagecraft/schedules/csv_io.h"
#include "stagecraft/scenario/scenario.h"

namespace stagecraft::python {
namespace {

using harness::SearchRankChange;
using harness::SearchResult;

// The search of `sc` under the arguments of stagecraft.search, which has checked their types and
// ranges; interruptible by Ctrl-C.
SearchResult Search(std::shared_ptr<const sim::Scenario> sc, const std::optional<std::string>& memory_limit,
                    double budget, int64_t evaluations, uint64_t seed, const std::string& from) {
  harness::SearchOptions options;
  options.budget_seconds = budget;
  options.max_evaluations = evaluations;
  options.seed = seed;
  options.from = from;
  if (memory_limit) options.memory_limit = harness::SearchMemoryLimit::Parse(*memory_limit, "search: memory_limit");
  SearchResult r = RunInterruptibly([&](const std::atomic<bool>* cancel) {
    harness::SearchOptions interruptible = options;
    interruptible.cancel = cancel;
    return harness::SearchSchedule(*sc, interruptible);
  });
  r.best.name = "searched";
  return r;
}

}  // namespace

void BindSearch(py::module_& m) {
  py::class_<SearchRankChange>(m, "SearchRankChange", "One rank's bubble and memory before and after the search.")
      .def_readonly("rank", &SearchRankChange::rank)
      .def_readonly("bubble_before", &SearchRankChange::bubble_before)
      .def_readonly("bubble_after", &SearchRankChange::bubble_after)
      .def_readonly("memory_before", &SearchRankChange::memory_before, "in the limit's units")
      .def_readonly("memory_after", &SearchRankChange::memory_after, "in the limit's units")
      .def_readonly("ops_moved", &SearchRankChange::ops_moved);
  py::class_<SearchResult>(m, "SearchResult", "What `stagecraft search` found, and why it is better.")
      .def_readonly("start_name", &SearchResult::start_name, "the generator it started from")
      .def_readonly("starts", &SearchResult::starts, "every generator tried: 'name: 12.3 ms' or why not")
      .def_readonly("start", &SearchResult::start, "the start's schedule (one step, unlowered)")
      .def_readonly("best", &SearchResult::best, "the searched schedule (one step, unlowered), named 'searched'")
      .def_readonly("steps", &SearchResult::steps, "the scenario's pipeline.steps, what the step time is over")
      .def_property_readonly("start_step_ms", [](const SearchResult& r) { return r.start_ns * 1e-6; },
                             "the start's step time over `steps` steps")
      .def_property_readonly("best_step_ms", [](const SearchResult& r) { return r.best_ns * 1e-6; },
                             "the result's step time over `steps` steps")
      .def_property_readonly("start_one_step_ms", [](const SearchResult& r) { return r.start_makespan_ns * 1e-6; },
                             "the start's first step alone (its makespan)")
      .def_property_readonly("best_one_step_ms", [](const SearchResult& r) { return r.best_makespan_ns * 1e-6; },
                             "the result's first step alone (its makespan)")
      .def_property_readonly("start_long_run_step_ms", [](const SearchResult& r) { return r.start_steady_ns * 1e-6; },
                             "the start's step in a long run (the largest per-rank span of one step)")
      .def_property_readonly("best_long_run_step_ms", [](const SearchResult& r) { return r.best_steady_ns * 1e-6; },
                             "the result's step in a long run (the largest per-rank span of one step)")
      .def_property_readonly("bound_ms", [](const SearchResult& r) { return r.bound_ns * 1e-6; },
                             "no op order of these stages takes less per step over the scenario's steps (the busiest "
                             "rank's compute, and for one step the wait for its first input)")
      .def_readonly("bound_rank", &SearchResult::bound_rank, "the rank that sets the bound")
      .def_readonly("bound_placement", &SearchResult::bound_placement, "the placement that sets it: 'V, 16 stages'")
      .def_readonly("memory_limit", &SearchResult::memory_limit, "rank 0's, in memory_units (0: none)")
      .def_readonly("memory_units", &SearchResult::memory_units, "'bytes' or \"forwards' activations\"")
      .def_readonly("evaluations", &SearchResult::evaluations, "moves simulated")
      .def_readonly("rejected", &SearchResult::rejected, "moves refused unsimulated")
      .def_readonly("improvements", &SearchResult::improvements)
      .def_readonly("seconds", &SearchResult::seconds)
      .def_readonly("ranks", &SearchResult::ranks)
      .def_readonly("moved", &SearchResult::moved, "the moves that remain against the start")
      .def_property_readonly("explanation", &harness::DescribeSearch, "the text `stagecraft search` prints")
      .def("to_csv",
           [](const SearchResult& r) { return schedules::ExportCsv(r.best, schedules::CsvForm::kComputeOnly); },
           "The searched schedule as the CSV `stagecraft search --out` writes");
  m.def("search", &Search, py::arg("scenario"), py::arg("memory_limit"), py::arg("budget"), py::arg("evaluations"),
        py::arg("seed"), py::arg("from_"));
  m.attr("MAX_SEARCH_BUDGET_SECONDS") = harness::kMaxSearchBudgetSeconds;
}

}  // namespace stagecraft::python
