// Op kinds as data (DESIGN.md §2, §10): one row per kind states its name, what it is, the stream
// it runs on, the data it reads and writes, the cost field that prices it, its memory effect and
// the colour key the viewer paints it with. Every predicate and per-kind rule outside this file
// reads the table, so a new kind is a row here, its generator or lowering, and its executor op.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace stagecraft::schedules {

enum class OpKind : uint8_t {
  kF,      // forward
  kB,      // full backward (input and weight gradients)
  kI,      // backward for inputs only (Zero Bubble "B")
  kW,      // backward for weights only (Zero Bubble "W")
  kSendF,  // post the send of activations to the next stage
  kRecvF,  // post the receive of activations from the previous stage
  kSendB,  // post the send of input gradients to the previous stage
  kRecvB,  // post the receive of output gradients from the next stage
  kStep,   // optimizer step of one stage; produces weight version `version`
  // Data parallelism (Schedule::data_parallel > 1): posts the all-reduce of one stage's
  // gradients over its replicas (reduce-scatter + all-gather with ZeRO-1) for the update that
  // the STEP producing `version` applies. Like a SEND it only posts: the collective runs on the
  // rank's collective stream, and that STEP waits for it.
  kReduceGrad,
  // Copies between device and host memory (DESIGN.md §10): what moves is the op's `tensor` (a
  // stage-microbatch's activations, a weight version, the optimizer state of an update). An
  // OFFLOAD frees the device's copy when it completes; a RELOAD brings it back before the ops
  // after it in the rank's list read it. Each runs on its direction's copy stream.
  kOffload,
  kReload,
  // Expert parallelism (DESIGN.md §10): the all-to-alls of a compute op's MoE layers (each
  // layer's token dispatch to the experts' devices and combine back) over its stage's expert
  // group, on the collective stream. Its `tensor` names the pass: activations for an F's, input
  // gradients for a B's or an I's. It reads that op's output and the rank's list goes on past it
  // only once it ends (the layers' compute waits on it), except that an overlapped F&B pair runs
  // its two beside its computation (all_to_all.h).
  kAllToAll,
};
inline constexpr int kNumOpKinds = 13;

// What an op is: compute (a pass of the model), comm (a SEND/RECV between pipeline ranks),
// collective (over a stage's replicas), optimizer (a STEP) or copy (OFFLOAD/RELOAD).
enum class OpClass : uint8_t { kCompute, kComm, kCollective, kOptimizer, kCopy };

// The stream an op runs on, which is also its trace event's tid (DESIGN.md §6, §9, §10). A
// trace has a collective lane only with replicas, copy lanes only with copies.
enum class Stream : uint8_t { kCompute = 0, kSend = 1, kRecv = 2, kCollective = 3, kToHost = 4, kToDevice = 5 };
inline constexpr int kNumStreams = 6;

// What an OFFLOAD or RELOAD moves (Op::tensor); kNone for every other op.
enum class Tensor : uint8_t {
  kNone,
  kActivations,  // what a stage-microbatch's F stashed for its B or I (the op's stage, step, microbatch)
  kWeights,      // the weight version the op's `version` names
  kOptimizer,    // the optimizer state the STEP producing `version` updates
  kGradients,    // an ALL_TO_ALL's in a backward: the input gradients of the stage-microbatch's tokens
};
inline constexpr int kNumTensors = 5;
struct TensorNames {
  std::string_view name;  // in JSON and traces: "activations", "weights", "optimizer"
  std::string_view code;  // in action strings: "0OFFLOAD_ACT3"
};
inline constexpr std::array<TensorNames, kNumTensors> kTensorNames = {
    {{"none", ""}, {"activations", "ACT"}, {"weights", "WEIGHT"}, {"optimizer", "OPT"}, {"gradients", "GRAD"}}};
constexpr std::string_view TensorName(Tensor t) { return kTensorNames[static_cast<size_t>(t)].name; }
constexpr bool ParseTensor(std::string_view text, Tensor* t) {
  for (size_t i = 1; i < kTensorNames.size(); ++i) {
    if (kTensorNames[i].name == text) {
      *t = static_cast<Tensor>(i);
      return true;
    }
  }
  return false;
}

