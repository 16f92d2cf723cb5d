// Scenarios in Python (scenario/scenario.h): loaded from a file or from YAML text with --set style
// overrides, through the same loader as the command line, so the same checks and messages.
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <pybind11/stl.h>

#include "bindings.h"
#include "stagecraft/base/printable.h"
#include "stagecraft/harness/predict.h"
#include "stagecraft/sim/scenario_checks.h"

namespace stagecraft::python {

void BindScenario(py::module_& m) {
  using sim::Scenario;
  py::class_<Scenario, std::shared_ptr<Scenario>>(m, "Scenario", "A loaded, validated scenario (DESIGN.md §3).")
      .def_readonly("name", &Scenario::name)
      .def_readonly("path", &Scenario::path, "the file it was loaded from, or the name given to its text")
      .def_readonly("overrides", &Scenario::overrides, "the --set texts it was loaded with, in order")
      .def_property_readonly("schedules", [](const Scenario& s) { return s.pipeline.schedules; },
                             "pipeline.schedule as written: names, files, or ['all']")
      .def_property_readonly("ranks", [](const Scenario& s) { return s.pipeline.ranks; })
      .def_property_readonly(
          "chunks",
          [](const Scenario& s) { return s.pipeline.chunks > 0 ? std::optional<int>(s.pipeline.chunks) : std::nullopt; },
          "pipeline.chunks as stated; None when absent (each schedule runs its own: 2 for those that interleave)")
      .def_property_readonly("microbatches", [](const Scenario& s) { return s.pipeline.microbatches; })
      .def_property_readonly("microbatch_size", [](const Scenario& s) { return s.pipeline.microbatch_size; })
      .def_property_readonly("steps", [](const Scenario& s) { return s.pipeline.steps; })
      .def_property_readonly("data_parallel", [](const Scenario& s) { return s.pipeline.data_parallel; })
      .def_property_readonly("tensor_parallel", [](const Scenario& s) { return s.pipeline.tensor_parallel; })
      .def_property_readonly("context_parallel", [](const Scenario& s) { return s.pipeline.context_parallel; })
      .def_property_readonly("devices", [](const Scenario& s) { return s.pipeline.world(); },
                             "ranks x data_parallel x context_parallel x tensor_parallel")
      .def_property_readonly("device", [](const Scenario& s) { return s.topology.DeviceAt(s.pipeline.DeviceOf(0)).name; })
      .def_property_readonly("device_memory_bytes", [](const Scenario& s) { return sim::RankDeviceMemory(s, 0); })
      .def_property_readonly("rank_devices",
                             [](const Scenario& s) {
                               std::vector<std::string> names;
                               for (int r = 0; r < s.pipeline.ranks; ++r) names.push_back(sim::RankDeviceNames(s, r, "+"));
                               return names;
                             })
      .def_property_readonly("rank_memory_bytes", [](const Scenario& s) { return sim::RankDeviceMemories(s); })
      .def("schedule_names", [](const Scenario& s) { return harness::ScenarioScheduleNames(s, false); },
           "The schedules simulate runs: the listed ones, or under 'all' every generator the shape allows")
      .def("__repr__", [](const Scenario& s) {
        return fmt::format("<Scenario {} ranks={} microbatches={}>", Printable(s.name), s.pipeline.ranks,
                           s.pipeline.microbatches);
      });

  m.def(
      "load_scenario",
      [](const std::string& path, const std::vector<std::string>& overrides) {
        return std::make_shared<Scenario>(sim::LoadScenario(path, overrides));
      },
      py::arg("path"), py::arg("overrides"), py::call_guard<py::gil_scoped_release>(),
      "LoadScenario: the file with its overrides ('key.path=value', as --set)");
  m.def(
      "load_scenario_for_plan",
      [](const std::string& path, const std::vector<std::string>& overrides) {
        return std::make_shared<Scenario>(sim::LoadScenarioForNewLayout(path, overrides));
      },
      py::arg("path"), py::arg("overrides"), py::call_guard<py::gil_scoped_release>(),
      "LoadScenarioForNewLayout: the file with its overrides, its pipeline layout left unchecked (plan replaces it)");
  m.def(
      "scenario_from_text",
      [](const std::string& text, const std::string& path, const std::vector<std::string>& overrides) {
        return std::make_shared<Scenario>(sim::LoadScenarioFromText(text, path, overrides));
      },
      py::arg("text"), py::arg("path"), py::arg("overrides"), py::call_guard<py::gil_scoped_release>(),
      "LoadScenarioFromText: `path` names the text in errors and is the base of its relative file names");
}

}  // namespace stagecraft::python
