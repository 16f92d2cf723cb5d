// MpiTransport: non-blocking MPI point-to-point and a few collectives (see mpi_transport.h).
//
// Waiting spins only while that starves nobody. With a core for every rank of the node, Wait
// polls MPI_Test until done (a sleeping waiter would wake up to kMaxSleepNs after its data).
// With more ranks than cores (4 ranks on 2 cores) MPI_Wait's busy-poll would starve the rank
// sharing the core: Wait polls MPI_Test for a few microseconds, then sleeps between polls with
// a backoff capped at kMaxSleepNs, giving the core to whichever rank has compute to do.
#include "stagecraft/exec/mpi_transport.h"

#include <mpi.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "stagecraft/base/check.h"
#include "stagecraft/exec/handle_pool.h"
#include "stagecraft/exec/poll.h"
#include "mpi_check.h"
#include "mpi_element_type.h"
#include "mpi_group_impl.h"
#include "stagecraft/schedules/ir.h"

namespace stagecraft::exec {
namespace {

constexpr int64_t kSpinNs = 20'000;
constexpr int64_t kMinSleepNs = 2'000;
constexpr int64_t kMaxSleepNs = 50'000;

// This process's rank among the processes of its node, and how many there are.
struct NodePlace {
  int rank = 0;
  int size = 1;
};
// The processes of this node (MPI_COMM_TYPE_SHARED) in world-rank order, as a communicator
// freed when it goes out of scope (collective).
class NodeComm {
 public:
  NodeComm() {
    int world_rank = 0;
    SC_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &world_rank));
    SC_MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, world_rank, MPI_INFO_NULL, &comm_));
  }
  ~NodeComm() { MPI_Comm_free(&comm_); }
  NodeComm(const NodeComm&) = delete;
  NodeComm& operator=(const NodeComm&) = delete;
  MPI_Comm get() const { return comm_; }

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
};

NodePlace PlaceOnNode() {
  const NodeComm node;
  NodePlace place;
  SC_MPI_CHECK(MPI_Comm_rank(node.get(), &place.rank));
  SC_MPI_CHECK(MPI_Comm_size(node.get(), &place.size));
  return place;
}