// A tensor moving between neighbouring stages (edges.h).
enum class Flow : uint8_t {
  kActivation = 0,  // F of stage s -> F of stage s + 1 (SEND_F / RECV_F)
  kGradient = 1,    // B or I of stage s + 1 -> B or I of stage s (SEND_B / RECV_B)
};

// What an op reads and writes of its stage, as bits.
enum Data : uint8_t {
  kNoData = 0,
  kActivations = 1 << 0,   // activations between stages (Flow::kActivation)
  kInputGrads = 1 << 1,    // input gradients between stages (Flow::kGradient)
  kWeights = 1 << 2,       // a weight version (the one the op's `version` names; a STEP its base)
  kWeightGrads = 1 << 3,   // the gradient buffer of an update (weights.h UpdateIndex)
  kReducedGrads = 1 << 4,  // that buffer summed over the replicas
};

// Which per-stage cost prices an op: the fields of schedules::StageCostMetrics and of the
// simulator's StageCost, in this order. kBackward is the full backward (input + weight).
enum class CostField : int8_t { kNone = -1, kForward, kBackward, kBackwardInput, kBackwardWeight, kStep };
inline constexpr int kNumCostFields = 5;

// Where an op sits in its (stage, step, microbatch) unit: forward, backward for inputs (a full B
// or an I: it consumes the output gradient), backward for weights (W); none for the others.
enum class Phase : uint8_t { kNone, kForward, kInputBackward, kWeightBackward };

// The scratch memory a compute op holds only while it runs.
enum class Workspace : uint8_t { kNone, kForward, kBackward };

// What an op does to a rank's memory (the simulator's memory model, the IR's analysis, the
// search's order memory): `activations` +1 holds the unit's activations from the op's start, -1
// frees them at its end; `w_stash` +1 keeps the weight-gradient stash from its end, -1 frees it
// at its end; `recompute` holds the recomputed forward while it runs; `workspace` as above;
// `device` -1 (OFFLOAD) frees the op's tensor on the device at its end and holds it on the host
// from its start, +1 (RELOAD) holds it on the device from its start and frees the host's at its end.
struct MemoryEffect {
  int8_t activations = 0;
  int8_t w_stash = 0;
  bool recompute = false;
  Workspace workspace = Workspace::kNone;
  int8_t device = 0;
};

// The viewer's colour for an op (viz/app/palette.h).
enum class ColorKey : uint8_t {
  kForward,
  kBackward,
  kBackwardInput,
  kBackwardWeight,
  kSend,
  kRecv,
  kStep,
  kCollective,
  kOffload,
  kReload,
  kAllToAll,
};
inline constexpr int kNumColorKeys = 11;

// What the number in an action string is: the global microbatch ("1F3"), the version the op
// produces or reduces for ("0STEP2", "0REDUCE_GRAD2"), or for a copy or an all-to-all its
// tensor's: activations and gradients by microbatch ("0OFFLOAD_ACT3", "0ALL_TO_ALL_GRAD3"),
// weights and optimizer state by version ("0RELOAD_WEIGHT2").
enum class ActionNumber : uint8_t { kMicrobatch, kVersion, kTensor };

struct OpKindInfo {
  OpKind kind;
  std::string_view name;  // the action-string and CSV/JSON/trace name
  OpClass op_class;
  Stream stream;
  Phase phase;
  std::optional<Flow> in_edge;   // what it takes from a neighbouring stage (edges.h InputEdge)
  std::optional<Flow> out_edge;  // what it gives a neighbouring stage (edges.h OutputEdge)
  uint8_t reads;                 // Data bits
  uint8_t writes;                // Data bits
  CostField cost;
  int8_t unit_time;  // its length on the unit-time grid (analysis.h): F = I = W = 1, B = 2
  MemoryEffect memory;
  ColorKey color;
  ActionNumber number;
};

