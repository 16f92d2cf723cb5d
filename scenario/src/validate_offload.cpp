// pipeline.offload against the rest of the scenario (validate_detail.h).
#include <algorithm>

#include "validate_detail.h"

namespace stagecraft::sim::detail {

void CheckOffload(const Scenario& s, bool devices_counted, Problems* out) {
  const PipelineSpec& p = s.pipeline;
  if (p.offload.any() && !s.topology.host.stated()) {
    out->Add("pipeline.offload", "copies to host memory need topology.host (its memory and link)");
    return;
  }
  if (p.offload.optimizer != OptimizerPlace::kHost) return;
  if (p.offload.weights == WeightsOffload::kSpill ||
      std::find(p.schedules.begin(), p.schedules.end(), "spilled") != p.schedules.end()) {
    out->Add("pipeline.offload.optimizer", "host keeps the optimizer state on the host, and spilled weights bring it "
                                           "to the device for each STEP: choose one");
    return;
  }
  if (devices_counted && !s.topology.HostRunsTheStep()) {
    out->Add("topology.host", "pipeline.offload.optimizer: host runs each optimizer step on the host's CPU at its "
                              "DRAM's bandwidth: state topology.host.memory_bandwidth");
  }
}

}  // namespace stagecraft::sim::detail
