// The schedule IR (DESIGN.md §2): a pipeline shape, a weight policy and, per rank, the
// ordered list of ops that rank executes. Generators, lowering, validation, the simulator,
// the executor and the trace format all read these same facts.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <memory>
#include <vector>

#include "stagecraft/schedules/op_kinds.h"

namespace stagecraft::schedules {

// Stage -> rank placement. kLoop: stage s on rank s % ranks (Megatron interleaving).
// kV: chunk c runs down the ranks when c is even and back up when odd (ZB-V, DualPipe-V).
enum class Placement : uint8_t { kLoop, kV };

// How weights evolve; the rules are spelled out in weights.h.
enum class WeightPolicy : uint8_t {
  kFlush,  // GPipe, 1F1B, interleaved, ZB: step t reads version t, one STEP per stage per step
  kStash,  // PipeDream: a STEP after every backward, B reads the version its F read
  kTwoBW,  // PipeDream-2BW: step t reads version max(t-1, 0), one STEP per stage per step
  kNoStash,  // PipeMare: a STEP after every backward, every op reads the stage's newest version
};
std::string_view PolicyName(WeightPolicy policy);
bool ParsePolicy(std::string_view text, WeightPolicy* policy);
// The policies' names as an error lists them: "flush, stash, 2bw or nostash".
std::string PolicyChoices();

struct Op {
  OpKind kind = OpKind::kF;
  int32_t stage = 0;       // the stage doing the op (for SEND/RECV: the local stage)
  int32_t microbatch = 0;  // index within its step, 0..microbatches-1
  int32_t step = 0;        // optimizer step the microbatch belongs to
  int32_t version = 0;     // weight version read (F/B/I/W) or produced (STEP); 0 for comms
  int32_t peer = -1;       // SEND: destination rank; RECV: source rank; -1 otherwise
  // True on the second op of an overlapped pair (DualPipe's F&B, PyTorch's OVERLAP_F_B): the op
  // just before it on this rank is an F, this one is a B or an I of another unit that does not
  // depend on that F, and a runtime may run the two fused (one's compute hiding the other's
  // communication). Lowering keeps the two adjacent; CSV export writes them as one
  // "(F;B)OVERLAP_F_B" cell. Run apart, in order, they mean the same.
  bool overlapped = false;
  Tensor tensor = Tensor::kNone;  // OFFLOAD / RELOAD: what moves (op_kinds.h); kNone for every other op

  friend bool operator==(const Op&, const Op&) = default;
};

struct Shape {
  int ranks = 1;
  int chunks = 1;  // virtual stages per rank
  Placement placement = Placement::kLoop;

  int stages() const { return ranks * chunks; }
  int RankOf(int stage) const;
  int ChunkOf(int stage) const { return stage / ranks; }
  int StageOf(int rank, int chunk) const;  // inverse of (RankOf, ChunkOf)
  friend bool operator==(const Shape&, const Shape&) = default;
};

struct Schedule {
  std::string name;  // generator name, e.g. "1f1b"
  Shape shape;
  int microbatches = 1;  // per step
  int steps = 1;
  WeightPolicy weights = WeightPolicy::kFlush;
  bool recompute = false;      // B recomputes the stage's forward instead of stashing activations
  bool vertical_sync = false;  // PipeDream: every stage uses the version stage 0 used
  bool lowered = false;        // SEND/RECV present for every cross-rank dependency (Lower ran)
  // Replicas of the pipeline (DESIGN.md §9): with more than one, Lower puts a REDUCE_GRAD
  // before every STEP (see lower.h). The replicas run the same op lists.
  int data_parallel = 1;
  std::vector<std::vector<Op>> ops;  // ops[rank] in execution order

  int ranks() const { return shape.ranks; }
  int stages() const { return shape.stages(); }
  size_t OpCount() const;
  friend bool operator==(const Schedule&, const Schedule&) = default;
};

// PyTorch torch.distributed.pipelining action string: "<stage><KIND><microbatch>",
// e.g. "0F0", "2I1", "1SEND_F0"; STEP ops print as "<stage>STEP<version>" and REDUCE_GRAD
// ops as "<stage>REDUCE_GRAD<version>" (the version its STEP produces). The microbatch
// printed is the global index step * microbatches + microbatch. A copy, which PyTorch's actions
// have no form for, prints its tensor's code after its kind: "0OFFLOAD_ACT3" (activations, by
// global microbatch), "0RELOAD_WEIGHT2" and "0OFFLOAD_OPT2" (by version).
std::string ActionString(const Op& op, int microbatches_per_step);

// Where the schedule's first copy (OFFLOAD, RELOAD) is, as "rank R #I (ACTION)"; "" when it has
// none.
std::string FirstCopy(const Schedule& schedule);

// Generator input. Not every generator uses every field (chunks only for interleaved).
// What a cost-aware generator (zb-1p, zb-2p, zb-auto: GeneratorInfo::uses_costs) schedules with, per
// stage (one per rank): the times of F, B (the input gradient, I) and W in any one unit, the
// transfer time between neighbours, what each pass adds to memory (F +M_B, B M_W - M_B, W -M_W,
// in any one unit) and the memory limit per stage (empty: the generator's own).
struct StagePassCosts {
  std::vector<double> f, b, w;
  double comm = 0;
  std::vector<double> mem_f, mem_b, mem_w;
  std::vector<double> max_mem;
};

struct GeneratorParams {
  int ranks = 1;
  int microbatches = 1;
  int chunks = 1;
  int steps = 1;
  bool recompute = false;
  bool vertical_sync = false;
  int data_parallel = 1;  // Schedule::data_parallel
  // For the generators that schedule by costs: the scenario's (the harness fills them); null:
  // every stage alike (F, B, W 1 each, no transfer time; memory F +1, B -1/2, W -1/2).
  std::shared_ptr<const StagePassCosts> costs;
  // zb-1p / zb-2p / zb-auto: the refinement's node limit (ZbAutoCosts::refine_nodes).
  int64_t zb_refine_nodes = 0;
};

}  // namespace stagecraft::schedules