class MpiTransport final : public Transport {
 public:
  MpiTransport(const MpiGroup& group, std::chrono::nanoseconds deadline, int64_t piece_bytes)
      : deadline_ns_(deadline.count()),
        piece_bytes_(std::max<int64_t>(1, piece_bytes)),
        group_(group),
        comm_(CommOf(group_)),
        rank_(group_.rank()),
        size_(group_.size()) {
    int* tag_ub = nullptr;
    int found = 0;
    SC_MPI_CHECK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &tag_ub, &found));
    tag_modulus_ = found != 0 && tag_ub != nullptr ? static_cast<int64_t>(*tag_ub) + 1 : 32768;
    // Sleeps of a few microseconds should last a few microseconds, not the default 50 µs slack.
    prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
    // With a core for every rank of this node nobody is starved by spinning, and a sleeping
    // waiter wakes late (up to kMaxSleepNs after its data came): spin for the whole wait.
    const long cores = sysconf(_SC_NPROCESSORS_ONLN);
    spin_only_ = cores > 0 && PlaceOnNode().size <= cores;
  }
  ~MpiTransport() override = default;  // the group frees its communicator
  MpiTransport(const MpiTransport&) = delete;
  MpiTransport& operator=(const MpiTransport&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string Name() const override { return "mpi"; }
  std::chrono::nanoseconds deadline() const override { return std::chrono::nanoseconds(deadline_ns_); }

  using Transport::Irecv;
  using Transport::Isend;
  Request Isend(const void* data, int64_t count, ElementType type, int peer, int64_t tag) override {
    const MPI_Datatype datatype = MpiTransferType(type);  // before a handle is taken: it may throw
    MPI_Request* r = nullptr;
    const Request handle = NewRequest(&r, {Kind::kSend, peer, tag});
    SC_MPI_CHECK(MPI_Isend(data, Count(count), datatype, peer, Tag(tag), comm_, r));
    return handle;
  }
  Request Irecv(void* data, int64_t count, ElementType type, int peer, int64_t tag) override {
    const MPI_Datatype datatype = MpiTransferType(type);
    MPI_Request* r = nullptr;
    const Request handle = NewRequest(&r, {Kind::kRecv, peer, tag});
    SC_MPI_CHECK(MPI_Irecv(data, Count(count), datatype, peer, Tag(tag), comm_, r));
    return handle;
  }
  bool Test(Request request) override {
    int done = 0;
    MPI_Status status;
    SC_CHECK(pending_.Live(request), "a pending request");
    SC_MPI_CHECK(MPI_Test(&pending_[request].request, &done, &status));
    if (done != 0) pending_.Release(request);
    return done != 0;
  }
  void Wait(Request request) override {
    const PollPolicy policy{.deadline_ns = deadline_ns_,
                            .spin_ns = spin_only_ ? INT64_MAX : kSpinNs,
                            .min_sleep_ns = kMinSleepNs,
                            .max_sleep_ns = kMaxSleepNs};
    if (!PollUntil([&] { return Test(request); }, policy)) TimedOut(request);
  }

  void Barrier() override {
    // A non-blocking barrier waited on like any request, so it does not spin either.
    MPI_Request* r = nullptr;
    const Request handle = NewRequest(&r, {Kind::kBarrier, -1, 0});
    SC_MPI_CHECK(MPI_Ibarrier(comm_, r));
    Wait(handle);
  }
  bool EveryRank(bool mine) override {
    // Non-blocking as the barrier is, so that a deadline applies.
    int local = mine ? 1 : 0, all = 0;
    MPI_Request* r = nullptr;
    const Request handle = NewRequest(&r, {Kind::kCollective, -1, 0});
    SC_MPI_CHECK(MPI_Iallreduce(&local, &all, 1, MPI_INT, MPI_LAND, comm_, r));
    Wait(handle);
    return all != 0;
  }
  // A text of any length, in rounds of at most one piece from each rank (MPI counts are int).
  std::vector<std::string> Gather(const std::string& mine, int root) override {
    Barrier();  // the blocking collectives below then find every rank ready
    const int64_t length = static_cast<int64_t>(mine.size());
    std::vector<int64_t> lengths(rank_ == root ? size_ : 0);
    SC_MPI_CHECK(MPI_Gather(&length, 1, MPI_INT64_T, lengths.data(), 1, MPI_INT64_T, root, comm_));
    int64_t longest = 0;
    SC_MPI_CHECK(MPI_Allreduce(&length, &longest, 1, MPI_INT64_T, MPI_MAX, comm_));
    // The root receives a piece from every rank per round: their sum stays within an int.
    const int64_t piece = std::max<int64_t>(1, std::min<int64_t>(piece_bytes_, INT32_MAX / size_));
    std::vector<std::string> out(lengths.size());
    for (size_t r = 0; r < out.size(); ++r) out[r].reserve(static_cast<size_t>(lengths[r]));
    std::vector<int> counts(lengths.size()), offsets(lengths.size());
    std::string round;
    const auto part = [piece](int64_t total, int64_t at) { return static_cast<int>(std::clamp<int64_t>(total - at, 0, piece)); };
    for (int64_t at = 0; at < longest; at += piece) {
      int64_t received = 0;
      for (size_t r = 0; r < lengths.size(); ++r) {
        counts[r] = part(lengths[r], at);
        offsets[r] = static_cast<int>(received);
        received += counts[r];
      }
      round.resize(static_cast<size_t>(received));
      SC_MPI_CHECK(MPI_Gatherv(mine.data() + std::min(at, length), part(length, at), MPI_CHAR, round.data(),
                               counts.data(), offsets.data(), MPI_CHAR, root, comm_));
      for (size_t r = 0; r < out.size(); ++r) out[r].append(round, static_cast<size_t>(offsets[r]), static_cast<size_t>(counts[r]));
    }
    return out;
  }
  void Broadcast(std::string* text, int root) override {
    Barrier();  // as in Gather: the blocking collectives then find every rank ready
    int64_t length = static_cast<int64_t>(text->size());
    SC_MPI_CHECK(MPI_Bcast(&length, 1, MPI_INT64_T, root, comm_));
    text->resize(static_cast<size_t>(length));
    const int64_t piece = std::min<int64_t>(piece_bytes_, INT32_MAX);
    for (int64_t at = 0; at < length; at += piece) {
      SC_MPI_CHECK(MPI_Bcast(text->data() + at, static_cast<int>(std::min(piece, length - at)), MPI_CHAR, root,
                             comm_));
    }
  }
  [[noreturn]] void Abort(int exit_code) override {
    std::fflush(stdout);
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, exit_code);
    std::_Exit(exit_code);  // MPI_Abort does not return; this only satisfies [[noreturn]]
  }

 private:
  static int Count(int64_t count) {
    SC_CHECK(count >= 0 && count <= INT32_MAX, fmt::format("message of {} elements exceeds MPI's int count", count));
    return static_cast<int>(count);
  }
  int Tag(int64_t tag) const { return static_cast<int>(tag % tag_modulus_); }
  enum class Kind { kSend, kRecv, kBarrier, kCollective };
  struct What {
    Kind kind = Kind::kSend;
    int peer = -1;
    int64_t tag = 0;
  };
  struct Pending {
    MPI_Request request = MPI_REQUEST_NULL;
    What what;  // for a deadline's message
  };
  Request NewRequest(MPI_Request** slot, const What& what) {
    const Request handle = pending_.Add({MPI_REQUEST_NULL, what});
    *slot = &pending_[handle].request;
    return handle;
  }
  // A receive is cancelled, so nothing arriving later lands in its buffer; then one line says
  // what did not complete.
  [[noreturn]] void TimedOut(Request request) {
    const What w = pending_[request].what;
    if (w.kind == Kind::kRecv) {
      MPI_Cancel(&pending_[request].request);
      MPI_Wait(&pending_[request].request, MPI_STATUS_IGNORE);
      pending_.Release(request);
    }
    const std::string transfer = w.kind == Kind::kBarrier      ? std::string("a barrier")
                                 : w.kind == Kind::kCollective ? std::string("a collective over every rank")
                                 : fmt::format("the MPI {} rank {} (tag {})",
                                               w.kind == Kind::kSend ? "send to" : "receive from", w.peer, w.tag);
    throw TimeoutError(fmt::format("{} did not complete within {:g} s: a peer is hung or gone", transfer,
                                   static_cast<double>(deadline_ns_) * 1e-9));
  }

  const int64_t deadline_ns_;
  const int64_t piece_bytes_;
  const MpiGroup group_;  // the group it was made over (its communicator shared, as the world's)
  const MPI_Comm comm_;   // group_'s
  const int rank_;
  const int size_;
  bool spin_only_ = false;  // every rank of this node has its own core
  int64_t tag_modulus_ = 32768;
  HandlePool<Pending> pending_;
};

}  // namespace

