// The table of cost models (DESIGN.md §9): each cost source is one file that fills a cost table
// (cost_table.h) from a scenario, registered as one row here. The first row that applies to a
// scenario builds its costs, so precedence is the table's order; the engine sees only the table.
//
//   row          applies when       file                  what a stage costs
//   profile      model.profile      profile_costs.cpp     its layers' measured sums, calibrated
//   explicit     model.costs        explicit_costs.cpp    its rank's share of the stated per-rank costs
//   roofline     model.transformer  roofline_costs.cpp    its kernels' roofline times (roofline.h) on a
//                on a device with   (gpt_kernels.h)       device with memory_bandwidth and a gemm
//                a GEMM model                             model; the transformer row's sizes
//   transformer  model.transformer  transformer_costs.cpp FLOPs / (peak x efficiency), Megatron's bytes
//   mlp          model.mlp          mlp_costs.cpp         FLOPs / (peak x efficiency), fp32 bytes
//
// So a profile or explicit costs replace the analytical models of the network the executor
// builds (`--set model.profile=P.yaml` predicts an mlp run from measured costs). Adding a cost
// model is one file and one row; no other model and no engine file changes.
#pragma once

#include <string_view>
#include <vector>

#include "stagecraft/schedules/ir.h"
#include "stagecraft/sim/cost_table.h"
#include "stagecraft/sim/layer_split.h"
#include "stagecraft/scenario/scenario.h"

namespace stagecraft::sim {

// What a cost table is built for.
struct CostQuery {
  schedules::Shape shape;               // the stages and the ranks they sit on
  bool per_microbatch_updates = false;  // the schedule updates weights after every microbatch (PipeDream)
  bool calibrated = true;               // with a profile's calibration (scales, overheads, p2p fit)
};

struct CostModel {
  std::string_view name;  // "profile", "explicit", "roofline", "transformer", "mlp"
  std::string_view key;   // the scenario key that selects it: "model.profile"
  bool (*applies)(const Scenario&);
  // One entry per stage of query.shape. Times and sizes derived in double are checked into
  // int64: an op over kMaxOpNs (1 h; a full backward counts backward_input + backward_weight) or
  // a size over kMaxValueBytes (1 PiB) throws InputError naming the stage and the keys it came
  // from (limits.h); so do fewer layers than stages.
  CostTable (*build)(const Scenario&, const CostQuery&);
  // How the model's layers weigh (layer_split.h); null for a model without layers.
  LayerWeights (*layers)(const Scenario&);
};

// The rows in order of precedence.
const std::vector<CostModel>& CostModels();

// The first row that applies to `scenario`; throws InputError when none does.
const CostModel& CostModelFor(const Scenario& scenario);

// The costs of `scenario` for `query` (CostModelFor's build). Reads no file: a profile is read
// once, with the scenario.
CostTable BuildCosts(const Scenario& scenario, const CostQuery& query);
// For `stages` stages (a multiple of pipeline.ranks) under loop placement, weights updated once
// per step.
CostTable BuildCosts(const Scenario& scenario, int stages);
// The costs `schedule` runs with: its shape (the placement puts each rank's costs on its own
// stages) and its update regime.
CostTable BuildCosts(const Scenario& scenario, const schedules::Schedule& schedule);

// pipeline.offload.optimizer: host (ZeRO-Offload, Ren et al. 2021), applied by BuildCosts: each
// stage's STEP runs on its node's host. Its gradients go down the host link, the host's CPU
// updates the weights it keeps and the optimizer state in host memory, streaming 2 W + G + 2 O
// bytes (W the weights, G the gradients, O the optimizer state: each read, the weights and state
// written) through the host's DRAM at topology.host.memory_bandwidth, and the weights come back up
// the link; its step_ns is the three in turn, each copy alone on the link (latency + bytes /
// HostSpec::DeviceRate()). On a device that is a CPU (copy_engine: false) with no memory_bandwidth stated the
// host is the device: the update takes as long as the device's own STEP. The table is marked
// optimizer_on_host: the memory model keeps the optimizer state off the device and the host
// holds W + G + O per stage for the whole run.
void PlaceOptimizerOnHost(const Scenario& scenario, CostTable* table);
// The host's part of a stage's STEP under optimizer: host, as PlaceOptimizerOnHost prices it.
int64_t HostStepNs(const Scenario& scenario, const StageCost& stage);

// True when `schedule` updates some stage more than once per step (PipeDream's per-microbatch
// updates): the regime RankScale::per_microbatch describes.
bool UpdatesEveryMicrobatch(const schedules::Schedule& schedule);

}  // namespace stagecraft::sim
