// The explicit cost model (model.costs): per-rank, per-microbatch costs of each rank's whole
// share of the model, placed on the rank's own stages by the schedule's placement (loop or V).
//
// With v = stages / ranks virtual stages per rank, the rank's stage in chunk c gets value / v,
// and the remainder value % v is spread one unit each over the lowest chunks, so a rank's chunks
// add up to its value exactly. grad_bytes = weight_bytes, w_stash_bytes = optimizer_bytes = 0,
// send_bytes and p2p_latency as given.
#include <fmt/format.h>

#include "cost_checks.h"
#include "cost_model_rows.h"
#include "stagecraft/base/check.h"

namespace stagecraft::sim::detail {
namespace {

// Value / v for chunk c of v, the remainder spread one unit each over the lowest chunks.
int64_t Share(int64_t value, int v, int c) { return value / v + (c < value % v ? 1 : 0); }

CostTable ExplicitTable(const Scenario& sc, const CostQuery& query) {
  const ExplicitCosts& c = *sc.model.costs;
  const schedules::Shape& shape = query.shape;
  const int v = shape.chunks;
  for (const auto* list : {&c.forward_ns, &c.backward_input_ns, &c.backward_weight_ns, &c.activation_bytes,
                           &c.weight_bytes}) {
    SC_CHECK(static_cast<int>(list->size()) == shape.ranks, "one explicit cost per rank (Validate checks it)");
  }
  CostTable table;
  table.source = "explicit";
  table.p2p_latency_ns = c.p2p_latency_ns;
  for (int s = 0; s < shape.stages(); ++s) {
    const int r = shape.RankOf(s);
    const int chunk = shape.ChunkOf(s);
    StageCost cost;
    cost.forward_ns = Share(c.forward_ns[r], v, chunk);
    cost.backward_input_ns = Share(c.backward_input_ns[r], v, chunk);
    cost.backward_weight_ns = Share(c.backward_weight_ns[r], v, chunk);
    cost.activation_bytes = Share(c.activation_bytes[r], v, chunk);
    cost.weight_bytes = Share(c.weight_bytes[r], v, chunk);
    cost.grad_bytes = cost.weight_bytes;
    cost.send_bytes = c.send_bytes;
    table.stages.push_back(cost);
  }
  // Each value is within its range; only a full backward adds two of them.
  CheckComposedOps(table, sc.path, [shape](int stage) {
    return fmt::format("model.costs: backward_input + backward_weight of rank {}", shape.RankOf(stage));
  });
  return table;
}

}  // namespace

CostModel ExplicitCostModel() {
  return {"explicit", "model.costs", [](const Scenario& sc) { return sc.model.costs.has_value(); }, ExplicitTable,
          nullptr};
}

}  // namespace stagecraft::sim::detail
