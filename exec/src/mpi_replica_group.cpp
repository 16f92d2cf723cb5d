// The cpu backend's replica group over MPI (replica_group.h), the replica's slice of a
// microbatch, and the losses' mean over the replicas.
#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "mpi_check.h"
#include "mpi_element_type.h"
#include "mpi_group_impl.h"
#include "stagecraft/base/check.h"
#include "stagecraft/exec/handle_pool.h"
#include "stagecraft/exec/mpi_transport.h"
#include "stagecraft/exec/replica_group.h"

namespace stagecraft::exec {
namespace {

class MpiReplicaGroup final : public ReplicaGroup {
 public:
  MpiReplicaGroup(const MpiGroup& replicas, std::chrono::nanoseconds deadline)
      : deadline_ns_(deadline.count()),
        group_(replicas.Dup()),
        comm_(CommOf(group_)),
        replica_(group_.rank()),
        size_(group_.size()),
        host_(MakeMpiTransport(replicas, deadline)) {}
  MpiReplicaGroup(const MpiReplicaGroup&) = delete;
  MpiReplicaGroup& operator=(const MpiReplicaGroup&) = delete;

  int replica() const override { return replica_; }
  int size() const override { return size_; }
  std::string Name() const override { return "mpi"; }

  using ReplicaGroup::PostSum;
  Request PostSum(void* data, int64_t count, ElementType type) override {
    const MPI_Datatype datatype = MpiSumType(type);  // throws for 16-bit floats
    SC_CHECK(count >= 0 && count <= INT_MAX, fmt::format("an all-reduce of {} elements exceeds MPI's int count", count));
    const Request handle = pending_.Add({MPI_REQUEST_NULL, count, type});
    SC_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, data, static_cast<int>(count), datatype, MPI_SUM, comm_,
                                &pending_[handle].request));
    return handle;
  }
  bool Test(Request request) override { return TestPending(pending_, request, kNames); }
  void Wait(Request request) override { WaitPending(pending_, request, size_, deadline_ns_, kNames); }
  Transport& host() override { return *host_; }

 private:
  struct Pending {
    MPI_Request request = MPI_REQUEST_NULL;
    int64_t elements = 0;  // for a deadline's message
    ElementType type = ElementType::kF32;
  };
  static constexpr CollectiveNames kNames{"all-reduce", "replicas", "replica"};

  const int64_t deadline_ns_;
  const MpiGroup group_;  // a dup of the replicas' group
  const MPI_Comm comm_;   // group_'s
  const int replica_;
  const int size_;
  std::unique_ptr<Transport> host_;  // over the replicas' group itself
  HandlePool<Pending> pending_;
};

}  // namespace

void ReplicaSlice(const float* whole, int replicas, int replica, int64_t slice_floats, float* out) {
  SC_CHECK(replicas >= 1 && replica >= 0 && replica < replicas && slice_floats >= 0, "a replica of the group");
  const float* from = whole + static_cast<int64_t>(replica) * slice_floats;
  std::copy(from, from + slice_floats, out);
}

std::vector<double> MeanOverReplicas(Transport& replicas, const std::vector<double>& values) {
  std::string mine(values.size() * sizeof(double), '\0');
  if (!values.empty()) std::memcpy(mine.data(), values.data(), mine.size());  // (a rank without losses has none)
  const std::vector<std::string> all = replicas.Gather(mine, 0);
  if (replicas.rank() != 0) return values;
  std::vector<double> sum(values.size(), 0.0);
  for (const std::string& theirs : all) {
    SC_CHECK(theirs.size() == mine.size(), "every replica has as many values");
    for (size_t i = 0; i < sum.size(); ++i) {
      double v = 0;
      std::memcpy(&v, theirs.data() + i * sizeof(double), sizeof(double));
      sum[i] += v;
    }
  }
  for (double& v : sum) v /= static_cast<double>(all.size());
  return sum;
}

GroupKey PipelineKey(const WorldLayout& layout, int world_rank) {
  if (world_rank >= layout.world()) return {layout.replicas, world_rank};  // the idle processes together
  return {layout.ReplicaOf(world_rank), layout.PipelineRankOf(world_rank)};
}

GroupKey ReplicaKey(const WorldLayout& layout, int world_rank) {
  if (world_rank >= layout.world()) return {layout.pipeline_ranks + world_rank, 0};  // a group of its own
  return {layout.PipelineRankOf(world_rank), layout.ReplicaOf(world_rank)};
}

std::unique_ptr<ReplicaGroup> MakeMpiReplicaGroup(const MpiGroup& replicas, std::chrono::nanoseconds deadline) {
  return std::make_unique<MpiReplicaGroup>(replicas, deadline);
}

std::unique_ptr<ReplicaGroup> MakeMpiReplicaGroup(const WorldLayout& layout, std::chrono::nanoseconds deadline) {
  const MpiGroup world = MpiGroup::World();
  return MakeMpiReplicaGroup(world.Split(ReplicaKey(layout, world.rank())), deadline);
}

}  // namespace stagecraft::exec
