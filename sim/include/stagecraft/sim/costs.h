// Per-stage compute times and memory sizes the simulator charges (DESIGN.md §3, §4): from a
// measured profile, from explicit per-rank costs, or derived analytically from the model's
// FLOPs and bytes on the topology's device.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "stagecraft/base/error.h"
#include "stagecraft/schedules/ir.h"
#include "stagecraft/sim/profile.h"
#include "stagecraft/sim/scenario.h"

namespace stagecraft::sim {

// What one stage costs per microbatch.
struct StageCost {
  int64_t forward_ns = 0;
  int64_t backward_input_ns = 0;  // a full backward B costs backward_input + backward_weight
  int64_t backward_weight_ns = 0;
  int64_t fused_backward_ns = 0;  // when > 0, what a full B costs instead of input + weight
  int64_t step_ns = 0;           // optimizer STEP of the stage's parameters (0: not modelled)
  int64_t version_copy_ns = 0;   // added to a STEP that must keep the old version (copy first)
  int64_t activation_bytes = 0;  // stashed per microbatch from F until its B / I
  int64_t w_stash_bytes = 0;     // kept from I until W (inputs of the linear layers)
  // With recompute: what a B / I rebuilds from the stashed input and holds while it runs.
  int64_t recompute_bytes = 0;
  // What a compute op holds while it runs beyond what it keeps (its temporaries; 0: not modelled);
  // an F may hold more (the last stage's output, beside its gradient until the loss reads it).
  int64_t workspace_bytes = 0;
  int64_t forward_workspace_bytes = 0;
  int64_t weight_bytes = 0;      // one weight version
  int64_t grad_bytes = 0;
  int64_t optimizer_bytes = 0;
  int64_t send_bytes = 0;  // activation / gradient sent to a neighbour stage per microbatch
};

struct CostTable {
  std::vector<StageCost> stages;  // indexed by stage
  int64_t p2p_latency_ns = 0;     // added per hop on top of the topology's route
  std::string source;             // "explicit" | "transformer" | "mlp" | "profile:<path>"
  // From a calibrated profile: the runtime's work per op of a rank's list (the stream is held
  // that long after each op, unless it waits for an input anyway), and measured transfers in
  // place of the topology's links.
  int64_t op_overhead_ns = 0;
  std::vector<int64_t> rank_op_overhead_ns;  // by rank, when the profile has them
  // How much a compute op's time varies from one run of it to the next (coefficient of
  // variation): with op_time_cv > 0 each op's time is its cost times a log-normal draw of mean
  // 1 and that spread, fixed by the seed and the op's place (simulate twice, get the same run).
  double op_time_cv = 0;
  uint64_t op_time_seed = 1;
  std::optional<P2pProfile> p2p;

