// Fuzz harness: a topology file (what a scenario's `topology: FILE` names). The text reaches
// the scenario loader as `--set topology=TEXT` over a one-rank scenario, the same YAML parse,
// topology block checks and sim::Topology construction a topology file gets; then routes are
// computed as the simulator asks for them, from the first two devices (a route source costs a
// shortest-path search over the whole machine) to the first devices and the last.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_input.h"
#include "stagecraft/base/error.h"
#include "stagecraft/sim/scenario_checks.h"
#include "stagecraft/sim/topology.h"

namespace {

constexpr std::string_view kScenario = R"(name: topology-fuzz
topology: {device: {name: d, peak: 1TFLOPS, memory: 1GiB}, devices_per_node: 1}
model: {costs: {forward: 1ms, backward_input: 1ms, backward_weight: 1ms}}
pipeline: {schedule: gpipe, ranks: 1, microbatches: 1}
)";
constexpr int kRoutedDevices = 16;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace stagecraft;
  try {
    const sim::Scenario s = sim::LoadScenarioFromText(kScenario, "topology-fuzz.yaml",
                                                      {"topology=" + std::string(fuzz::AsText(data, size))});
    const sim::Topology topology(s.topology);
    const int devices = topology.devices();
    for (int a = 0; a < std::min(devices, 2); ++a) {
      for (int b = 0; b < std::min(devices, kRoutedDevices); ++b) {
        topology.RouteLatencyNs(a, b);
        topology.RouteBandwidth(a, b);
      }
      topology.RouteLatencyNs(a, devices - 1);
      topology.RouteBandwidth(a, devices - 1);
    }
  } catch (const InputError&) {
    // Bad input, reported as it should be; anything else escapes to the fuzzer.
  }
  return 0;
}
