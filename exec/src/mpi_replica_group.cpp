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
#include "stagecraft/base/check.h"
#include "stagecraft/exec/handle_pool.h"
#include "stagecraft/exec/mpi_transport.h"
#include "stagecraft/exec/poll.h"
#include "stagecraft/exec/replica_group.h"

namespace stagecraft::exec {
namespace {

// As MpiTransport waits: a few microseconds of spinning, then sleeps that leave the core to a
// rank sharing it (the collective needs the peer replicas to run).
constexpr int64_t kSpinNs = 20'000;
constexpr int64_t kMinSleepNs = 2'000;
constexpr int64_t kMaxSleepNs = 50'000;

class MpiReplicaGroup final : public ReplicaGroup {
 public:
  MpiReplicaGroup(const WorldLayout& layout, std::chrono::nanoseconds deadline)
      : deadline_ns_(deadline.count()) {
    const int world_rank = MpiWorldRank();
    // A process beyond the layout (a test that runs on part of its job) is a group of its own.
    const MpiSplit split = world_rank < layout.world()
                               ? MpiSplit{layout.PipelineRankOf(world_rank), layout.ReplicaOf(world_rank)}
                               : MpiSplit{layout.pipeline_ranks + world_rank, 0};
    SC_MPI_CHECK(MPI_Comm_split(MPI_COMM_WORLD, split.color, split.key, &comm_));
    SC_MPI_CHECK(MPI_Comm_rank(comm_, &replica_));
    SC_MPI_CHECK(MPI_Comm_size(comm_, &size_));
    host_ = MakeMpiTransport(deadline, kDefaultPieceBytes, split);
  }
  ~MpiReplicaGroup() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized == 0) MPI_Comm_free(&comm_);
  }
  MpiReplicaGroup(const MpiReplicaGroup&) = delete;
  MpiReplicaGroup& operator=(const MpiReplicaGroup&) = delete;

  int replica() const override { return replica_; }
  int size() const override { return size_; }
  std::string Name() const override { return "mpi"; }

  Request PostSum(float* data, int64_t count) override {
    SC_CHECK(count >= 0 && count <= INT_MAX, fmt::format("an all-reduce of {} floats exceeds MPI's int count", count));
    const Request handle = pending_.Add({MPI_REQUEST_NULL, count});
    SC_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, data, static_cast<int>(count), MPI_FLOAT, MPI_SUM, comm_,
                                &pending_[handle].request));
    return handle;
  }
  bool Test(Request request) override {
    SC_CHECK(pending_.Live(request), "a pending all-reduce");
    int done = 0;
    SC_MPI_CHECK(MPI_Test(&pending_[request].request, &done, MPI_STATUS_IGNORE));
    if (done != 0) pending_.Release(request);
    return done != 0;
  }
  void Wait(Request request) override {
    const PollPolicy policy{
        .deadline_ns = deadline_ns_, .spin_ns = kSpinNs, .min_sleep_ns = kMinSleepNs, .max_sleep_ns = kMaxSleepNs};
    if (PollUntil([&] { return Test(request); }, policy)) return;
    // A pending collective cannot be cancelled: the job ends (the caller aborts it).
    throw TimeoutError(fmt::format("the MPI all-reduce of {} floats over {} replicas did not complete within {:g} s: "
                                   "a replica is hung or gone",
                                   pending_[request].count, size_,
                                   static_cast<double>(deadline_ns_) * 1e-9));
  }
  Transport& host() override { return *host_; }

 private:
  struct Pending {
    MPI_Request request = MPI_REQUEST_NULL;
    int64_t count = 0;  // floats, for a deadline's message
  };

  const int64_t deadline_ns_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  int replica_ = 0;
  int size_ = 1;
  std::unique_ptr<Transport> host_;
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

std::unique_ptr<ReplicaGroup> MakeMpiReplicaGroup(const WorldLayout& layout, std::chrono::nanoseconds deadline) {
  return std::make_unique<MpiReplicaGroup>(layout, deadline);
}

}  // namespace stagecraft::exec
