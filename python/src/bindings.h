// The parts of the `stagecraft._core` extension module, one file each: every function here
// adds its classes and functions to the module. The Python package (python/stagecraft/) wraps
// them into the documented API.
#pragma once

#include <string>

#include <pybind11/pybind11.h>

namespace stagecraft::python {

namespace py = pybind11;

void BindSchedules(py::module_& m);  // Op, Diagnostic, Schedule; generate, import_csv
void BindScenario(py::module_& m);   // Scenario; load_scenario, scenario_from_text
void BindRuns(py::module_& m);       // Simulation, RunFile, Trace, BubbleSplit; simulate, read_run, read_trace, compare
void BindSearch(py::module_& m);     // SearchResult; search
void BindPlan(py::module_& m);       // PlanRun; plan

// The file a Python argument names: a str or any os.PathLike, as text.
std::string PathOf(const py::handle& path);

}  // namespace stagecraft::python
