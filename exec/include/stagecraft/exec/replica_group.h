// Data parallelism in the executor (DESIGN.md §9): the job's P × D processes as D replicas of a
// P-rank pipeline, and the all-reduce group over one pipeline rank's D replicas (split from the
// world: mpi_group.h) whose sum a REDUCE_GRAD op posts and its STEP waits for (an in-place sum
// of a stage's gradients; typed, fp32 for a run's gradients).
//   cpu:  MPI_Iallreduce(MPI_IN_PLACE, MPI_SUM) on the group's communicator, completed by
//         polling MPI_Test (which also drives MPI's progress) under the deadline;
//   cuda: ncclAllReduce (ncclSum) on a stream of its own, ordered after the compute
//         stream's work queued so far, completed by polling its event (nccl_replica_group.cpp);
//         one all-reduce of each size the run sums made before its clock starts (Prepare).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "stagecraft/exec/device.h"
#include "stagecraft/exec/element_type.h"
#include "stagecraft/exec/mpi_group.h"
#include "stagecraft/exec/transport.h"

namespace stagecraft::exec {

// World rank w of a job of P × D processes runs pipeline rank w % P of replica w / P: replicas
// outermost, so world ranks 0 .. P−1 are replica 0's whole pipeline (whose ranks keep the
// numbers the IR gives them, and whose record the run reports). The simulator's placement
// (pipeline.placement) decides which devices it models; the executor's processes go where
// mpirun puts them (docs/executor.md "Data parallelism").
struct WorldLayout {
  int pipeline_ranks = 1;  // P
  int replicas = 1;        // D
  int world() const { return pipeline_ranks * replicas; }
  int ReplicaOf(int world_rank) const { return world_rank / pipeline_ranks; }
  int PipelineRankOf(int world_rank) const { return world_rank % pipeline_ranks; }
};

// The keys that split the world into groups (MpiGroup::Split), for world rank `world_rank`:
// its replica's pipeline (colour = replica, key = pipeline rank) and its pipeline rank's
// replicas (colour = pipeline rank, key = replica). A process beyond layout.world() (a test
// running on part of its job) joins the other idle processes' pipeline and a replica group of
// its own.
GroupKey PipelineKey(const WorldLayout& layout, int world_rank);
GroupKey ReplicaKey(const WorldLayout& layout, int world_rank);

// Replica r's rows of one microbatch built for D·b rows: rows [r·b, (r+1)·b) of a row-major
// [D·b × row_floats] tensor (MLP rows, transformer sequences), copied into `out` ([b × row_floats]).
// D replicas of microbatch size b so train exactly as one pipeline of microbatch size D·b.
void ReplicaSlice(const float* whole, int replicas, int replica, int64_t slice_floats, float* out);

class ReplicaGroup {
 public:
  using Request = int;  // valid until Test returns true or Wait returns

  virtual ~ReplicaGroup() = default;
  virtual int replica() const = 0;  // r, this process's index among the group
  virtual int size() const = 0;     // D
  virtual std::string Name() const = 0;

  // Posts the sum over the replicas of `count` elements of `type` at `data` (device memory of
  // the paired Device), in place: each replica's buffer ends as the sum. `data` stays untouched
  // until completion. Every replica posts the same sums in the same order. MPI refuses bf16 and
  // f16 sums (std::invalid_argument: mpi_element_type.h); NCCL adds every type.
  virtual Request PostSum(void* data, int64_t count, ElementType type) = 0;
  // fp32, a run's gradients.
  Request PostSum(float* data, int64_t count) { return PostSum(data, count, ElementType::kF32); }
  virtual bool Test(Request request) = 0;  // true once complete; the handle is then released
  // Throws TimeoutError naming the collective when it is not complete within the deadline.
  virtual void Wait(Request request) = 0;
  // Right after Test returned true or Wait returned: when that sum completed where it ran, on
  // the host's steady clock (Transport::CompletedNs); -1 where the caller's own stamp stands.
  virtual int64_t CompletedNs() const { return -1; }
  // Before a run's clock starts; collective over the group, every replica passing the same
  // sizes (SumSizes in grad_reducer.h: the floats of each sum the run posts). Makes ready what
  // sums of those sizes need, so that none of the run's waits for a connection: nccl runs one
  // all-reduce of each size, which connects the algorithm NCCL picks for it (NCCL connects each
  // at its first use), under the deadline. Nothing for a group that connects nothing ahead (mpi).
  virtual void Prepare(const std::vector<int64_t>& /*sum_floats*/) {}

  // The replicas' host side: an MPI transport over them (rank() = replica, size() = D) for the
  // set-up barrier and the losses' mean.
  virtual Transport& host() = 0;
};

// The mean over the replicas of each value (every replica has as many), as replica 0 returns it;
// the other replicas get theirs back. Collective over `replicas` (ReplicaGroup::host), under its
// deadline.
std::vector<double> MeanOverReplicas(Transport& replicas, const std::vector<double>& values);

// Requires a live MpiSession; collective over `replicas` (a group split from the world by
// ReplicaKey), whose dup it sums over; its host side is a transport over `replicas` itself. Its buffers must be host memory
// (the cpu device's).
std::unique_ptr<ReplicaGroup> MakeMpiReplicaGroup(const MpiGroup& replicas, std::chrono::nanoseconds deadline);
// The same over this process's part of MpiGroup::World().Split(ReplicaKey(layout, world rank));
// collective over the job (of at least layout.world() processes).
std::unique_ptr<ReplicaGroup> MakeMpiReplicaGroup(const WorldLayout& layout, std::chrono::nanoseconds deadline);

// The cuda backend's group over `mpi`'s replicas (which keeps the host side): one NCCL
// communicator, replica 0's id broadcast over `mpi`'s host transport, made non-blocking (few
// CTAs, as the transport's: nccl_comms.h) and waited for under `deadline`; one of the process's
// NCCL communicators, all aborted together on a failure of any. `device` (MakeCudaDevice) must
// outlive it. Collective over the group. Throws std::runtime_error when this build has no NCCL
// or the communicator cannot be made, TimeoutError when a replica does not come in time.
std::unique_ptr<ReplicaGroup> MakeNcclReplicaGroup(std::unique_ptr<ReplicaGroup> mpi, Device& device,
                                                   std::chrono::nanoseconds deadline);

}  // namespace stagecraft::exec
