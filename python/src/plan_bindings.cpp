// The plan in Python (harness/plan.h), as `stagecraft plan` runs it: the same options, checks,
// report, JSON, Pareto plots and the winner written as a scenario; interruptible by Ctrl-C.
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <pybind11/stl.h>

#include "bindings.h"
#include "interruptible.h"
#include "stagecraft/base/error.h"
#include "stagecraft/base/output_file.h"
#include "stagecraft/harness/plan.h"
#include "stagecraft/scenario/scenario.h"

namespace stagecraft::python {
namespace {

// A plan with what made it: the options (the winner's scenario keys depend on them) and the
// scenario it planned.
struct PlanRun {
  std::shared_ptr<const sim::Scenario> scenario;
  harness::PlanOptions options;
  harness::PlanResult result;
};

std::string BestText(const PlanRun& p) {
  if (p.result.best() == nullptr) throw InputError("the plan has no configuration that fits");
  return harness::BestScenarioText(p.scenario->path, p.scenario->overrides, p.result, p.options);
}

// The plan of `sc` under the arguments of stagecraft.plan, which has checked their types and
// signs; the parsers name each argument as Python spells it.
PlanRun RunPlan(std::shared_ptr<const sim::Scenario> sc, int gpus, int64_t global_batch, const std::string& memory_limit,
                std::vector<int> tensor_parallel, std::vector<int> context_parallel, std::vector<std::string> schedules,
                const std::vector<std::string>& recompute, const std::vector<std::string>& partitions,
                std::vector<int> zero, int max_microbatch_size, int max_chunks, int top, int threads, int refine,
                int64_t search_evaluations, double refine_seconds, int64_t max_ops) {
  PlanRun run;
  run.scenario = std::move(sc);
  harness::PlanOptions& o = run.options;
  o.gpus = gpus;
  o.global_batch = global_batch;
  o.memory_limit_bytes = harness::ParsePlanMemoryLimit(memory_limit, "plan: memory_limit");
  o.tensor_parallel = std::move(tensor_parallel);
  o.context_parallel = std::move(context_parallel);
  o.schedules = std::move(schedules);
  o.recompute = harness::ParseRecomputeNames(recompute, "plan: recompute");
  o.partitions = harness::ParsePartitionNames(partitions, "plan: partitions");
  o.zero = std::move(zero);
  o.max_microbatch_size = max_microbatch_size;
  o.max_chunks = max_chunks;
  o.top = top;
  o.threads = threads;
  o.refine = refine;
  o.search_evaluations = search_evaluations;
  o.refine_seconds = refine_seconds;
  o.max_ops = max_ops;
  run.result = RunInterruptibly([&run](const std::atomic<bool>* cancel) {
    harness::PlanOptions options = run.options;
    options.cancel = cancel;
    return harness::Plan(*run.scenario, options);
  });
  return run;
}

// Writes what `make` returns to `path` as the command writes its outputs (output_file.h): the
// path is checked before anything is made, and a regular file is replaced atomically.
template <class Make>
void WriteOutput(const std::string& path, const std::string& what, Make make) {
  CheckOutputPath(path, what);
  std::string data;
  {
    py::gil_scoped_release release;
    data = make();
  }
  WriteOutputFile(path, data, what);
}

}  // namespace

void BindPlan(py::module_& m) {
  py::class_<PlanRun>(m, "PlanRun", "What `stagecraft plan` found, with the options it ran under.")
      .def_property_readonly("json", [](const PlanRun& p) { return harness::PlanJson(p.result); },
                             "the file `plan --json` writes")
      .def("report", [](const PlanRun& p, int top) { return harness::DescribePlan(p.result, top); }, py::arg("top"),
           "the text `stagecraft plan` prints")
      .def("pareto_ascii", [](const PlanRun& p) { return harness::ParetoAscii(p.result); })
      .def("pareto_png", [](const PlanRun& p) { return py::bytes(harness::ParetoPng(p.result)); },
           "the image `plan --plot` writes")
      .def_property_readonly("has_best", [](const PlanRun& p) { return p.result.best() != nullptr; })
      .def("best_scenario_text", &BestText, "the file `plan --write-best` writes")
      .def("write_best",
           [](const PlanRun& p, const std::string& path) {
             WriteOutput(path, "write_best: path", [&p] { return BestText(p); });
           },
           py::arg("path"), "writes the file `plan --write-best` writes, as the command writes it")
      .def("write_plot",
           [](const PlanRun& p, const std::string& path) {
             WriteOutput(path, "write_plot: path", [&p] { return harness::ParetoPng(p.result); });
           },
           py::arg("path"), "writes the image `plan --plot` writes, as the command writes it");
  m.def("plan", &RunPlan, py::arg("scenario"), py::arg("gpus"), py::arg("global_batch"), py::arg("memory_limit"),
        py::arg("tensor_parallel"), py::arg("context_parallel"), py::arg("schedules"), py::arg("recompute"), py::arg("partitions"), py::arg("zero"),
        py::arg("max_microbatch_size"), py::arg("max_chunks"), py::arg("top"), py::arg("threads"), py::arg("refine"),
        py::arg("search_evaluations"), py::arg("refine_seconds"), py::arg("max_ops"));
  m.attr("MAX_PLAN_THREADS") = harness::MaxPlanThreads();  // this machine's
}

}  // namespace stagecraft::python
