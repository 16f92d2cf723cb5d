// The runtime (DESIGN.md §5): one rank walks its op list of a lowered schedule in order on a
// Device and a Transport. F, B, I, W run the stage's math; SEND/RECV post non-blocking
// transfers exactly where the IR puts them; STEP applies the optimizer and produces the
// version the IR names. Weight versions are kept as the IR says (one for flush schedules, the
// stash for PipeDream, two for 2BW) and freed after their last reader on this rank.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "stagecraft/base/error.h"
#include "stagecraft/exec/device.h"
#include "stagecraft/exec/gpt.h"
#include "stagecraft/exec/model.h"
#include "stagecraft/exec/replica_group.h"
#include "stagecraft/exec/stage.h"
#include "stagecraft/exec/step_graphs.h"
#include "stagecraft/exec/transport.h"
#include "stagecraft/schedules/ir.h"
#include "stagecraft/schedules/run_record.h"
#include "stagecraft/scenario/scenario.h"

namespace stagecraft::exec {

struct TrainingConfig {
  MlpModel model;                // the MLP, unless `gpt` is set
  std::optional<GptModel> gpt;   // the transformer (model.transformer)
  int microbatch_size = 1;
  std::string optimizer = "sgd";  // "sgd" (with momentum) | "adam"
  float lr = 0.01f;
  float momentum = 0.9f;
  // pipeline.offload.optimizer: host (ZeRO-Offload): each stage's optimizer state, its weights'
  // master copy and a gradient buffer in the host tier; a STEP takes the gradients down, updates
  // there with the host's kernel and sends the weights back (optimizer.h).
  bool optimizer_on_host = false;
  // Static loss scaling: the loss gradient is multiplied by it and the update divides it back
  // out, so gradients too small for fp16 GEMM inputs keep their bits. A power of two (exact in
  // binary floating point: an fp32 run trains bit for bit as with 1). training.loss_scale, or
  // 4096 when training.dtype is fp16 and 1 otherwise.
  float loss_scale = 1.0f;
  // Layers per stage, one count per stage of the schedule being run. The split is decided once,
  // when a scenario is planned (sim::StageLayers, shared with the simulator's costs), and the
  // executor builds exactly what it is given.
  std::vector<int> layers_per_stage;
  // D, data-parallel replicas (pipeline.data_parallel): each trains `microbatch_size` (b) of the
  // D·b samples of every microbatch (MakeDataset slices them), their gradients summed.
  int data_parallel = 1;
  // training.lr_schedule (warm-up and decay) and training.pipemare (for a schedule of the no-stash
  // weight policy: per-stage learning-rate rescheduling, discrepancy correction): the rate of each
  // update is LearningRate's (learning_rate.h), the correction the weight store's.
  sim::LrScheduleSpec lr_schedule;
  std::optional<sim::PipeMareSpec> pipemare;
};

// `config` with the whole microbatch of every replica together (microbatch size D·b, one
// replica): what the data is built for, and what the replicas train exactly as.
TrainingConfig WholeBatch(const TrainingConfig& config);

// The executor's configuration from a scenario: model.mlp or model.transformer,
// pipeline.microbatch_size and the training block. Throws InputError (naming the scenario)
// when the scenario has neither network (a costs-only scenario can be simulated, not executed)
// or no training block; which dtypes train depends on the backend (backend.h CheckDtype).
TrainingConfig TrainingConfigFor(const sim::Scenario& scenario);

// What one microbatch is, per network: the first stage's input (MLP: rows·h values;
// transformer: B·T token ids as floats), what crosses a stage boundary (MLP: rows·h;
// transformer: B·T·C), and how the last stage scores its output.
int NetworkLayers(const TrainingConfig& config);  // MLP layers or transformer blocks
int64_t InputFloats(const TrainingConfig& config);
int64_t BoundaryFloats(const TrainingConfig& config);
struct LossShape {
  kernels::LossKind kind = kernels::LossKind::kMse;
  int rows = 0;  // MLP: microbatch rows; transformer: B·T positions
  int cols = 0;  // MLP: h; transformer: vocab
  int64_t target_floats = 0;
};
LossShape LossShapeFor(const TrainingConfig& config);

// The microbatches a rank feeds (stage 0) or scores (last stage), in device memory; built
// before the timed run starts. A run of more microbatches than the dataset holds cycles
// through it, as a data loader cycles through a finite dataset: the dataset's memory and the
// time to build it do not grow with the steps.
struct Dataset {
  Buffer inputs;   // [microbatches x InputFloats], empty unless requested
  Buffer targets;  // [microbatches x target_floats], empty unless requested
  int64_t microbatches = 0;
  // The dataset's microbatch that the run's microbatch `g` (step x microbatches + index) reads.
  int64_t MicrobatchOf(int64_t g) const { return g % microbatches; }
};

// A dataset holds at most this many microbatches, and at most kMaxDatasetBytes of inputs and
// targets (at least one microbatch).
inline constexpr int64_t kMaxDatasetMicrobatches = 64;
inline constexpr int64_t kMaxDatasetBytes = int64_t{256} << 20;

// How many distinct microbatches a run of `total` microbatches trains on: all of them when
// they fit in the bounds above, else as many as fit (counted for microbatches of D·b samples,
// so that every replica and a single pipeline of D·b cycle alike).
int64_t DatasetMicrobatches(const TrainingConfig& config, int64_t total);

// The MLP's targets of microbatches [first, first + count) (model.h's teacher), computed on
// `device` one GEMM per microbatch, into host memory `targets`; `after_each`, when given, is
// called after each microbatch. MicrobatchTargets is this on a cpu device.
void TeacherTargets(Device& device, const MlpModel& model, int rows, int64_t first, int64_t count, float* targets,
                    const std::function<void()>& after_each = {});

// Builds the dataset of a run of `total` microbatches (DatasetMicrobatches of them); `beat`,
// when given, is called between microbatches (SetupRounds::Beat: the set-up shows progress).
// With D = config.data_parallel replicas each microbatch is built for D·b samples and replica
// `replica` keeps samples [r·b, (r+1)·b) of it (MLP rows, transformer sequences; ReplicaSlice).
Dataset MakeDataset(Device& device, const TrainingConfig& config, int64_t total, bool with_inputs, bool with_targets,
                    const std::function<void()>& beat = {}, int replica = 0);

// Called on the rank of the last stage when a step is over there: after that stage's last
// optimizer STEP of the step (so every loss of the step is in and consecutive reports are one
// step apart, whatever the schedule).
struct StepProgress {
  int step = 0;
  int steps = 0;
  double loss = 0;    // mean over the step's microbatches
  int64_t end_ns = 0; // since the run's start
};

struct RunHooks {
  using StepFn = std::function<void(const StepProgress&)>;
  StepFn on_step;
  // Testing failure handling (`execute --inject-fault RANK:STEP[:KIND]`): at its first compute
  // op of fault_step, rank fault_rank throws (kThrow), stops answering for good (kHang: its
  // peers' waits run into the deadline), turns one weight of that stage into NaN (kNan: the
  // loss diverges downstream), or asks its device for more memory than any has (kOom: a real
  // allocation failure, reported with the op).
  enum class Fault { kThrow, kHang, kNan, kOom };
  int fault_rank = -1;
  int fault_step = -1;
  Fault fault = Fault::kThrow;
  // Keep each local stage's final weights in RankRun::final_params (the reference tests compare
  // them); a run that only measures leaves them on the device.
  bool keep_final_params = false;
  // Capture a step of the rank's compute once and replay it every later step
  // (`execute --graphs on`), where the device has graphs and the schedule allows it
  // (step_graphs.h says when; elsewhere every call is issued as it comes).
  bool step_graphs = false;
};

// What one rank measured: its part of the run record (times are ns since its op clock started,
// which every rank does as the set-up rounds end) and, when RunHooks::keep_final_params asks,
// the newest weights of each local stage (by chunk), which tests compare with a reference.
// A rank leaves the set-up rounds when the system lets it: on a loaded machine one rank may
// start its clock milliseconds after another. So each rank also says when its clock started on
// the device's monotonic clock and which machine's clock that is (ClockId); harness's
// JoinRankRuns puts the ranks that share one clock on a common origin.
struct RankRun {
  schedules::RankRecord record;
  std::vector<std::vector<float>> final_params;
  int64_t clock_origin_ns = -1;  // DeviceClock::NowNs() when the op clock started; -1: unknown
  std::string clock_id;          // ClockId() of the rank's machine; empty: unknown
  // The host's time from the clock's start to the last op's read-back, and the part of it spent
  // waiting for the device (each read-back of stamps and losses): what the host spends on the
  // run's work is their difference (cuda_bench's BM_StepGraphs). This process's only; not
  // gathered across ranks.
  int64_t host_loop_ns = 0;
  int64_t host_wait_ns = 0;
};

// The running kernel's boot id (/proc/sys/kernel/random/boot_id): processes that report the
// same one read the same monotonic clock, which DeviceClock::NowNs() is. Empty when unreadable.
std::string ClockId();

// Runs `schedule` (lowered and valid) on this rank. Every rank of the transport takes part in
// its set-up: the stages are built, then SetupRounds (setup_rounds.h) end the set-up on every
// rank together, the transport prepares the run's routes (Transport::Prepare: nccl connects
// them) and the replicas their sums' sizes, and the clocks start (a rank of the job that runs no
// stage of `schedule` calls SetupRounds(transport).Finish() in its place; Prepare being
// collective, its transport must be one that prepares nothing). Throws std::runtime_error on a
// non-finite loss or an injected fault, and TimeoutError naming the op (e.g. "1RECV_F3 (step 2)
// from rank 0") when a wait runs past the transport's deadline, or naming the step's work ("the
// device's work up to 0B3 (step 1)") when the device does not get there in time, the stamps'
// read-back polling it under the same deadline; the caller aborts the job. The walker
// (runtime.cpp) calls one unit per concern: weight_store.h, mailbox.h, op_clock.h,
// step_reporter.h, memory_sampler.h and fault_injector.h.
//
// Data parallelism (schedule.data_parallel = D > 1): `transport` spans this replica's pipeline
// and `replicas` (of size D) this pipeline rank's replicas; `data` holds this replica's slice of
// each microbatch (MakeDataset). REDUCE_GRAD sums a stage's gradients over the replicas and the
// STEP divides by D, so the D replicas train as one pipeline of microbatch size D·b. The set-up
// ends on every replica together; the record's losses are the mean over the replicas (on
// replica 0; on_step reports this replica's own).
RankRun RunRank(const schedules::Schedule& schedule, const TrainingConfig& config, const Dataset& data,
                Device& device, Transport& transport, const RunHooks& hooks = {}, ReplicaGroup* replicas = nullptr);

// What RunRank plans its step graphs by (step_graphs.h) with these parts: for a caller that
// says beforehand what the run will do (`execute --graphs on` on rank 0).
StepGraphConditions StepGraphConditionsOf(const TrainingConfig& config, Device& device, const Transport& transport,
                                          const RunHooks& hooks, const ReplicaGroup* replicas);

// Rank runs are gathered to rank 0 as bytes.
std::string SerializeRankRun(const RankRun& run);
RankRun ParseRankRun(const std::string& bytes);

// The shape of `layers` MLP layers from `first_layer` of config's model (what every MLP stage
// and the profiler build).
StageShape LayersShape(const TrainingConfig& config, int first_layer, int layers);

// `layers` layers from `first_layer` of config's network: an MlpStage, or a GptStage with the
// embeddings when `first_stage` and the head when `last_stage` (the MLP has neither).
std::unique_ptr<StageModel> MakeStage(Device& device, const TrainingConfig& config, int first_layer, int layers,
                                      bool first_stage, bool last_stage);
// The first layer of stage `stage` under config.layers_per_stage.
int FirstLayerOf(const TrainingConfig& config, int stage);
// Stage `stage` of `schedule` with the layers config.layers_per_stage gives it.
std::unique_ptr<StageModel> MakeStage(Device& device, const schedules::Schedule& schedule,
                                      const TrainingConfig& config, int stage);

}  // namespace stagecraft::exec
