// The data-edge rule (see edges.h).
#include "stagecraft/schedules/edges.h"

namespace stagecraft::schedules {

// Stages are range-checked before the neighbour is computed: an op read from a file may name
// stage INT32_MAX, whose + 1 would overflow.
std::optional<Edge> EdgeFrom(const Shape& shape, Flow flow, int from_stage, int step, int microbatch) {
  if (from_stage < 0 || from_stage >= shape.stages()) return std::nullopt;
  const int to_stage = flow == Flow::kActivation ? from_stage + 1 : from_stage - 1;
  if (to_stage < 0 || to_stage >= shape.stages()) return std::nullopt;
  return Edge{flow, from_stage, to_stage, step, microbatch, shape.RankOf(from_stage), shape.RankOf(to_stage)};
}

namespace {

// The neighbour an op's input comes from, as (flow, producing stage).
std::optional<Edge> InputFrom(const Shape& shape, Flow flow, const Op& op) {
  if (op.stage < 0 || op.stage >= shape.stages()) return std::nullopt;
  const int from = flow == Flow::kActivation ? op.stage - 1 : op.stage + 1;
  return EdgeFrom(shape, flow, from, op.step, op.microbatch);
}

}  // namespace

std::optional<Edge> InputEdge(const Shape& shape, const Op& op) {
  const std::optional<Flow> flow = Info(op.kind).in_edge;
  return flow ? InputFrom(shape, *flow, op) : std::nullopt;
}

std::optional<Edge> OutputEdge(const Shape& shape, const Op& op) {
  const std::optional<Flow> flow = Info(op.kind).out_edge;
  return flow ? EdgeFrom(shape, *flow, op.stage, op.step, op.microbatch) : std::nullopt;
}

std::optional<Edge> CommEdge(const Shape& shape, const Op& op) {
  if (!IsComm(op.kind)) return std::nullopt;
  return IsSend(op.kind) ? OutputEdge(shape, op) : InputEdge(shape, op);
}

int PeerOf(const Shape& shape, const Op& op) {
  const std::optional<Edge> edge = CommEdge(shape, op);
  if (!edge) return -1;
  return IsSend(op.kind) ? edge->to_rank : edge->from_rank;
}

Op SendOf(const Edge& edge) {
  return Op{CommKindOf(Stream::kSend, edge.flow), edge.from_stage, edge.microbatch, edge.step, 0, edge.to_rank};
}

Op RecvOf(const Edge& edge) {
  return Op{CommKindOf(Stream::kRecv, edge.flow), edge.to_stage, edge.microbatch, edge.step, 0, edge.from_rank};
}

}  // namespace stagecraft::schedules
