// The cpu backend's all-to-all group over MPI (all_to_all.h): MPI_Ialltoall for equal blocks,
// MPI_Ialltoallv for any, on a dup of the group, polled under the deadline.
#include <mpi.h>

#include <climits>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "mpi_check.h"
#include "mpi_element_type.h"
#include "mpi_group_impl.h"
#include "stagecraft/base/check.h"
#include "stagecraft/exec/all_to_all.h"
#include "stagecraft/exec/handle_pool.h"

namespace stagecraft::exec {
namespace {

// MPI's counts and displacements are int.
int IntCount(int64_t value, const char* what) {
  if (value < 0 || value > INT_MAX) {
    throw std::invalid_argument(fmt::format("an MPI all-to-all {} of {} elements is outside MPI's int", what, value));
  }
  return static_cast<int>(value);
}

std::vector<int> IntCounts(const std::vector<int64_t>& values, size_t ranks, const char* what) {
  if (values.size() != ranks) {
    throw std::invalid_argument(fmt::format("an MPI all-to-all's {}: {} entries for {} ranks", what, values.size(), ranks));
  }
  std::vector<int> out;
  out.reserve(values.size());
  for (const int64_t v : values) out.push_back(IntCount(v, what));
  return out;
}

class MpiAllToAll final : public AllToAllGroup {
 public:
  MpiAllToAll(const MpiGroup& group, std::chrono::nanoseconds deadline)
      : deadline_ns_(deadline.count()), group_(group.Dup()), comm_(CommOf(group_)) {}

  int rank() const override { return group_.rank(); }
  int size() const override { return group_.size(); }
  std::string Name() const override { return "mpi"; }

  Request PostAllToAll(const void* send, void* recv, int64_t block_count, ElementType type) override {
    const MPI_Datatype datatype = MpiTransferType(type);
    const int count = IntCount(block_count, "block");
    Pending p;
    p.elements = block_count * size();
    p.type = type;
    const Request handle = pending_.Add(std::move(p));
    SC_MPI_CHECK(MPI_Ialltoall(send, count, datatype, recv, count, datatype, comm_, &pending_[handle].request));
    return handle;
  }

  Request PostAllToAllv(const void* send, const AllToAllBlocks& send_blocks, void* recv,
                        const AllToAllBlocks& recv_blocks, ElementType type) override {
    const MPI_Datatype datatype = MpiTransferType(type);
    const size_t ranks = static_cast<size_t>(size());
    Pending p;
    p.type = type;
    p.send_counts = IntCounts(send_blocks.counts, ranks, "send counts");
    p.send_offsets = IntCounts(send_blocks.offsets, ranks, "send offsets");
    p.recv_counts = IntCounts(recv_blocks.counts, ranks, "receive counts");
    p.recv_offsets = IntCounts(recv_blocks.offsets, ranks, "receive offsets");
    for (const int64_t c : send_blocks.counts) p.elements += c;
    // The arrays must stay as they are until the exchange completes: the pending entry keeps them
    // (a vector's elements stay where they are when the entry moves).
    const Request handle = pending_.Add(std::move(p));
    Pending& q = pending_[handle];
    SC_MPI_CHECK(MPI_Ialltoallv(send, q.send_counts.data(), q.send_offsets.data(), datatype, recv,
                                q.recv_counts.data(), q.recv_offsets.data(), datatype, comm_, &q.request));
    return handle;
  }

  bool Test(Request request) override { return TestPending(pending_, request, kNames); }
  void Wait(Request request) override { WaitPending(pending_, request, size(), deadline_ns_, kNames); }

 private:
  static constexpr CollectiveNames kNames{"all-to-all", "ranks", "peer"};
  struct Pending {
    MPI_Request request = MPI_REQUEST_NULL;
    int64_t elements = 0;  // sent by this rank, for a deadline's message
    ElementType type = ElementType::kF32;
    std::vector<int> send_counts, send_offsets, recv_counts, recv_offsets;  // an all-to-all-v's
  };

  const int64_t deadline_ns_;
  const MpiGroup group_;  // a dup of the group it was made over
  const MPI_Comm comm_;   // group_'s
  HandlePool<Pending> pending_;
};

}  // namespace

AllToAllBlocks EqualBlocks(int ranks, int64_t block_count) {
  SC_CHECK(ranks >= 1 && block_count >= 0, "ranks and a block's elements");
  AllToAllBlocks blocks;
  for (int j = 0; j < ranks; ++j) {
    blocks.counts.push_back(block_count);
    blocks.offsets.push_back(j * block_count);
  }
  return blocks;
}

std::unique_ptr<AllToAllGroup> MakeMpiAllToAll(const MpiGroup& group, std::chrono::nanoseconds deadline) {
  return std::make_unique<MpiAllToAll>(group, deadline);
}

}  // namespace stagecraft::exec
