// `stagecraft._core`: the C++ libraries as a Python extension module. Bad input (a C++
// stagecraft::InputError) is raised as stagecraft.InputError carrying the one line the command
// line prints after "stagecraft: error: "; any other C++ failure as RuntimeError.
#include <exception>

#include <pybind11/pybind11.h>

#include "bindings.h"
#include "stagecraft/base/error.h"
#include "stagecraft/base/printable.h"

namespace stagecraft::python {

std::string PathOf(const py::handle& path) {
  return py::str(py::module_::import("os").attr("fspath")(path)).cast<std::string>();
}

}  // namespace stagecraft::python

PYBIND11_MODULE(_core, m) {
  namespace py = pybind11;
  using namespace stagecraft::python;
  m.doc() = "stagecraft's C++ libraries (schedules, simulator, search, compare); use the stagecraft package";
  py::register_exception_translator([](std::exception_ptr thrown) {
    try {
      if (thrown) std::rethrow_exception(thrown);
    } catch (const stagecraft::InputError& e) {
      // The class lives in the package (stagecraft/_errors.py), which reads file, line and column
      // off the message; the message is escaped into one line as the command line prints it.
      const py::object type = py::module_::import("stagecraft._errors").attr("InputError");
      const py::object error = type(stagecraft::Printable(e.what()));
      PyErr_SetObject(type.ptr(), error.ptr());
    }
  });
  BindSchedules(m);
  BindScenario(m);
  BindRuns(m);
  BindSearch(m);
  BindPlan(m);
}
