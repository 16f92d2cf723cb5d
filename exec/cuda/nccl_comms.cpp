// The process's NCCL communicators (nccl_comms.h).
#include "nccl_comms.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "nccl_check.h"
#include "stagecraft/kernels/cuda_check.h"

namespace stagecraft::exec {
namespace {

// NCCL's calls for CommSet. ncclCommGetAsyncError reports ncclInProgress while a non-blocking
// call (an init, a finalize, an enqueue that connects) is still under way.
class NcclCalls final : public CommCalls {
 public:
  CommState State(void* comm, std::string* error) override {
    const auto c = static_cast<ncclComm_t>(comm);
    ncclResult_t async = ncclSuccess;
    const ncclResult_t polled = ncclCommGetAsyncError(c, &async);
    if (polled != ncclSuccess) {
      *error = NcclErrorText(polled, c, "ncclCommGetAsyncError", __FILE__, __LINE__);
      return CommState::kFailed;
    }
    if (async == ncclSuccess) return CommState::kReady;
    if (async == ncclInProgress) return CommState::kPending;
    *error = NcclErrorText(async, c, "an operation in progress (ncclCommGetAsyncError)", __FILE__, __LINE__);
    return CommState::kFailed;
  }
  CommState Finalize(void* comm, std::string* error) override {
    const auto c = static_cast<ncclComm_t>(comm);
    const ncclResult_t result = ncclCommFinalize(c);
    if (result == ncclSuccess || result == ncclInProgress) return CommState::kPending;  // State says when done
    *error = NcclErrorText(result, c, "ncclCommFinalize", __FILE__, __LINE__);
    return CommState::kFailed;
  }
  void Destroy(void* comm) override { (void)ncclCommDestroy(static_cast<ncclComm_t>(comm)); }
  void Abort(void* comm) override { (void)ncclCommAbort(static_cast<ncclComm_t>(comm)); }
};

}  // namespace

bool EventsLand(const std::vector<cudaEvent_t>& events, int64_t deadline_ns) {
  PollPolicy policy = kNcclPoll;
  policy.deadline_ns = deadline_ns;
  return PollUntil(
      [&] {
        for (cudaEvent_t e : events) {
          if (e != nullptr && cudaEventQuery(e) == cudaErrorNotReady) return false;
        }
        return true;
      },
      policy);
}

CommSet& NcclComms() {
  static NcclCalls calls;
  static CommSet set(calls);
  return set;
}

ncclConfig_t NcclConfig() {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  config.minCTAs = kNcclMinCtas;
  config.maxCTAs = kNcclMaxCtas;
  config.cgaClusterSize = kNcclClusterSize;
  return config;
}

std::vector<CommSet::Id> MakeNcclComms(const std::vector<NcclInit>& inits, int64_t deadline_ns,
                                       const std::string& what) {
  CommSet& set = NcclComms();
  if (inits.empty()) return {};
  // Each init reads its own configuration; they must outlive the group.
  std::vector<ncclConfig_t> configs(inits.size(), NcclConfig());
  std::vector<ncclComm_t> comms(inits.size(), nullptr);
  std::string error;
  const ncclResult_t start = ncclGroupStart();
  if (start != ncclSuccess) throw std::runtime_error(what + ": " + NcclErrorText(start, nullptr, "ncclGroupStart", __FILE__, __LINE__));
  for (size_t i = 0; i < inits.size(); ++i) {
    const NcclInit& in = inits[i];
    const ncclResult_t r = ncclCommInitRankConfig(&comms[i], in.ranks, in.id, in.rank, &configs[i]);
    if (r != ncclSuccess && r != ncclInProgress && error.empty()) {
      error = NcclErrorText(r, nullptr, "ncclCommInitRankConfig", __FILE__, __LINE__) + " (" + in.name + ")";
    }
  }
  // Always: the group must end, whatever failed inside it.
  const ncclResult_t end = ncclGroupEnd();
  if (end != ncclSuccess && end != ncclInProgress && error.empty()) {
    error = NcclErrorText(end, nullptr, "ncclGroupEnd", __FILE__, __LINE__);
  }
  std::vector<CommSet::Id> ids;
  for (size_t i = 0; i < inits.size(); ++i) {
    if (comms[i] != nullptr) ids.push_back(set.Add(comms[i], inits[i].name));
  }
  if (!error.empty()) {
    set.AbortAll();
    throw std::runtime_error(what + ": " + error + " (" + CommSet::kAbortedNote + ")");
  }
  set.AwaitReady(ids, deadline_ns, what);
  return ids;
}

NcclGroupComm MakeNcclGroupComm(Transport& host, int ranks, int rank, int64_t deadline_ns, const std::string& name) {
  NcclInit init{.ranks = ranks, .rank = rank, .name = name};
  std::string wire;
  if (rank == 0) {
    SC_NCCL_CHECK(nullptr, ncclGetUniqueId(&init.id));
    wire.assign(reinterpret_cast<const char*>(&init.id), sizeof(init.id));
  }
  host.Broadcast(&wire, 0);
  if (wire.size() != sizeof(init.id)) throw std::runtime_error(name + ": a malformed ncclUniqueId");
  std::memcpy(&init.id, wire.data(), sizeof(init.id));
  NcclGroupComm group;
  SC_CUDA_CHECK(cudaStreamCreateWithFlags(&group.stream, cudaStreamNonBlocking));
  try {
    group.comm = MakeNcclComms({init}, deadline_ns, "making " + name).at(0);
  } catch (...) {
    (void)cudaStreamDestroy(group.stream);
    throw;
  }
  return group;
}

void CloseNcclGroupComm(const NcclGroupComm& group, const std::vector<cudaEvent_t>& in_flight, int64_t deadline_ns) {
  const int64_t bound = std::min(deadline_ns, kNcclCloseNs);
  if (!EventsLand(in_flight, bound)) NcclComms().AbortAll();
  if (group.comm >= 0) NcclComms().Close({group.comm}, bound);
  if (group.stream != nullptr) (void)cudaStreamDestroy(group.stream);
}

void CheckEnqueued(CommSet::Id id, ncclResult_t result, const char* call, int64_t deadline_ns, const char* file,
                   int line) {
  if (result == ncclSuccess) return;
  CommSet& set = NcclComms();
  if (result == ncclInProgress) {
    set.AwaitReady({id}, deadline_ns, std::string("enqueuing ") + call);
    return;
  }
  ncclComm_t comm = nullptr;
  if (!set.aborted(id)) comm = static_cast<ncclComm_t>(set.Get(id));
  const std::string text = NcclErrorText(result, comm, call, file, line);  // before the abort frees it
  set.AbortAll();
  throw std::runtime_error(text + " (" + CommSet::kAbortedNote + ")");
}

}  // namespace stagecraft::exec
