// Element types (element_type.h) and the typed forms of the transports that take them: sizes and
// names, the fp32-only default of a transport that overrides the fp32 pair alone, the host-staged
// transport forwarding a typed transfer as it came, and the all-to-all's equal blocks.
#include "stagecraft/exec/element_type.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "fake_transport.h"
#include "stagecraft/exec/all_to_all.h"
#include "stagecraft/exec/cpu_device.h"
#include "stagecraft/exec/staged_transport.h"

namespace stagecraft::exec {
namespace {

TEST(ElementType, SizesAndNames) {
  EXPECT_EQ(ElementBytes(ElementType::kF32), 4);
  EXPECT_EQ(ElementBytes(ElementType::kBF16), 2);
  EXPECT_EQ(ElementBytes(ElementType::kF16), 2);
  EXPECT_EQ(ElementBytes(ElementType::kI32), 4);
  EXPECT_EQ(ElementBytes(ElementType::kByte), 1);
  std::set<std::string_view> names;
  for (int t = 0; t < kElementTypes; ++t) names.insert(ElementTypeName(static_cast<ElementType>(t)));
  EXPECT_EQ(names.size(), static_cast<size_t>(kElementTypes));
  EXPECT_EQ(ElementTypeOf<float>::value, ElementType::kF32);
  EXPECT_EQ(ElementTypeOf<int32_t>::value, ElementType::kI32);
  EXPECT_EQ(ElementTypeOf<uint8_t>::value, ElementType::kByte);
}

// A transport that moves fp32 alone and overrides only the fp32 pair, as a test double may.
class Fp32OnlyTransport final : public testing::AgreeingTransport {
 public:
  int rank() const override { return 0; }
  int size() const override { return 2; }
  std::string Name() const override { return "fp32-only"; }
  Request Isend(const float*, int64_t count, int, int64_t) override { return static_cast<Request>(count); }
  Request Irecv(float*, int64_t count, int, int64_t) override { return static_cast<Request>(count); }
  using Transport::Irecv;
  using Transport::Isend;
};

TEST(ElementType, ATransportOfTheFp32PairTakesTypedFp32AndRefusesTheRest) {
  Fp32OnlyTransport t;
  std::vector<float> f(3);
  EXPECT_EQ(t.Isend(static_cast<const void*>(f.data()), 3, ElementType::kF32, 1, 0), 3);
  EXPECT_EQ(t.Irecv(static_cast<void*>(f.data()), 3, ElementType::kF32, 1, 0), 3);
  EXPECT_THROW(t.Isend(static_cast<const void*>(f.data()), 6, ElementType::kBF16, 1, 0), std::invalid_argument);
  EXPECT_THROW(t.Irecv(static_cast<void*>(f.data()), 3, ElementType::kI32, 1, 0), std::invalid_argument);
}

// The host-staged transport hands the inner transport the type and count it was given, and
// refuses a tensor that is not whole 4-byte words (the device's copies move words).
TEST(ElementType, StagedTransportForwardsTypedTransfers) {
  auto device = MakeCpuDevice();
  auto inner = std::make_unique<testing::FakeTransport>(0, 2);
  testing::FakeTransport& fake = *inner;
  auto staged = MakeStagedTransport(std::move(inner), *device);
  std::vector<uint16_t> halves(4, 0x3c00);
  staged->Wait(staged->Isend(halves.data(), 4, ElementType::kF16, 1, 5));
  staged->Wait(staged->Irecv(halves.data(), 4, ElementType::kBF16, 1, 6));
  ASSERT_EQ(fake.posted.size(), 2u);
  EXPECT_EQ(fake.posted[0].type, ElementType::kF16);
  EXPECT_EQ(fake.posted[0].count, 4);
  EXPECT_EQ(fake.posted[1].type, ElementType::kBF16);
  EXPECT_THROW(staged->Isend(halves.data(), 3, ElementType::kF16, 1, 7), std::invalid_argument);
  std::vector<uint8_t> bytes(8);
  staged->Wait(staged->Isend(bytes.data(), 8, ElementType::kByte, 1, 8));
  EXPECT_EQ(fake.posted.back().type, ElementType::kByte);
}

TEST(ElementType, EqualBlocksLieBackToBack) {
  const AllToAllBlocks blocks = EqualBlocks(3, 4);
  EXPECT_EQ(blocks.counts, (std::vector<int64_t>{4, 4, 4}));
  EXPECT_EQ(blocks.offsets, (std::vector<int64_t>{0, 4, 8}));
}

}  // namespace
}  // namespace stagecraft::exec
