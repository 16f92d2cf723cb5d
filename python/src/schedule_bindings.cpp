// The schedule IR in Python (ir.h): ops, schedules, their validation and their forms, as
// `stagecraft schedule` makes and prints them (generate, --import, --format grid|csv|json).
#include <cstdint>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <pybind11/stl.h>

#include "bindings.h"
#include "stagecraft/base/error.h"
#include "stagecraft/base/input_file.h"
#include "stagecraft/base/printable.h"
#include "stagecraft/schedules/analysis.h"
#include "stagecraft/schedules/budget.h"
#include "stagecraft/schedules/csv_io.h"
#include "stagecraft/schedules/generators.h"
#include "stagecraft/schedules/json_io.h"
#include "stagecraft/schedules/lower.h"
#include "stagecraft/schedules/validate.h"

namespace stagecraft::python {
namespace {

using namespace stagecraft::schedules;

P2p P2pOf(const std::string& text) {
  P2p p2p = P2p::kAhead;
  if (!ParseP2p(text, &p2p)) throw InputError(fmt::format("p2p: expected ahead or lockstep, got '{}'", text));
  return p2p;
}

// The schedule with the transfers a form shows, as `stagecraft schedule` prints it: a file's own
// SEND/RECV as they are (its REDUCE_GRADs placed); otherwise lowered when the form shows
// transfers (JSON, CSV with comms, replicas).
Schedule WithTransfers(const Schedule& s, bool shows_transfers, const std::string& p2p) {
  if (s.lowered) return PlaceReduceGrads(s);
  if (!shows_transfers && s.data_parallel <= 1) return s;
  return Lower(s, P2pOf(p2p));
}

// Throws InputError with the line `stagecraft schedule` prints for an invalid schedule.
void RefuseInvalid(const Schedule& s) {
  if (const auto diags = Validate(s); !diags.empty()) {
    throw InputError(fmt::format("{}: {}", Printable(s.name), SummarizeDiagnostics(diags)));
  }
}

// The arguments' types and signs are stagecraft.schedule's to check; the generator checks the
// shape.
Schedule Generated(const std::string& name, int ranks, int microbatches, int chunks, int steps, int data_parallel,
                   bool recompute, bool vertical_sync, int64_t max_ops) {
  const GeneratorInfo* info = FindGenerator(name);
  GeneratorParams params;
  params.ranks = ranks;
  params.microbatches = microbatches;
  params.chunks = info != nullptr ? ChunksFor(*info, chunks) : chunks;  // 0: the schedule's own
  params.steps = steps;
  params.vertical_sync = vertical_sync;
  params.recompute = recompute;
  params.data_parallel = data_parallel;
  // Before anything is built: a shape too large to hold is refused by its estimate.
  if (info != nullptr) CheckSize(DescribeShape(info->name, params), EstimateSize(*info, params), max_ops);
  return Generate(name, params);
}

// A CSV given as a path (any os.PathLike, or a str without a newline or comma) or as its text.
Schedule Imported(const py::object& source, int chunks, int microbatches, int steps, const std::string& weights,
                  int data_parallel, const std::string& name, bool validate) {
  const bool is_text = py::isinstance<py::str>(source) && source.cast<std::string>().find_first_of("\n,") !=
                                                              std::string::npos;
  std::string text, where;
  if (is_text) {
    text = source.cast<std::string>();
    where = name.empty() ? "<csv>" : name;
  } else {
    where = PathOf(source);
    py::gil_scoped_release release;
    text = ReadInputFile(where, kMaxCsvBytes, "a schedule CSV");
  }
  CsvImportOptions options;
  options.name = name.empty() ? where : name;
  options.chunks = chunks;
  options.microbatches = microbatches;
  options.steps = steps;
  if (!ParsePolicy(weights, &options.weights)) {
    throw InputError(fmt::format("weights: expected {}, got '{}'", schedules::PolicyChoices(), weights));
  }
  py::gil_scoped_release release;
  Schedule s = ImportCsv(text, where, options);
  s.data_parallel = data_parallel;
  if (s.lowered) s = PlaceReduceGrads(s);
  if (validate) RefuseInvalid(s);
  return s;
}

std::string OpRepr(const Op& op) {
  std::string text = fmt::format("Op({} stage={} microbatch={} step={} version={}", KindName(op.kind), op.stage,
                                 op.microbatch, op.step, op.version);
  if (op.peer >= 0) text += fmt::format(" peer={}", op.peer);
  if (op.overlapped) text += " overlapped";
  return text + ")";
}

void BindOps(py::module_& m) {
  py::class_<Op>(m, "Op", "One op of a rank's list (DESIGN.md §2).")
      .def_property_readonly("kind", [](const Op& op) { return std::string(KindName(op.kind)); },
                             "F, B, I, W, SEND_F, RECV_F, SEND_B, RECV_B, STEP, REDUCE_GRAD, OFFLOAD or RELOAD")
      .def_readonly("stage", &Op::stage, "the stage doing the op (SEND/RECV: the local stage)")
      .def_readonly("microbatch", &Op::microbatch, "index within its step")
      .def_readonly("step", &Op::step, "the optimizer step the microbatch belongs to")
      .def_readonly("version", &Op::version, "weight version read (F/B/I/W) or produced (STEP)")
      .def_readonly("peer", &Op::peer, "SEND: destination rank; RECV: source rank; -1 otherwise")
      .def_readonly("overlapped", &Op::overlapped, "second op of an overlapped (F;B) pair")
      .def_property_readonly(
          "tensor", [](const Op& op) { return op.tensor == Tensor::kNone ? std::string() : std::string(TensorName(op.tensor)); },
          "OFFLOAD / RELOAD: activations, weights or optimizer; '' for every other op")
      .def("action", &ActionString, py::arg("microbatches_per_step"),
           "PyTorch's action string, e.g. '0F0', '1SEND_F3' (the microbatch numbered across steps)")
      .def("__eq__", [](const Op& a, const Op& b) { return a == b; })
      .def("__repr__", &OpRepr);

  py::class_<Diagnostic>(m, "Diagnostic", "One problem Schedule.validate() found.")
      .def_property_readonly("code", [](const Diagnostic& d) { return std::string(DiagCodeName(d.code)); })
      .def_readonly("message", &Diagnostic::message)
      .def("__repr__", [](const Diagnostic& d) { return fmt::format("{}: {}", DiagCodeName(d.code), d.message); });
}

void BindScheduleClass(py::module_& m) {
  py::class_<Schedule>(m, "Schedule", "A schedule: its shape, weight policy and per rank the ops in order (ir.h).")
      .def_readonly("name", &Schedule::name)
      .def_property_readonly("ranks", &Schedule::ranks)
      .def_property_readonly("chunks", [](const Schedule& s) { return s.shape.chunks; })
      .def_property_readonly("stages", &Schedule::stages)
      .def_property_readonly("placement", [](const Schedule& s) { return std::string(PlacementName(s.shape.placement)); })
      .def_readonly("microbatches", &Schedule::microbatches)
      .def_readonly("steps", &Schedule::steps)
      .def_property_readonly("weights", [](const Schedule& s) { return std::string(PolicyName(s.weights)); })
      .def_readonly("recompute", &Schedule::recompute)
      .def_readonly("vertical_sync", &Schedule::vertical_sync)
      .def_readonly("lowered", &Schedule::lowered, "whether SEND/RECV are in the lists")
      .def_readonly("data_parallel", &Schedule::data_parallel)
      .def_readonly("ops", &Schedule::ops, "per rank, its ops in execution order (a copy)")
      .def_property_readonly("op_count", &Schedule::OpCount)
      .def("rank_of", [](const Schedule& s, int stage) { return s.shape.RankOf(stage); }, py::arg("stage"))
      .def("validate", [](const Schedule& s) { return Validate(s); }, py::call_guard<py::gil_scoped_release>(),
           "Every problem found (empty when valid): each unit's F and backward, order, versions, "
           "SEND/RECV pairs, deadlocks")
      .def("lower",
           [](const Schedule& s, const std::string& p2p, int buffers) {
             const P2p mode = P2pOf(p2p);
             py::gil_scoped_release release;
             return Lower(s, mode, buffers);
           },
           py::arg("p2p") = "ahead", py::arg("buffers") = kAheadBuffersPerStage,
           "The schedule with SEND/RECV inserted (lower.h); p2p 'ahead' or 'lockstep'")
      .def("to_csv",
           [](const Schedule& s, bool comms, const std::string& p2p) {
             py::gil_scoped_release release;
             const Schedule shown = WithTransfers(s, comms, p2p);
             RefuseInvalid(shown);
             return ExportCsv(shown, comms ? CsvForm::kComputeComms : CsvForm::kComputeOnly);
           },
           py::arg("comms") = false, py::arg("p2p") = "ahead",
           "PyTorch torch.distributed.pipelining CSV, as `stagecraft schedule --format csv [--comms]` prints it")
      .def("to_json",
           [](const Schedule& s, const std::string& p2p) {
             py::gil_scoped_release release;
             const Schedule shown = WithTransfers(s, true, p2p);
             RefuseInvalid(shown);
             return ToJson(shown) + "\n";
           },
           py::arg("p2p") = "ahead", "The lowered IR as JSON, as `stagecraft schedule --format json` prints it")
      .def("grid",
           [](const Schedule& s) {
             if (std::string why = GridSizeProblem(s); !why.empty()) throw InputError(why);
             py::gil_scoped_release release;
             const Schedule shown = WithTransfers(s, false, "ahead");
             RefuseInvalid(shown);
             return RenderGrid(shown);
           },
           "The unit-time grid, as `stagecraft schedule` prints it")
      .def("__eq__", [](const Schedule& a, const Schedule& b) { return a == b; })
      .def("__repr__", [](const Schedule& s) {
        return fmt::format("<Schedule {} ranks={} chunks={} microbatches={} steps={} ops={}>", Printable(s.name),
                           s.ranks(), s.shape.chunks, s.microbatches, s.steps, s.OpCount());
      });
}

}  // namespace

void BindSchedules(py::module_& m) {
  m.attr("DEFAULT_MAX_OPS") = kDefaultMaxOps;
  m.attr("MAX_MAX_OPS") = kMaxMaxOps;
  BindOps(m);
  BindScheduleClass(m);
  m.def("generator_names", [] {
    std::vector<std::string> names;
    for (const GeneratorInfo& g : Generators()) names.emplace_back(g.name);
    return names;
  });
  m.def("generate", &Generated, py::arg("name"), py::arg("ranks"), py::arg("microbatches"), py::arg("chunks"),
        py::arg("steps"), py::arg("data_parallel"), py::arg("recompute"), py::arg("vertical_sync"),
        py::arg("max_ops"), py::call_guard<py::gil_scoped_release>(),
        "A generator's schedule, unlowered (`stagecraft schedule --schedule`)");
  m.def("import_csv", &Imported, py::arg("source"), py::arg("chunks"), py::arg("microbatches"), py::arg("steps"),
        py::arg("weights"), py::arg("data_parallel"), py::arg("name"), py::arg("validate"),
        "A PyTorch CSV as `stagecraft schedule --import` reads it (chunks 0: inferred)");
}

}  // namespace stagecraft::python