inline constexpr std::array<OpKindInfo, kNumOpKinds> kOpKinds = {{
    {OpKind::kF, "F", OpClass::kCompute, Stream::kCompute, Phase::kForward, Flow::kActivation, Flow::kActivation,
     kActivations | kWeights, kActivations, CostField::kForward, 1, {+1, 0, false, Workspace::kForward},
     ColorKey::kForward, ActionNumber::kMicrobatch},
    {OpKind::kB, "B", OpClass::kCompute, Stream::kCompute, Phase::kInputBackward, Flow::kGradient, Flow::kGradient,
     kInputGrads | kWeights, kInputGrads | kWeightGrads, CostField::kBackward, 2,
     {-1, 0, true, Workspace::kBackward}, ColorKey::kBackward, ActionNumber::kMicrobatch},
    {OpKind::kI, "I", OpClass::kCompute, Stream::kCompute, Phase::kInputBackward, Flow::kGradient, Flow::kGradient,
     kInputGrads | kWeights, kInputGrads, CostField::kBackwardInput, 1, {-1, +1, true, Workspace::kBackward},
     ColorKey::kBackwardInput, ActionNumber::kMicrobatch},
    {OpKind::kW, "W", OpClass::kCompute, Stream::kCompute, Phase::kWeightBackward, std::nullopt, std::nullopt,
     kWeights, kWeightGrads, CostField::kBackwardWeight, 1, {0, -1, false, Workspace::kBackward},
     ColorKey::kBackwardWeight, ActionNumber::kMicrobatch},
    {OpKind::kSendF, "SEND_F", OpClass::kComm, Stream::kSend, Phase::kNone, std::nullopt, Flow::kActivation,
     kActivations, kNoData, CostField::kNone, 0, {}, ColorKey::kSend, ActionNumber::kMicrobatch},
    {OpKind::kRecvF, "RECV_F", OpClass::kComm, Stream::kRecv, Phase::kNone, Flow::kActivation, std::nullopt,
     kNoData, kActivations, CostField::kNone, 0, {}, ColorKey::kRecv, ActionNumber::kMicrobatch},
    {OpKind::kSendB, "SEND_B", OpClass::kComm, Stream::kSend, Phase::kNone, std::nullopt, Flow::kGradient,
     kInputGrads, kNoData, CostField::kNone, 0, {}, ColorKey::kSend, ActionNumber::kMicrobatch},
    {OpKind::kRecvB, "RECV_B", OpClass::kComm, Stream::kRecv, Phase::kNone, Flow::kGradient, std::nullopt,
     kNoData, kInputGrads, CostField::kNone, 0, {}, ColorKey::kRecv, ActionNumber::kMicrobatch},
    {OpKind::kStep, "STEP", OpClass::kOptimizer, Stream::kCompute, Phase::kNone, std::nullopt, std::nullopt,
     kWeights | kWeightGrads | kReducedGrads, kWeights, CostField::kStep, 0, {}, ColorKey::kStep,
     ActionNumber::kVersion},
    {OpKind::kReduceGrad, "REDUCE_GRAD", OpClass::kCollective, Stream::kCollective, Phase::kNone, std::nullopt,
     std::nullopt, kWeightGrads, kReducedGrads, CostField::kNone, 0, {}, ColorKey::kCollective,
     ActionNumber::kVersion},
    {OpKind::kOffload, "OFFLOAD", OpClass::kCopy, Stream::kToHost, Phase::kNone, std::nullopt, std::nullopt, kNoData,
     kNoData, CostField::kNone, 0, {0, 0, false, Workspace::kNone, -1}, ColorKey::kOffload, ActionNumber::kTensor},
    {OpKind::kReload, "RELOAD", OpClass::kCopy, Stream::kToDevice, Phase::kNone, std::nullopt, std::nullopt, kNoData,
     kNoData, CostField::kNone, 0, {0, 0, false, Workspace::kNone, +1}, ColorKey::kReload, ActionNumber::kTensor},
    {OpKind::kAllToAll, "ALL_TO_ALL", OpClass::kCollective, Stream::kCollective, Phase::kNone, std::nullopt,
     std::nullopt, kNoData, kNoData, CostField::kNone, 0, {}, ColorKey::kAllToAll, ActionNumber::kTensor},
}};

