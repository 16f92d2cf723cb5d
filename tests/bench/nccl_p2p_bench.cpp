// Point-to-point bandwidth between two GPUs, in the manner of nccl-tests' sendrecv_perf: both
// ranks send `bytes` to the other and receive as much from it at once, and the rate is bytes /
// time (for sendrecv nccl-tests' bus bandwidth equals this algorithm bandwidth). Side by side
// in one run on the same GPUs:
//   raw_nccl: ncclGroupStart; ncclSend; ncclRecv; ncclGroupEnd on one stream, as nccl-tests
//             does (its binary is not packaged for Debian; this is the same measurement);
//   nccl_transport: the executor's NcclTransport (Isend + Irecv, then Wait on both);
//   staged_transport: the host-staged MPI transport that ranks sharing a GPU use.
//   scripts/mpirun.sh 2 build/tests/bench/nccl_p2p_bench
// Needs 2 MPI ranks and a GPU for each; otherwise it says why and exits 0 (nothing measured).
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <iterator>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "stagecraft/exec/backend.h"
#include "stagecraft/exec/cuda_device.h"
#include "stagecraft/exec/cuda_plan.h"
#include "stagecraft/exec/mpi_transport.h"
#include "stagecraft/exec/nccl_transport.h"
#include "stagecraft/exec/staged_transport.h"
#include "stagecraft/kernels/cuda_check.h"

namespace stagecraft::exec {
namespace {

#define SC_NCCL_BENCH_CHECK(call)                                                                      \
  do {                                                                                                 \
    const ncclResult_t r = (call);                                                                     \
    if (r != ncclSuccess) throw std::runtime_error(std::string(#call) + ": " + ncclGetErrorString(r)); \
  } while (0)

struct World {
  std::unique_ptr<Device> device;
  std::unique_ptr<Transport> nccl;
  std::unique_ptr<Transport> staged;
  ncclComm_t comm = nullptr;  // both ranks, for the raw measurement
  cudaStream_t stream = nullptr;
  int rank = 0;
};
World* g_world = nullptr;

enum class Path { kRawNccl, kNcclTransport, kStagedTransport };
constexpr int kIterations = 40;  // fixed: both ranks must run every benchmark the same number of times

void BM_SendRecv(benchmark::State& state) {
  World& w = *g_world;
  const auto path = static_cast<Path>(state.range(0));
  const int64_t bytes = state.range(1);
  const int64_t floats = bytes / static_cast<int64_t>(sizeof(float));
  const int peer = 1 - w.rank;
  Buffer send(*w.device, floats), recv(*w.device, floats);
  w.device->memory().Fill(send.data(), 1.0f, floats);
  w.device->streams().Synchronize();
  auto exchange = [&] {
    if (path == Path::kRawNccl) {
      SC_NCCL_BENCH_CHECK(ncclGroupStart());
      SC_NCCL_BENCH_CHECK(ncclSend(send.data(), static_cast<size_t>(floats), ncclFloat32, peer, w.comm, w.stream));
      SC_NCCL_BENCH_CHECK(ncclRecv(recv.data(), static_cast<size_t>(floats), ncclFloat32, peer, w.comm, w.stream));
      SC_NCCL_BENCH_CHECK(ncclGroupEnd());
      SC_CUDA_CHECK(cudaStreamSynchronize(w.stream));
    } else {
      Transport& t = path == Path::kNcclTransport ? *w.nccl : *w.staged;
      const Transport::Request r = t.Irecv(recv.data(), floats, peer, 1);
      const Transport::Request s = t.Isend(send.data(), floats, peer, 1);
      t.Wait(s);
      t.Wait(r);
      w.device->streams().Synchronize();
    }
  };
  for (int i = 0; i < 3; ++i) exchange();
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    exchange();
    state.SetIterationTime(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  state.SetBytesProcessed(state.iterations() * bytes);  // bytes/s = nccl-tests' algbw (= busbw for sendrecv)
}
// The sizes each path moves (bytes).
constexpr int64_t kSizes[] = {4 << 10, 64 << 10, 1 << 20, 8 << 20, 64 << 20, 256 << 20};

BENCHMARK(BM_SendRecv)
    ->ArgNames({"path", "bytes"})
    ->ArgsProduct({{static_cast<int>(Path::kRawNccl), static_cast<int>(Path::kNcclTransport),
                    static_cast<int>(Path::kStagedTransport)},
                   std::vector<int64_t>(std::begin(kSizes), std::end(kSizes))})
    ->Iterations(kIterations)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

// Rank 1 runs the same benchmarks in step with rank 0 and reports nothing.
class SilentReporter final : public benchmark::BenchmarkReporter {
 public:
  bool ReportContext(const Context&) override { return true; }
  void ReportRuns(const std::vector<Run>&) override {}
};

}  // namespace
}  // namespace stagecraft::exec

int main(int argc, char** argv) {
  using namespace stagecraft::exec;
  MpiSession session(&argc, &argv);
  const int rank = MpiWorldRank();
  const int gpus = CudaDeviceCount();
  if (MpiWorldSize() != 2 || !EveryProcessHasItsOwnGpu(GpuForLocalRank(MpiLocalRank(), gpus))) {
    if (rank == 0) {
      std::printf("SKIPPED: nccl_p2p_bench needs 2 MPI ranks with a GPU each (%d ranks, %d GPU(s) here): run it as "
                  "scripts/mpirun.sh 2 build/tests/bench/nccl_p2p_bench\n",
                  MpiWorldSize(), gpus);
    }
    return 0;
  }
  try {
    World world;
    world.rank = rank;
    world.device = MakeCudaDevice(GpuForLocalRank(MpiLocalRank(), gpus), GemmPrecision::kFp32);
    world.nccl = MakeNcclTransport(MakeMpiTransport(), *world.device);
    // Its channels, connected at every size the benchmark moves, as a run's Prepare does.
    std::vector<Route> routes;
    for (const int64_t bytes : kSizes) {
      const int64_t floats = bytes / static_cast<int64_t>(sizeof(float));
      routes.insert(routes.end(), {Route{0, 1, floats}, Route{1, 0, floats}});
    }
    world.nccl->Prepare(routes);
    world.staged = MakeStagedTransport(MakeMpiTransport(), *world.device);
    ncclUniqueId id{};
    if (rank == 0) SC_NCCL_BENCH_CHECK(ncclGetUniqueId(&id));
    MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
    SC_NCCL_BENCH_CHECK(ncclCommInitRank(&world.comm, 2, id, rank));
    SC_CUDA_CHECK(cudaStreamCreateWithFlags(&world.stream, cudaStreamNonBlocking));
    g_world = &world;
    benchmark::Initialize(&argc, argv);
    if (rank == 0) {
      benchmark::RunSpecifiedBenchmarks();
    } else {
      SilentReporter silent;
      benchmark::RunSpecifiedBenchmarks(&silent);
    }
    world.nccl->Barrier();
    (void)ncclCommDestroy(world.comm);
    (void)cudaStreamDestroy(world.stream);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "nccl_p2p_bench: rank %d: %s\n", rank, e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  return 0;
}
