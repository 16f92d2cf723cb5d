// Tests for scenario/src/units.cpp: a table of unit strings worked by hand, the errors, and the
// short formats.
#include "stagecraft/scenario/units.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "sim_test_util.h"

namespace stagecraft::sim {
namespace {

using testing::ErrorOf;

TEST(ParseBytes, DecimalBinaryAndPlain) {
  EXPECT_EQ(ParseBytes("512"), 512);
  EXPECT_EQ(ParseBytes("0"), 0);
  EXPECT_EQ(ParseBytes("512B"), 512);
  EXPECT_EQ(ParseBytes("1KB"), 1000);
  EXPECT_EQ(ParseBytes("10MB"), 10'000'000);
  EXPECT_EQ(ParseBytes("1.5GB"), 1'500'000'000);
  EXPECT_EQ(ParseBytes("2TB"), 2'000'000'000'000);
  EXPECT_EQ(ParseBytes("1KiB"), 1024);
  EXPECT_EQ(ParseBytes("1MiB"), 1'048'576);
  EXPECT_EQ(ParseBytes("80GiB"), 85'899'345'920);
  EXPECT_EQ(ParseBytes("1.5GiB"), 1'610'612'736);
  EXPECT_EQ(ParseBytes("1TiB"), 1'099'511'627'776);
  EXPECT_EQ(ParseBytes(" 64 MiB "), 67'108'864);
  EXPECT_EQ(ParseBytes(".5KiB"), 512);
  EXPECT_EQ(ParseBytes("1e3"), 1000);
  EXPECT_EQ(ParseBytes("9223372036854775807"), INT64_MAX);
}

TEST(ParseBytes, Errors) {
  EXPECT_EQ(ErrorOf([] { ParseBytes("x"); }), "expected a size like 80GiB, got 'x'");
  EXPECT_EQ(ErrorOf([] { ParseBytes(""); }), "expected a size like 80GiB, got '' (empty)");
  EXPECT_EQ(ErrorOf([] { ParseBytes("-1GiB"); }), "expected a size like 80GiB, got '-1GiB' (negative)");
  EXPECT_NE(ErrorOf([] { ParseBytes("80GiBs"); }).find("got '80GiBs' (units: B, KB"), std::string::npos);
  EXPECT_NE(ErrorOf([] { ParseBytes("80gib"); }), "");
  EXPECT_NE(ErrorOf([] { ParseBytes("1.2.3GB"); }), "");
  EXPECT_NE(ErrorOf([] { ParseBytes("inf"); }), "");
  EXPECT_NE(ErrorOf([] { ParseBytes("nan"); }), "");
  EXPECT_NE(ErrorOf([] { ParseBytes("+5"); }), "");
  EXPECT_NE(ErrorOf([] { ParseBytes("GiB"); }), "");
  EXPECT_EQ(ErrorOf([] { ParseBytes("9223372036854775808"); }),
            "expected a size like 80GiB, got '9223372036854775808' (too large)");
  EXPECT_EQ(ErrorOf([] { ParseBytes("9300PB"); }), "expected a size like 80GiB, got '9300PB' (too large)");
  EXPECT_EQ(ErrorOf([] { ParseBytes("8388608TiB"); }), "expected a size like 80GiB, got '8388608TiB' (too large)");
  EXPECT_NE(ErrorOf([] { ParseBytes("1e400"); }).find("too large"), std::string::npos);
}

TEST(ParseBandwidth, BytesAndBits) {
  EXPECT_DOUBLE_EQ(ParseBandwidth("50GB/s"), 50e9);
  EXPECT_DOUBLE_EQ(ParseBandwidth("450GB/s"), 450e9);
  EXPECT_DOUBLE_EQ(ParseBandwidth("400Gbps"), 50e9);
  EXPECT_DOUBLE_EQ(ParseBandwidth("100Mbps"), 12.5e6);
  EXPECT_DOUBLE_EQ(ParseBandwidth("25 GiB/s"), 25.0 * 1024 * 1024 * 1024);
  EXPECT_DOUBLE_EQ(ParseBandwidth("1B/s"), 1.0);
  EXPECT_DOUBLE_EQ(ParseBandwidth("8bps"), 1.0);
  EXPECT_DOUBLE_EQ(ParseBandwidth("200Gb/s"), 25e9);
  EXPECT_DOUBLE_EQ(ParseBandwidth("10GBps"), 10e9);
  EXPECT_DOUBLE_EQ(ParseBandwidth("1.5TB/s"), 1.5e12);
}

TEST(ParseBandwidth, Errors) {
  EXPECT_EQ(ErrorOf([] { ParseBandwidth("400"); }),
            "expected a bandwidth like 50GB/s or 400Gbps, got '400' (missing unit)");
  EXPECT_NE(ErrorOf([] { ParseBandwidth("50GB"); }), "");
  EXPECT_NE(ErrorOf([] { ParseBandwidth("50 GiBps/s"); }), "");
  EXPECT_EQ(ErrorOf([] { ParseBandwidth("-5GB/s"); }),
            "expected a bandwidth like 50GB/s or 400Gbps, got '-5GB/s' (negative)");
  EXPECT_NE(ErrorOf([] { ParseBandwidth("fast"); }), "");
}

TEST(ParseDurationNs, Units) {
  EXPECT_EQ(ParseDurationNs("0"), 0);
  EXPECT_EQ(ParseDurationNs("0.0"), 0);
  EXPECT_EQ(ParseDurationNs("300ns"), 300);
  EXPECT_EQ(ParseDurationNs("2us"), 2000);
  EXPECT_EQ(ParseDurationNs("2\xC2\xB5s"), 2000);
  EXPECT_EQ(ParseDurationNs("1ms"), 1'000'000);
  EXPECT_EQ(ParseDurationNs("1.5s"), 1'500'000'000);
  EXPECT_EQ(ParseDurationNs("12.3 ms"), 12'300'000);
  EXPECT_EQ(ParseDurationNs("0.5ns"), 1);  // rounded to nearest, halves away from zero
  EXPECT_EQ(ParseDurationNs("0us"), 0);
}

TEST(ParseDurationNs, Errors) {
  EXPECT_EQ(ErrorOf([] { ParseDurationNs("5"); }),
            "expected a duration like 2us or 1.5ms, got '5' (missing unit: ns, us, ms or s)");
  EXPECT_EQ(ErrorOf([] { ParseDurationNs("-2us"); }), "expected a duration like 2us or 1.5ms, got '-2us' (negative)");
  EXPECT_NE(ErrorOf([] { ParseDurationNs("2 hours"); }), "");
  EXPECT_NE(ErrorOf([] { ParseDurationNs("us"); }), "");
  EXPECT_NE(ErrorOf([] { ParseDurationNs("1e30s"); }).find("too large"), std::string::npos);
}

TEST(ParseFlops, Prefixes) {
  EXPECT_DOUBLE_EQ(ParseFlops("989TFLOPS"), 989e12);
  EXPECT_DOUBLE_EQ(ParseFlops("1.2PFLOPS"), 1.2e15);
  EXPECT_DOUBLE_EQ(ParseFlops("500GFLOPS"), 500e9);
  EXPECT_DOUBLE_EQ(ParseFlops("50GFlops"), 50e9);
  EXPECT_DOUBLE_EQ(ParseFlops("362 TFLOP/s"), 362e12);
  EXPECT_DOUBLE_EQ(ParseFlops("7FLOPS"), 7.0);
  EXPECT_DOUBLE_EQ(ParseFlops("1EFLOPS"), 1e18);  // the top of topology.device.peak's range
}

// The unbounded forms, for range checks that name their limit whatever the magnitude: the same
// units and errors, no int64 bound.
TEST(ParseAsDouble, SameUnitsNoInt64Bound) {
  EXPECT_DOUBLE_EQ(ParseBytesAsDouble("1.5GB"), 1.5e9);
  EXPECT_DOUBLE_EQ(ParseBytesAsDouble("2PiB"), 2.0 * 1024 * 1024 * 1024 * 1024 * 1024);
  EXPECT_DOUBLE_EQ(ParseBytesAsDouble("1e30"), 1e30);  // ParseBytes: too large
  EXPECT_DOUBLE_EQ(ParseDurationNsAsDouble("2us"), 2000);
  EXPECT_DOUBLE_EQ(ParseDurationNsAsDouble("1e30s"), 1e39);  // ParseDurationNs: too large
  EXPECT_DOUBLE_EQ(ParseDurationNsAsDouble("0"), 0);
  EXPECT_EQ(ErrorOf([] { ParseDurationNsAsDouble("5"); }),
            "expected a duration like 2us or 1.5ms, got '5' (missing unit: ns, us, ms or s)");
  EXPECT_EQ(ErrorOf([] { ParseBytesAsDouble("-1GiB"); }), "expected a size like 80GiB, got '-1GiB' (negative)");
  EXPECT_NE(ErrorOf([] { ParseDurationNsAsDouble("1e400s"); }).find("too large"), std::string::npos);
}

TEST(ParseFlops, Errors) {
  EXPECT_EQ(ErrorOf([] { ParseFlops("989"); }), "expected a compute rate like 989TFLOPS, got '989' (missing unit)");
  EXPECT_NE(ErrorOf([] { ParseFlops("989TB"); }), "");
  EXPECT_NE(ErrorOf([] { ParseFlops("989XFLOPS"); }), "");
  EXPECT_NE(ErrorOf([] { ParseFlops("-1TFLOPS"); }).find("negative"), std::string::npos);
}

}  // namespace
}  // namespace stagecraft::sim