  int64_t OverheadOf(int rank) const {
    return rank >= 0 && rank < static_cast<int>(rank_op_overhead_ns.size()) ? rank_op_overhead_ns[rank]
                                                                            : op_overhead_ns;
  }
};

// Layers per stage, the split the analytical models, profiles and the executor all use: even,
// the first layers % stages stages taking one more. Throws InputError (naming `what`) when
// there are fewer layers than stages.
std::vector<int> SplitLayers(int layers, int stages, std::string_view what);

// Balanced split: contiguous layers per stage (each stage at least one) minimizing the most
// expensive stage, where stage s costs its layers' `layer_cost` plus `stage_extra[s]` (e.g.
// the LM head on the last stage). Exact (dynamic programming over split points, O(stages ·
// layers²)); among equally good splits the one closest to even is taken, earlier stages
// taking the extra layer. Throws InputError when there are fewer layers than stages, or when
// the search would pass 2^25 table cells ((stages + 1) x (layers + 1)) or 2^31 steps.
std::vector<int> PartitionLayers(const std::vector<double>& layer_cost, const std::vector<double>& stage_extra,
                                 std::string_view what);

// The layers per stage a scenario uses for `stages` stages, in the simulator and the executor
// alike: SplitLayers under pipeline.partition "even"; under "balanced", PartitionLayers over
// the profile's per-layer forward + backward_input + backward_weight + step when model.profile
// is set, else the analytical per-layer FLOPs (transformer: the LM head counted on the last
// stage). Throws InputError for a model without layers (explicit costs) or a bad profile.
std::vector<int> StageLayers(const Scenario& scenario, int stages);

// Costs for `stages` stages (a multiple of pipeline.ranks) under loop placement (stage s on
// rank s % ranks). Precedence: model.profile > model.costs > transformer / mlp.
//
// Explicit costs are per rank for that rank's whole share of the model; with v = stages / ranks
// virtual stages per rank, the stage in chunk c gets value / v, and the remainder value % v is
// spread one unit each over the lowest chunks, so a rank's chunks add up to its value exactly.
// grad_bytes = weight_bytes, w_stash_bytes = optimizer_bytes = 0, send_bytes as given.
//
// Analytical models split `layers` evenly over the stages, the first layers % stages stages
// taking one more. Time = FLOPs / (peak_flops * efficiency), rounded to the nearest ns.
//   transformer (Narayanan et al., SC'21, Appendix; Korthikanti et al., 2022), with b =
//   microbatch_size, s = seq, h = hidden, a = heads, V = vocab, d = dtype bytes:
//     forward FLOPs per layer 24·b·s·h²·(1 + s/(6h)) = 24bsh² + 4bs²h; the last stage adds the
//       LM head 2·b·s·h·V. backward_input = backward_weight = forward (each half of the 2×
//       backward); with recompute backward_input also repeats the layers' forward.
//     parameters 12h² + 13h per layer, plus the (V + s)·h token and position embeddings on the
//       first stage and the V·h LM head with the final LayerNorm's 2h on the last (untied: the
//       last rank keeps its own, as Megatron-LM's pipeline and stagecraft's executor do).
//       weight_bytes = grad_bytes = params·d.
//     optimizer_bytes per parameter: adam 8 (m, v in fp32), sgd 4 if momentum > 0, plus 4 for
//       an fp32 master copy when d = 2 (so adam bf16 = 12, adam fp32 = 8, sgd fp32 = 4). The
//       optimizer is training.optimizer, else adam.
//     activation_bytes per layer s·b·h·(34 + 5·a·s/h)·d/2 (Korthikanti Eq. 2, no tensor
//       parallelism; the 34 and 5as/h terms are for 16-bit tensors, scaled by d/2 for fp32);
//       with recompute only the layer input s·b·h·d, and one layer's activations rebuilt at a
//       time during the backward (recompute_bytes); the last stage adds the logits' gradient
//       s·b·V·d, kept from F to its backward. Other embedding and LM-head activations are not
//       counted.
//     w_stash_bytes per layer: the inputs of the four linear layers (QKV h, attention output h,
//       MLP up h, MLP down 4h) = 7·s·b·h·d.
//     send_bytes = s·b·h·d.
//   mlp (per layer Linear(h, h) + bias -> GELU, fp32; b = microbatch_size): forward =
//     backward_input = backward_weight = 2·b·h² FLOPs per layer (bias and GELU ignored);
//     params h² + h per layer, 4 bytes each for weights and grads; optimizer as above with
//     training.optimizer, else sgd with training.momentum; activation_bytes 2·b·h·4 per layer
//     (input and pre-activation), with recompute b·h·4 per stage (its input) and the layers'
//     2·b·h·4 each rebuilt during the backward (recompute_bytes); the last stage adds b·h·4 for the
//     loss gradient it keeps from F to its backward; w_stash_bytes 2·b·h·4 per layer (the
//     layer's input and dz, what W reads);
//     send_bytes b·h·4.
//
// Times and sizes are computed in double and checked into int64: an op over kMaxOpNs (1 h; a full
// backward counts backward_input + backward_weight) or a size over kMaxValueBytes (1 PiB) throws
// InputError naming the stage and the keys it came from (limits.h).
//
// Throws stagecraft::InputError when the model has fewer layers than stages, or a profile is
// malformed or does not match the scenario (file:line:col).
CostTable BuildCosts(const Scenario& scenario, int stages);

// The costs `schedule` runs with: BuildCosts for its stages, with a calibrated model.profile
// (below) in the schedule's update regime.
CostTable BuildCosts(const Scenario& scenario, const schedules::Schedule& schedule);

// True when `schedule` updates some stage more than once per step (PipeDream's per-microbatch
// updates): the regime RankScale::per_microbatch describes.
bool UpdatesEveryMicrobatch(const schedules::Schedule& schedule);

// The costs of a profile held in memory (model.profile is not read): the per-layer sums of
// `profile` for `stages` stages under `placement`, plus its calibration as described above;
// with `calibrated` false the layers alone (plus the input copy and the loss), as the
// calibration itself compares against.
CostTable CostsFromProfile(const Scenario& scenario, const Profile& profile, const schedules::Shape& shape,
                           bool per_microbatch_updates, bool calibrated);

// A profile measured by `stagecraft profile` (model.profile; the types are in profile.h). YAML
// format:
//
//   device: cpu-core            # informational: where it was measured
//   microbatch_size: 32         # must equal pipeline.microbatch_size
//   send_bytes: 32KiB           # activation sent between stages per microbatch
//   layers:                     # one entry per layer, in model order
//     - {forward: 1.2ms, backward_input: 1.1ms, backward_weight: 1.0ms,
//        activation_bytes: 64KiB, weight_bytes: 256KiB}
//       # optional per layer: step (optimizer update time, default 0), w_stash_bytes
//       #   (default 0), grad_bytes (default weight_bytes), optimizer_bytes (default 0)
//
//   # optional, measured by `stagecraft profile` beyond the layers (the calibration):
//   input_copy: 9us             # first stage, per F: copying its input microbatch
//   loss: 12us                  # last stage, per F: the loss and its gradient
//   op_overhead: 4us            # runtime work per op of a rank's list
//   op_time_cv: 0.06            # how much an op's time varies from run to run (its CV)
//   p2p: {latency: 3us, bandwidth: 5.5GB/s, overlap: 0.3,   # ping-pong fit (P2pProfile)
//         in_pipeline_bandwidth: 2.9GB/s}                   # optional: as the pipeline saw it
//   ranks:                      # per rank of the calibration runs: in-pipeline / isolated time
//     - layers: 4               # the layers it held (the split of the calibration runs)
//       op_overhead: 5us        # optional: its own runtime work per op (else op_overhead)
//       per_step: {forward: 1.02, backward: 1.04, backward_input: 1.0, backward_weight: 1.03, step: 1.1}
//       per_microbatch: {forward: 1.05, backward: 1.15, step: 1.2}   # keys default to per_step's
//
// A stage costs the sum over its layers (the same even split as above), with the transformer's
// `embedding` on the first stage and `head` on the last, plus input_copy in the first stage's
// forward and loss in the last's; the last stage's activation_bytes also count the loss
// gradient it keeps from F to its backward (the size of its output: send_bytes, or the logits,
// send_bytes / hidden · vocab), and its F holds that output beside it. workspace_bytes is the
// largest of its layers' (one layer runs at a time). With `ranks` (one entry per pipeline rank),
// each layer's op times are scaled by the scales of the rank that held the layer in the
// calibration runs (their `layers`; without them the scenario's split over pipeline.ranks
// stages), in the schedule's update
// regime (BuildCosts with a schedule): F by `forward`, a fused B by `backward`, I and W by
// theirs, STEP and its version copy by `step`; input_copy and loss as the first and last
// layer's forward. When the scenario
// also describes the network (mlp / transformer), the layer counts must match. With
// pipeline.recompute, backward_input also repeats the forward, a stage keeps only its input from
// F to its backward (send_bytes; the tokens, the embedding's activation_bytes, on the
// transformer's first stage), and its layers' activation_bytes are rebuilt and held while the
// backward runs (recompute_bytes), as the executor checkpoints per stage.
//
// Reads a profile; errors are InputError "path:line:col: ...".
Profile LoadProfile(const std::string& path);
// The same from the file's text, `source` naming it in errors.
Profile ProfileFromYaml(std::string_view text, const std::string& source);
// The profile as YAML text in the format above (exact integers: durations in ns, sizes in B).
std::string ProfileToYaml(const Profile& profile);

}  // namespace stagecraft::sim
