// Runs in Python: a scenario's simulation (`stagecraft simulate`), metrics files and traces as
// simulate and execute write them, the bubble split of a run, and `stagecraft compare`. The
// metrics travel as the metrics codec's JSON (metrics_json.h), which the package reads into
// attributes, so Python sees the fields and the precision that `simulate --json` writes.
#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include "bindings.h"
#include "interruptible.h"
#include "stagecraft/base/error.h"
#include "stagecraft/base/input_file.h"
#include "stagecraft/harness/compare.h"
#include "stagecraft/harness/predict.h"
#include "stagecraft/harness/workload.h"
#include "stagecraft/schedules/bubble_split.h"
#include "stagecraft/schedules/metrics_json.h"
#include "stagecraft/schedules/trace.h"
#include "stagecraft/scenario/scenario.h"
#include "stagecraft/sim/topology.h"

namespace stagecraft::python {
namespace {

using schedules::GapCause;
using schedules::RankSplit;

// A scenario's schedules predicted, as `stagecraft simulate` computes them.
struct Simulation {
  std::shared_ptr<const sim::Scenario> scenario;
  std::vector<harness::Prediction> predictions;
  std::string cost_source;

  const harness::Prediction& At(size_t index) const {
    if (index >= predictions.size()) throw py::index_error(fmt::format("no schedule {} in this simulation", index));
    return predictions[index];
  }
  // The metrics file of the predictions at `indices` (all when empty), as simulate --json writes it.
  std::string MetricsJson(const std::vector<size_t>& indices) const {
    std::vector<harness::Prediction> chosen;
    if (indices.empty()) return schedules::MetricsFileToJson(harness::PredictedMetricsFile(*scenario, cost_source, predictions));
    for (size_t i : indices) chosen.push_back(At(i));
    return schedules::MetricsFileToJson(harness::PredictedMetricsFile(*scenario, cost_source, chosen));
  }
};

// simulate's predictions under the arguments of stagecraft.simulate, which has checked them;
// Ctrl-C stops it inside each phase (the search that makes `auto`, lowering, validation, the
// simulation and its metrics) and between them.
Simulation Simulate(std::shared_ptr<const sim::Scenario> sc, int64_t max_ops) {
  if (!sc->tasks.empty()) {
    throw InputError(fmt::format("{}: tasks: simulate() runs one model and the scenario lists {} tasks; "
                                 "simulate_workload() runs the workload",
                                 sc->path, sc->tasks.size()));
  }
  Simulation out;
  out.scenario = sc;
  out.predictions = RunInterruptibly([&sc, max_ops](const std::atomic<bool>* cancel) {
    const std::vector<std::string> names = harness::ScenarioScheduleNames(*sc, false);
    harness::CheckScheduleSizes(sc->pipeline, names, max_ops);
    const sim::Topology topo(sc->topology);
    std::vector<harness::Prediction> predictions;
    for (schedules::Schedule& s : harness::ScenarioSchedules(*sc, names, cancel)) {
      predictions.push_back(harness::Predict(*sc, topo, std::move(s), cancel));
    }
    return predictions;
  });
  out.cost_source = out.predictions.front().cost_source;
  return out;
}

const char* CauseName(GapCause cause) {
  switch (cause) {
    case GapCause::kWait: return "wait";
    case GapCause::kTransfer: return "transfer";
    case GapCause::kOverhead: return "overhead";
    case GapCause::kIdle: return "idle";
    case GapCause::kCollective: return "collective";
    case GapCause::kOffloadWait: return "offload_wait";
  }
  return "?";
}

// A trace as read, with what the reader skipped.
struct TraceFile {
  schedules::Trace trace;
  std::string path;
  int skipped = 0;
  std::string first_skipped;
};

TraceFile ReadTrace(const std::string& path) {
  schedules::TraceReadResult read = schedules::TraceFromJson(ReadInputFile(path, kMaxJsonBytes, "a trace"), path);
  return {std::move(read.trace), path, read.skipped, std::move(read.first_skipped)};
}

// The metrics file of one schedule's metrics alone (a trace's summary), through the codec.
std::optional<std::string> SummaryJson(const schedules::Trace& trace) {
  if (!trace.summary) return std::nullopt;
  schedules::MetricsFile file;
  file.scenario = trace.scenario;
  file.source = trace.source;
  file.schedules.push_back(*trace.summary);
  return schedules::MetricsFileToJson(file);
}

struct ComparisonResult {
  harness::Comparison comparison;
  std::vector<std::string> warnings;
};

ComparisonResult Compare(const harness::RunFile& predicted, const harness::RunFile& measured, double max_error_pct,
                         const std::string& trace_path) {
  ComparisonResult out;  // CompareRuns checks the files, as compare does
  harness::CompareOptions options;
  options.max_error_pct = max_error_pct;
  options.trace_path = trace_path;
  options.warn = [&out](const std::string& line) { out.warnings.push_back(line); };
  out.comparison = harness::CompareRuns(predicted, measured, options);
  return out;
}

void BindSplits(py::module_& m) {
  py::class_<schedules::GapInterval>(m, "Gap", "One stretch of a rank not computing, and why (bubble_split.h).")
      .def_property_readonly("start_ms", [](const schedules::GapInterval& g) { return g.start_ns * 1e-6; })
      .def_property_readonly("end_ms", [](const schedules::GapInterval& g) { return g.end_ns * 1e-6; })
      .def_property_readonly("cause", [](const schedules::GapInterval& g) { return CauseName(g.cause); },
                             "wait, transfer, collective, overhead or idle")
      .def("__repr__", [](const schedules::GapInterval& g) {
        return fmt::format("Gap({} {:.6f}..{:.6f} ms)", CauseName(g.cause), g.start_ns * 1e-6, g.end_ns * 1e-6);
      });
  py::class_<RankSplit>(m, "BubbleSplit",
                        "One rank's makespan by cause: compute + wait + transfer + collective + offload wait + "
                        "overhead + idle")
      .def_property_readonly("compute_ms", [](const RankSplit& s) { return s.compute_ns * 1e-6; })
      .def_property_readonly("wait_ms", [](const RankSplit& s) { return s.wait_ns * 1e-6; })
      .def_property_readonly("transfer_ms", [](const RankSplit& s) { return s.transfer_ns * 1e-6; })
      .def_property_readonly("collective_ms", [](const RankSplit& s) { return s.collective_ns * 1e-6; })
      .def_property_readonly("offload_wait_ms", [](const RankSplit& s) { return s.offload_wait_ns * 1e-6; })
      .def_property_readonly("overhead_ms", [](const RankSplit& s) { return s.overhead_ns * 1e-6; })
      .def_property_readonly("idle_ms", [](const RankSplit& s) { return s.idle_ns * 1e-6; })
      .def_readonly("gaps", &RankSplit::gaps, "the stretches in time order");
}

void BindSimulation(py::module_& m) {
  py::class_<Simulation>(m, "Simulation", "A scenario's schedules as simulate predicts them.")
      .def_property_readonly("count", [](const Simulation& s) { return s.predictions.size(); })
      .def_readonly("cost_source", &Simulation::cost_source)
      .def("metrics_json", &Simulation::MetricsJson, py::arg("indices") = std::vector<size_t>{},
           py::call_guard<py::gil_scoped_release>())
      .def("trace_json",
           [](const Simulation& s, size_t i) {
             return schedules::TraceToJson(harness::PredictedTrace(*s.scenario, s.cost_source, s.At(i)));
           },
           py::arg("index"), py::call_guard<py::gil_scoped_release>())
      .def("schedule", [](const Simulation& s, size_t i) { return s.At(i).schedule; }, py::arg("index"))
      .def("bubble_split",
           [](const Simulation& s, size_t i) {
             const harness::Prediction& p = s.At(i);
             return schedules::SplitBubbles(p.schedule, p.result, true);
           },
           py::arg("index"), py::call_guard<py::gil_scoped_release>())
      .def("memory_terms",
           [](const Simulation& s, size_t i, int rank) {
             const harness::Prediction& p = s.At(i);
             if (rank < 0 || rank >= p.schedule.ranks()) {
               throw py::index_error(fmt::format("rank {} is not one of the {} ranks", rank, p.schedule.ranks()));
             }
             const harness::MemoryTerms t = harness::MemoryTermsOf(p, rank);
             py::dict d;
             d["weights"] = t.weights;
             d["gradients"] = t.gradients;
             d["optimizer"] = t.optimizer;
             d["activations"] = t.activations;
             d["other"] = t.other;
             d["inflight"] = t.inflight;
             d["dominant"] = t.Dominant();
             return d;
           },
           py::arg("index"), py::arg("rank"));
  m.def("simulate", &Simulate, py::arg("scenario"), py::arg("max_ops"));
  m.def(
      "simulate_workload",
      [](std::shared_ptr<const sim::Scenario> sc) {
        if (sc->tasks.empty()) {
          throw InputError(fmt::format("{}: tasks: simulate_workload() runs a scenario's tasks and it lists none; "
                                       "simulate() runs its model",
                                       sc->path));
        }
        return schedules::MetricsFileToJson(
            harness::PredictedWorkloadFile(*sc, harness::PredictWorkload(*sc, sim::Topology(sc->topology))));
      },
      py::arg("scenario"), py::call_guard<py::gil_scoped_release>());
}

void BindRunFiles(py::module_& m) {
  py::class_<harness::RunFile>(m, "RunFile", "A metrics file as simulate --json or execute --json wrote it.")
      .def_readonly("path", &harness::RunFile::path)
      .def("metrics_json", [](const harness::RunFile& f) { return schedules::MetricsFileToJson(f); },
           py::call_guard<py::gil_scoped_release>());
  m.def(
      "read_run",
      [](const std::string& path) {
        return harness::RunFile{schedules::MetricsFileFromJson(ReadInputFile(path, kMaxJsonBytes, "a metrics file"), path),
                                path};
      },
      py::arg("path"), py::call_guard<py::gil_scoped_release>());
  m.def(
      "run_from_json",
      [](const std::string& text, const std::string& source) {
        return harness::RunFile{schedules::MetricsFileFromJson(text, source), source};
      },
      py::arg("text"), py::arg("source"), py::call_guard<py::gil_scoped_release>());
}

// Column lists for a data frame, made without a Python object per op.
py::dict TraceColumns(const TraceFile& t) {
  const auto& ops = t.trace.ops;
  std::vector<int> rank, stream, stage, microbatch, step, op_index;
  std::vector<std::string> kind;
  std::vector<double> start_ms, duration_ms;
  {
    py::gil_scoped_release release;
    for (const schedules::TraceOp& o : ops) {
      rank.push_back(o.rank);
      stream.push_back(static_cast<int>(o.stream));
      kind.emplace_back(schedules::KindName(o.op.kind));
      stage.push_back(o.op.stage);
      microbatch.push_back(o.op.microbatch);
      step.push_back(o.op.step);
      op_index.push_back(o.op_index);
      start_ms.push_back(o.start_ns * 1e-6);
      duration_ms.push_back(o.duration_ns * 1e-6);
    }
  }
  py::dict d;
  d["rank"] = rank;
  d["stream"] = stream;
  d["kind"] = kind;
  d["stage"] = stage;
  d["microbatch"] = microbatch;
  d["step"] = step;
  d["op_index"] = op_index;
  d["start_ms"] = start_ms;
  d["duration_ms"] = duration_ms;
  return d;
}

void BindTraces(py::module_& m) {
  py::class_<schedules::TraceOp>(m, "TraceOp", "One op of a trace: where, when and which.")
      .def_readonly("rank", &schedules::TraceOp::rank)
      .def_property_readonly("stream", [](const schedules::TraceOp& t) { return static_cast<int>(t.stream); },
                             "0 compute, 1 send, 2 recv, 3 collective, 4 to host, 5 to device")
      .def_readonly("op", &schedules::TraceOp::op)
      .def_readonly("op_index", &schedules::TraceOp::op_index, "position in its rank's IR list")
      .def_property_readonly("start_ms", [](const schedules::TraceOp& t) { return t.start_ns * 1e-6; })
      .def_property_readonly("duration_ms", [](const schedules::TraceOp& t) { return t.duration_ns * 1e-6; });
  py::class_<TraceFile>(m, "TraceFile", "A trace as read (trace.h).")
      .def_readonly("path", &TraceFile::path)
      .def_property_readonly("source", [](const TraceFile& t) { return t.trace.source; })
      .def_property_readonly("costs", [](const TraceFile& t) { return t.trace.costs; })
      .def_property_readonly("scenario", [](const TraceFile& t) { return t.trace.scenario; })
      .def_property_readonly("schedule", [](const TraceFile& t) { return t.trace.schedule; })
      .def_property_readonly("microbatches", [](const TraceFile& t) { return t.trace.microbatches; })
      .def_property_readonly("ranks", [](const TraceFile& t) {
        const std::optional<schedules::Shape> shape = schedules::TraceShape(t.trace);
        return shape ? std::optional<int>(shape->ranks) : std::nullopt;
      })
      .def_readonly("skipped", &TraceFile::skipped)
      .def_readonly("first_skipped", &TraceFile::first_skipped)
      .def_property_readonly("op_count", [](const TraceFile& t) { return t.trace.ops.size(); })
      .def_property_readonly("ops", [](const TraceFile& t) { return t.trace.ops; }, "every op (a copy)")
      .def("summary_json", [](const TraceFile& t) { return SummaryJson(t.trace); })
      .def("columns", &TraceColumns)
      .def("bubble_split", [](const TraceFile& t) { return schedules::SplitBubbles(t.trace, true); },
           py::call_guard<py::gil_scoped_release>());
  m.def("read_trace", &ReadTrace, py::arg("path"), py::call_guard<py::gil_scoped_release>());
}

void BindComparison(py::module_& m) {
  py::class_<ComparisonResult>(m, "Comparison", "What `stagecraft compare` computes.")
      .def_property_readonly("text", [](const ComparisonResult& c) { return c.comparison.text; })
      .def_property_readonly("json", [](const ComparisonResult& c) { return c.comparison.json; })
      .def_property_readonly("worst", [](const ComparisonResult& c) { return c.comparison.worst; })
      .def_property_readonly("worst_error_pct", [](const ComparisonResult& c) { return c.comparison.worst_error_pct; })
      .def_property_readonly("exceeded", [](const ComparisonResult& c) { return c.comparison.exceeded; })
      .def_readonly("warnings", &ComparisonResult::warnings);
  m.def("read_run_file", &harness::ReadRunFile, py::arg("path"), py::call_guard<py::gil_scoped_release>(),
        "A metrics file as compare reads it");
  m.def("compare", &Compare, py::arg("predicted"), py::arg("measured"), py::arg("max_error_pct"),
        py::arg("trace_path"), py::call_guard<py::gil_scoped_release>());
}

}  // namespace

void BindRuns(py::module_& m) {
  BindSplits(m);
  BindSimulation(m);
  BindRunFiles(m);
  BindTraces(m);
  BindComparison(m);
}

}  // namespace stagecraft::python
