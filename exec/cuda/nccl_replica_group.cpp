// The cuda backend's replica group (replica_group.h): ncclAllReduce of a stage's gradients on a
// stream of its own, ordered after the compute stream's work queued so far (which made them);
// the STEP that reads the sum orders the compute stream after the all-reduce's event
// (nccl_collectives.h). The communicator is non-blocking, with few CTAs (nccl_comms.h), and one
// of the process's NCCL communicators: an error or the deadline anywhere aborts them all. Every
// CUDA and NCCL call is checked.
#include <cuda_runtime.h>
#include <nccl.h>

#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "nccl_collectives.h"
#include "nccl_comms.h"
#include "nccl_element_type.h"
#include "stagecraft/exec/device.h"
#include "stagecraft/exec/replica_group.h"

namespace stagecraft::exec {
namespace {

class NcclReplicaGroup final : public ReplicaGroup {
 public:
  // Replica 0 makes the id and the others get its bytes over the replicas' host transport; the
  // communicator is made without blocking and waited for under the deadline.
  NcclReplicaGroup(std::unique_ptr<ReplicaGroup> mpi, Device& device, std::chrono::nanoseconds deadline)
      : mpi_(std::move(mpi)),
        device_(device),
        nccl_(mpi_->host(), mpi_->size(), mpi_->replica(), device, deadline, "the replicas' NCCL communicator",
              {"all-reduce", "replicas", "replica"}) {}
  NcclReplicaGroup(const NcclReplicaGroup&) = delete;
  NcclReplicaGroup& operator=(const NcclReplicaGroup&) = delete;

  int replica() const override { return mpi_->replica(); }
  int size() const override { return mpi_->size(); }
  std::string Name() const override { return "nccl"; }
  Transport& host() override { return mpi_->host(); }
  // The all-reduce's end on its own stream, read on the compute stamps' origin.
  int64_t CompletedNs() const override { return nccl_.completed_ns(); }

  using ReplicaGroup::PostSum;
  Request PostSum(void* data, int64_t count, ElementType type) override {
    const ncclDataType_t datatype = NcclDataTypeOf(type);
    if (count < 0) throw std::invalid_argument("nccl replica group: a sum of " + std::to_string(count) + " elements");
    nccl_.After();  // the backwards that made the gradients
    const auto comm = nccl_.comm();
    const cudaStream_t stream = nccl_.stream();
    SC_NCCL_ENQUEUE(nccl_.id(), ncclAllReduce(data, data, static_cast<size_t>(count), datatype, ncclSum, comm, stream),
                    nccl_.deadline_ns());
    return nccl_.Enqueued(count, type);
  }

  // Once a sum completed, the STEP that reads it is ordered after it.
  bool Test(Request request) override { return nccl_.Test(request); }
  void Wait(Request request) override { nccl_.Wait(request, size()); }

  // NCCL connects the algorithm it picks for a size at its first all-reduce of that size
  // (NCCL_RUNTIME_CONNECT, the default since 2.22), and would hold the host there inside the run.
  // One all-reduce of zeros at each size not summed yet, in the same order on every replica,
  // makes those connections now, each waited for under the deadline.
  void Prepare(const std::vector<int64_t>& sum_floats) override {
    for (const int64_t floats : sum_floats) {
      if (floats <= 0 || !connected_.insert(floats).second) continue;
      Buffer zeros(device_, floats);
      device_.memory().Fill(zeros.data(), 0.0f, floats);
      Wait(PostSum(zeros.data(), floats));
    }
  }

 private:
  std::unique_ptr<ReplicaGroup> mpi_;  // the host side, and the bootstrap
  Device& device_;
  NcclCollectives nccl_;
  std::set<int64_t> connected_;  // the sizes (floats) summed already
};

}  // namespace

std::unique_ptr<ReplicaGroup> MakeNcclReplicaGroup(std::unique_ptr<ReplicaGroup> mpi, Device& device,
                                                   std::chrono::nanoseconds deadline) {
  return std::make_unique<NcclReplicaGroup>(std::move(mpi), device, deadline);
}

}  // namespace stagecraft::exec
