// Lowering: insert SEND/RECV ops for every data dependency that crosses ranks.
//
// Ordering rule (the same as torch.distributed.pipelining's lowering): ranks are walked in
// lock step, one compute op per rank per round; when a producer is placed, its SEND is
// placed right after it and the matching RECV is appended to the consumer rank's list at
// that moment. A rank's compute op is placed only once its RECVs are in its list. Hence
// RECVs are posted early, every rank posts the receives of one channel (src -> dst) in the
// same order the sender posts the sends (FIFO matching works, as NCCL needs), and SEND/RECV
// only post: a compute op waits for the RECV of its input, nothing else blocks.
#pragma once

#include <atomic>
#include <cstdint>
#include <string_view>

#include "stagecraft/base/error.h"

#include "stagecraft/schedules/ir.h"

namespace stagecraft::schedules {

// How receives are posted (scenario key pipeline.p2p).
//   kLockstep: torch.distributed.pipelining's rule above; a RECV is posted only when the
//              lock-step walk places its producer, so data moves when the receiver gets there.
//   kAhead:    the same SENDs and the same order of RECVs on each rank (every channel stays
//              FIFO), but each RECV is hoisted to the earliest point where a receive buffer is
//              free: at most kAheadBuffersPerStage receives are posted and not yet consumed per
//              local stage. A transfer then starts as soon as its sender is ready (Megatron-LM
//              and the Zero Bubble runtime post receives ahead the same way).
enum class P2p : uint8_t { kLockstep, kAhead };
inline constexpr int kAheadBuffersPerStage = 2;  // default: one activation and one gradient in flight
std::string_view P2pName(P2p p2p);
bool ParseP2p(std::string_view text, P2p* p2p);

// Data parallelism (Schedule::data_parallel > 1): lowering also puts one REDUCE_GRAD per STEP
// on the STEP's rank, right after the last backward of the update that STEP applies (its
// stage's gradients are then complete), and moves the STEP to just before the next compute op
// of its stage (or to the end of the list). The all-reduce thus runs while the rank computes
// its other stages' backwards (interleaved, V-shaped schedules) or waits on its neighbours, as
// DDP and Megatron-LM overlap it; the STEP waits for it. With one replica no REDUCE_GRAD is
// placed (and any present is dropped).
//
// Returns the lowered schedule. Throws InputError if the compute order cannot be lowered
// (a rank waits on a producer that never comes: the compute-level deadlock Validate reports).
// `ahead_buffers`: kAhead's receives posted and not yet consumed per local stage. `stop`, when
// set by another thread, ends the walk early: it throws StopRequested (base/stop.h).
Schedule Lower(const Schedule& schedule, P2p p2p = P2p::kLockstep, int ahead_buffers = kAheadBuffersPerStage,
               const std::atomic<bool>* stop = nullptr);

// Places the REDUCE_GRADs as Lower does (above) in a schedule, lowered or not, every other op
// keeping its order: for a file that carries its own transfers, run with replicas.
Schedule PlaceReduceGrads(const Schedule& schedule);

// Drops SEND/RECV ops (compute_only form).
Schedule StripComms(const Schedule& schedule);

}  // namespace stagecraft::schedules