constexpr const OpKindInfo& Info(OpKind kind) { return kOpKinds[static_cast<size_t>(kind)]; }

constexpr bool RowsInKindOrder() {
  for (size_t i = 0; i < kOpKinds.size(); ++i) {
    if (static_cast<size_t>(kOpKinds[i].kind) != i) return false;
  }
  return true;
}
static_assert(RowsInKindOrder(), "kOpKinds has one row per OpKind, in enum order");

// The predicates, all read off the table.
constexpr bool IsCompute(OpKind k) { return Info(k).op_class == OpClass::kCompute; }
// SEND/RECV between pipeline ranks (not REDUCE_GRAD: a collective over the replicas).
constexpr bool IsComm(OpKind k) { return Info(k).op_class == OpClass::kComm; }
// The collectives over the replicas: they run on a rank's collective stream, not its compute.
constexpr bool IsCollective(OpKind k) { return Info(k).op_class == OpClass::kCollective; }
// OFFLOAD and RELOAD: copies between device and host memory, on the copy streams.
constexpr bool IsCopy(OpKind k) { return Info(k).op_class == OpClass::kCopy; }
constexpr bool IsSend(OpKind k) { return IsComm(k) && Info(k).stream == Stream::kSend; }
constexpr bool IsRecv(OpKind k) { return IsComm(k) && Info(k).stream == Stream::kRecv; }
constexpr bool IsForward(OpKind k) { return Info(k).phase == Phase::kForward; }
constexpr bool IsBackward(OpKind k) {
  return Info(k).phase == Phase::kInputBackward || Info(k).phase == Phase::kWeightBackward;
}
// Compute ops and STEPs: what holds a rank's compute stream.
constexpr bool RunsOnCompute(OpKind k) { return Info(k).stream == Stream::kCompute; }
// A STEP: it produces a new weight version of its stage.
constexpr bool ProducesVersion(OpKind k) { return (Info(k).writes & kWeights) != 0; }
// A REDUCE_GRAD: it sums an update's gradients over the replicas.
constexpr bool ReducesGradients(OpKind k) { return (Info(k).writes & kReducedGrads) != 0; }
// An ALL_TO_ALL: the expert group's dispatch and combine of a compute op's MoE layers.
constexpr bool IsAllToAll(OpKind k) { return IsCollective(k) && !ReducesGradients(k); }
// Ops that name a tensor (Op::tensor): copies and all-to-alls.
constexpr bool NamesTensor(OpKind k) { return Info(k).number == ActionNumber::kTensor; }
constexpr bool WritesWeightGrads(OpKind k) { return (Info(k).writes & kWeightGrads) != 0; }

// The comm kind on `stream` (kSend or kRecv) that carries `flow`.
constexpr OpKind CommKindOf(Stream stream, Flow flow) {
  for (const OpKindInfo& row : kOpKinds) {
    if (row.op_class != OpClass::kComm || row.stream != stream) continue;
    if ((stream == Stream::kSend ? row.out_edge : row.in_edge) == flow) return row.kind;
  }
  return OpKind::kF;  // unreachable for kSend / kRecv
}

// The kind a cost field prices (kF for kForward, ...).
constexpr OpKind KindPricedBy(CostField field) {
  for (const OpKindInfo& row : kOpKinds) {
    if (row.cost == field) return row.kind;
  }
  return OpKind::kF;  // unreachable for a field other than kNone
}
constexpr int CostIndex(OpKind k) { return static_cast<int>(Info(k).cost); }  // -1: no cost field

constexpr std::string_view KindName(OpKind kind) { return Info(kind).name; }  // "F", ..., "REDUCE_GRAD"
constexpr bool ParseKind(std::string_view text, OpKind* kind) {
  for (const OpKindInfo& row : kOpKinds) {
    if (row.name == text) {
      *kind = row.kind;
      return true;
    }
  }
  return false;
}

}  // namespace stagecraft::schedules
