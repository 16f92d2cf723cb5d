// The communicator groups (mpi_group.h) and what runs over them, under exec_mpi_tests' mpirun
// with 4 ranks: typed transfers byte for byte, splits of the world, the all-reduce group's sums
// and the all-to-all group's blocks. Each rank checks what it holds against index arithmetic
// (the oracle) and says "ok" or what differs; rank 0 gathers and reports. Every rank runs every
// collective, so a failing check never leaves a peer waiting.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "stagecraft/exec/all_to_all.h"
#include "stagecraft/exec/cpu_device.h"
#include "stagecraft/exec/mpi_group.h"
#include "stagecraft/exec/mpi_transport.h"
#include "stagecraft/exec/replica_group.h"
#include "stagecraft/exec/staged_transport.h"

namespace stagecraft::exec {
namespace {

constexpr ElementType kEveryType[] = {ElementType::kF32, ElementType::kBF16, ElementType::kF16, ElementType::kI32,
                                      ElementType::kByte};

// Runs `mine` on every rank (an exception becomes its message) and expects "ok" from each.
void ExpectOkOnEveryRank(const std::function<std::string()>& mine) {
  std::string said;
  try {
    said = mine();
  } catch (const std::exception& e) {
    said = std::string("threw: ") + e.what();
  }
  auto world = MakeMpiTransport();
  const std::vector<std::string> all = world->Gather(said, 0);
  for (size_t r = 0; r < all.size(); ++r) EXPECT_EQ(all[r], "ok") << "world rank " << r;
}

bool FourRanks() { return MpiGroup::World().size() == 4; }

// The bytes of `count` elements of `type` that rank `from` sends: every byte value occurs, NaN
// and subnormal patterns of the float types included, so that only a copy bit for bit passes.
std::vector<unsigned char> Pattern(ElementType type, int64_t count, int from) {
  std::vector<unsigned char> bytes(static_cast<size_t>(count * ElementBytes(type)));
  for (size_t i = 0; i < bytes.size(); ++i) {
    bytes[i] = static_cast<unsigned char>((i * 37 + static_cast<size_t>(type) * 11 + static_cast<size_t>(from) * 101) & 0xFF);
  }
  return bytes;
}

// Rank 0 of `pair` sends 64 elements of each type to rank 1 over `t`; rank 1 compares the bytes.
std::string SendEveryType(Transport& t) {
  constexpr int64_t kCount = 64;  // an even count: whole 4-byte words for the host-staged path
  std::string out = "ok";
  for (const ElementType type : kEveryType) {
    const std::vector<unsigned char> sent = Pattern(type, kCount, 0);
    std::vector<unsigned char> got(sent.size(), 0);
    if (t.rank() == 0) t.Wait(t.Isend(sent.data(), kCount, type, 1, 7));
    if (t.rank() == 1) {
      t.Wait(t.Irecv(got.data(), kCount, type, 0, 7));
      if (got != sent) out = fmt::format("{} arrived changed", ElementTypeName(type));
    }
  }
  return out;
}

// World ranks 0 and 1 as a group of two (the others another): each element type moves bit for
// bit over MPI, and over MPI through host buffers on the cpu device (staged_transport.h), which
// refuses a tensor that is not whole 4-byte words with a clear error.
TEST(CommGroupsMpi, TypedSendAndReceiveOfEveryElementTypeIsByteExact) {
  const MpiGroup world = MpiGroup::World();
  const MpiGroup pair = world.Split({world.rank() < 2 ? 0 : 1, world.rank()});
  auto device = MakeCpuDevice();
  auto mpi = MakeMpiTransport(pair);
  auto staged = MakeStagedTransport(MakeMpiTransport(pair), *device);
  ExpectOkOnEveryRank([&] {
    if (pair.size() != 2) return std::string("a pair of ") + std::to_string(pair.size());
    std::string said = SendEveryType(*mpi);
    if (said != "ok") return "mpi: " + said;
    said = SendEveryType(*staged);
    if (said != "ok") return "staged: " + said;
    std::vector<uint16_t> odd(3);
    try {
      staged->Isend(odd.data(), 3, ElementType::kBF16, 1 - pair.rank(), 8);
      return std::string("3 bf16 were staged");
    } catch (const std::invalid_argument& e) {
      if (std::string(e.what()).find("whole 4-byte words") == std::string::npos) return std::string(e.what());
    }
    return std::string("ok");
  });
}

// 4 ranks as 2 replicas of a 2-rank pipeline (WorldLayout{2, 2}): the pipelines are world ranks
// {0, 1} and {2, 3}, ranked by pipeline rank; the replica groups {0, 2} and {1, 3}, ranked by
// replica.
TEST(CommGroupsMpi, SplitOfFourRanksGivesTwoPipelinesOfTwoAndTwoReplicaGroupsOfTwo) {
  if (!FourRanks()) GTEST_SKIP() << "needs 4 ranks";  // every rank skips alike
  const MpiGroup world = MpiGroup::World();
  const WorldLayout layout{2, 2};
  const int w = world.rank();
  const MpiGroup pipeline = world.Split(PipelineKey(layout, w));
  const MpiGroup replicas = world.Split(ReplicaKey(layout, w));
  ExpectOkOnEveryRank([&] {
    const int first_of_pipeline = w / 2 * 2, first_of_replicas = w % 2;
    const std::string got = fmt::format("pipeline {}/{} [{} {}], replicas {}/{} [{} {}]", pipeline.rank(),
                                        pipeline.size(), pipeline.WorldRankOf(0), pipeline.WorldRankOf(1),
                                        replicas.rank(), replicas.size(), replicas.WorldRankOf(0),
                                        replicas.WorldRankOf(1));
    const std::string want = fmt::format("pipeline {}/2 [{} {}], replicas {}/2 [{} {}]", w % 2, first_of_pipeline,
                                         first_of_pipeline + 1, w / 2, first_of_replicas, first_of_replicas + 2);
    return got == want ? std::string("ok") : got + " (expected " + want + ")";
  });
}

// The all-reduce group over each pipeline rank's replicas, split from the world: world rank w
// contributes w·10 + i at element i, so the group {0, 2} sums to 20 + 2i and {1, 3} to 40 + 2i,
// in fp32, i32 and bytes; a bf16 sum over MPI is refused before anything is posted.
TEST(CommGroupsMpi, AllReduceOverASplitGroupSumsItsMembers) {
  if (!FourRanks()) GTEST_SKIP() << "needs 4 ranks";
  const MpiGroup world = MpiGroup::World();
  const int w = world.rank();
  auto group = MakeMpiReplicaGroup(world.Split(ReplicaKey(WorldLayout{2, 2}, w)), kDefaultWaitDeadline);
  ExpectOkOnEveryRank([&] {
    constexpr int kCount = 100;
    const int base = w % 2 == 0 ? 20 : 40;  // (w·10) + (partner·10)
    std::vector<float> f(kCount);
    std::vector<int32_t> n(kCount);
    std::vector<uint8_t> b(kCount);
    for (int i = 0; i < kCount; ++i) f[i] = static_cast<float>(w * 10 + i), n[i] = w * 10 + i, b[i] = static_cast<uint8_t>(w * 10 + i);
    group->Wait(group->PostSum(f.data(), kCount));
    group->Wait(group->PostSum(n.data(), kCount, ElementType::kI32));
    group->Wait(group->PostSum(b.data(), kCount, ElementType::kByte));
    for (int i = 0; i < kCount; ++i) {
      if (f[i] != static_cast<float>(base + 2 * i) || n[i] != base + 2 * i || b[i] != static_cast<uint8_t>(base + 2 * i)) {
        return fmt::format("element {}: {} {} {}, expected {}", i, f[i], n[i], b[i], base + 2 * i);
      }
    }
    if (group->size() != 2 || group->replica() != w / 2) return std::string("a group of ") + std::to_string(group->size());
    try {
      group->PostSum(n.data(), 2, ElementType::kBF16);
      return std::string("a bf16 sum was posted");
    } catch (const std::invalid_argument&) {
    }
    return std::string("ok");
  });
}

// Element k of block j that rank i sends, as i32: i·1000 + j·10 + k.
int32_t Sent(int i, int j, int64_t k) { return static_cast<int32_t>(i * 1000 + j * 10 + k); }

// Equal blocks of 5 over `group`: rank j holds at its block i what rank i sent in its block j.
std::string CheckEqualBlocks(AllToAllGroup& a2a) {
  constexpr int64_t kBlock = 5;
  const int n = a2a.size(), me = a2a.rank();
  std::vector<int32_t> send(static_cast<size_t>(n * kBlock)), recv(send.size(), -1);
  for (int j = 0; j < n; ++j) {
    for (int64_t k = 0; k < kBlock; ++k) send[static_cast<size_t>(j * kBlock + k)] = Sent(me, j, k);
  }
  a2a.Wait(a2a.PostAllToAll(send.data(), recv.data(), kBlock, ElementType::kI32));
  for (int i = 0; i < n; ++i) {
    for (int64_t k = 0; k < kBlock; ++k) {
      const int32_t got = recv[static_cast<size_t>(i * kBlock + k)];
      if (got != Sent(i, me, k)) return fmt::format("block {} element {}: {}, expected {}", i, k, got, Sent(i, me, k));
    }
  }
  return "ok";
}

// Blocks of i + j + 1 elements from rank i to rank j (so rank j receives i + j + 1 from rank i),
// back to back in rank order on both sides.
std::string CheckUnevenBlocks(AllToAllGroup& a2a) {
  const int n = a2a.size(), me = a2a.rank();
  AllToAllBlocks out, in;
  int64_t sent = 0, received = 0;
  for (int j = 0; j < n; ++j) {
    out.counts.push_back(me + j + 1), out.offsets.push_back(sent), sent += me + j + 1;
    in.counts.push_back(j + me + 1), in.offsets.push_back(received), received += j + me + 1;
  }
  std::vector<int32_t> send(static_cast<size_t>(sent)), recv(static_cast<size_t>(received), -1);
  for (int j = 0; j < n; ++j) {
    for (int64_t k = 0; k < out.counts[j]; ++k) send[static_cast<size_t>(out.offsets[j] + k)] = Sent(me, j, k);
  }
  a2a.Wait(a2a.PostAllToAllv(send.data(), out, recv.data(), in, ElementType::kI32));
  for (int i = 0; i < n; ++i) {
    for (int64_t k = 0; k < in.counts[i]; ++k) {
      const int32_t got = recv[static_cast<size_t>(in.offsets[i] + k)];
      if (got != Sent(i, me, k)) return fmt::format("uneven block {} element {}: {}, expected {}", i, k, got, Sent(i, me, k));
    }
  }
  return "ok";
}

// Over the 4 ranks of the world, and over 3 of them split from it (the fourth a group of one,
// which receives its own blocks): block j of rank i lands at rank j's block i, for equal blocks
// (MPI_Ialltoall) and for blocks of different sizes (MPI_Ialltoallv).
TEST(CommGroupsMpi, AllToAllDeliversBlockJOfRankIToRankJAtBlockI) {
  if (!FourRanks()) GTEST_SKIP() << "needs 4 ranks";
  const MpiGroup world = MpiGroup::World();
  auto all = MakeMpiAllToAll(world, kDefaultWaitDeadline);
  auto three = MakeMpiAllToAll(world.Split({world.rank() < 3 ? 0 : 1, world.rank()}), kDefaultWaitDeadline);
  ExpectOkOnEveryRank([&] {
    if (three->size() != (world.rank() < 3 ? 3 : 1)) return std::string("a group of ") + std::to_string(three->size());
    for (AllToAllGroup* a2a : {all.get(), three.get()}) {
      std::string said = CheckEqualBlocks(*a2a);
      if (said == "ok") said = CheckUnevenBlocks(*a2a);
      if (said != "ok") return fmt::format("over {} ranks: {}", a2a->size(), said);
    }
    return std::string("ok");
  });
}

}  // namespace
}  // namespace stagecraft::exec
