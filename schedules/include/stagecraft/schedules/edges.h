// The one rule for an op's data edges (DESIGN.md §2). Activations flow from stage s to s + 1,
// gradients from s + 1 back to s; the chain of stages is the same under every placement, and
// only Shape::RankOf says which rank holds each end. Lowering, validation, analysis, CSV
// import, the simulator and the executor all ask this header, so none restates the rule.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "stagecraft/schedules/ir.h"
#include "stagecraft/schedules/unit_index.h"

namespace stagecraft::schedules {

// One tensor moving between neighbouring stages for one (step, microbatch).
struct Edge {
  Flow flow = Flow::kActivation;
  int32_t from_stage = 0, to_stage = 0;  // producer, consumer
  int32_t step = 0, microbatch = 0;
  int32_t from_rank = 0, to_rank = 0;    // the ranks holding those stages

  bool CrossesRanks() const { return from_rank != to_rank; }
  friend bool operator==(const Edge&, const Edge&) = default;
};

// The edge of `flow` that leaves `from_stage` for (step, microbatch); nullopt when that stage
// has no neighbour in that direction.
std::optional<Edge> EdgeFrom(const Shape& shape, Flow flow, int from_stage, int step, int microbatch);

// What an op reads from another stage: F above stage 0 reads activations, B or I below the
// last stage reads gradients, a RECV receives its edge. nullopt for every other op (W and STEP
// read only their own stage; the last stage's B/I reads the loss its own F computed).
std::optional<Edge> InputEdge(const Shape& shape, const Op& op);

// What an op produces for another stage: F below the last stage, B or I above stage 0, and a
// SEND sends its edge. nullopt for every other op.
std::optional<Edge> OutputEdge(const Shape& shape, const Op& op);

// The edge a SEND sends or a RECV receives (OutputEdge / InputEdge); nullopt for other ops and
// for a stage without that neighbour.
std::optional<Edge> CommEdge(const Shape& shape, const Op& op);

// The rank at the other end of a SEND/RECV (its correct `peer`), -1 when there is none.
int PeerOf(const Shape& shape, const Op& op);

// Whether an op of `kind` consumes the tensors of `flow` (F for activations; B or I, whichever
// the schedule splits into, for gradients; on the last stage B/I consume the loss gradient).
inline bool IsConsumerOf(OpKind kind, Flow flow) {
  return IsCompute(kind) && Info(kind).in_edge == flow;
}

// The SEND / RECV that carry an edge across ranks: the SEND on the producer's rank names the
// producing stage and the consumer's rank as peer, the RECV the consuming stage and the
// producer's rank. Version 0, as every comm op.
Op SendOf(const Edge& edge);
Op RecvOf(const Edge& edge);

// With replicas (Schedule::data_parallel > 1) a STEP also reads, on its own rank, the
// REDUCE_GRAD of its stage and version: its update's gradients summed over the replicas. This
// is that op (Lower places it; Validate, the simulator and the runtime look for it).
inline bool ReadsReduceGrad(const Schedule& s, const Op& op) {
  return s.data_parallel > 1 && (Info(op.kind).reads & kReducedGrads) != 0;
}
inline Op ReduceGradOf(const Op& step) {
  return Op{OpKind::kReduceGrad, step.stage, step.microbatch, step.step, step.version};
}

// A dense key per edge, unique over the schedule: (consumer unit, flow). It indexes the
// simulator's transfers, the executor's tensors in flight and its MPI tags.
inline size_t EdgeKey(const UnitIndex& units, const Edge& edge) {
  return units(edge.to_stage, edge.step, edge.microbatch) * 2 + static_cast<size_t>(edge.flow);
}
inline size_t EdgeKeyCount(const UnitIndex& units) { return units.size() * 2; }

// Calls fn(edge) for every edge of the schedule, activations and gradients, by step, stage
// boundary and microbatch.
template <typename Fn>
void ForEachEdge(const Schedule& s, Fn&& fn) {
  for (int step = 0; step < s.steps; ++step) {
    for (int stage = 0; stage + 1 < s.stages(); ++stage) {
      for (int mb = 0; mb < s.microbatches; ++mb) {
        fn(*EdgeFrom(s.shape, Flow::kActivation, stage, step, mb));
        fn(*EdgeFrom(s.shape, Flow::kGradient, stage + 1, step, mb));
      }
    }
  }
}

}  // namespace stagecraft::schedules