MpiSession::MpiSession(int* argc, char*** argv) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized == 0) SC_MPI_CHECK(MPI_Init(argc, argv));
  SC_MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
}

MpiSession::~MpiSession() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized == 0) MPI_Finalize();
}

std::unique_ptr<Transport> MakeMpiTransport(const MpiGroup& group, std::chrono::nanoseconds deadline,
                                            int64_t piece_bytes) {
  return std::make_unique<MpiTransport>(group, deadline, piece_bytes);
}

std::unique_ptr<Transport> MakeMpiTransport(std::chrono::nanoseconds deadline, int64_t piece_bytes,
                                            std::optional<MpiSplit> split) {
  const MpiGroup world = MpiGroup::World();
  return MakeMpiTransport(split ? world.Split(*split) : world, deadline, piece_bytes);
}

int MpiWorldRank() {
  int rank = 0;
  SC_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  return rank;
}

int MpiWorldSize() {
  int size = 1;
  SC_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  return size;
}

int MpiLocalRank() { return PlaceOnNode().rank; }
int MpiLocalSize() { return PlaceOnNode().size; }

bool MpiOnEveryRank(bool mine) {
  int local = mine ? 1 : 0, all = 0;
  SC_MPI_CHECK(MPI_Allreduce(&local, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD));
  return all != 0;
}

std::vector<std::string> MpiGatherOnNode(const std::string& mine) {
  constexpr int kWidth = 256;
  if (mine.size() >= kWidth) throw std::invalid_argument("MpiGatherOnNode: more than 255 bytes");
  const NodeComm node;
  int size = 1;
  SC_MPI_CHECK(MPI_Comm_size(node.get(), &size));
  std::vector<char> out(static_cast<size_t>(size) * kWidth, '\0');
  std::vector<char> in(kWidth, '\0');
  std::copy(mine.begin(), mine.end(), in.begin());
  SC_MPI_CHECK(MPI_Allgather(in.data(), kWidth, MPI_CHAR, out.data(), kWidth, MPI_CHAR, node.get()));
  std::vector<std::string> all;
  for (int r = 0; r < size; ++r) all.emplace_back(out.data() + static_cast<size_t>(r) * kWidth);
  return all;
}

std::string HostName() {
  char name[256] = {};
  gethostname(name, sizeof(name) - 1);
  return name;
}

}  // namespace stagecraft::exec
