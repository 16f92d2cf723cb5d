// Unit strings of scenario files (DESIGN.md §3): sizes, bandwidths, durations and compute
// rates, parsed strictly (a typo is an error, never a silently different number). The short
// human formats of summaries are base/format.h's.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "stagecraft/base/error.h"
#include "stagecraft/base/format.h"

namespace stagecraft::sim {

// All parsers accept a non-negative decimal number ("2", "1.5", ".5", "1e3"), optional blanks,
// then a unit. They throw stagecraft::InputError ("expected a size like 80GiB, got 'x'") on an
// empty string, a sign, garbage, an unknown unit or a result that does not fit.

// Bytes. Decimal units B, KB, MB, GB, TB, PB (powers of 1000) and binary units KiB, MiB, GiB,
// TiB, PiB (powers of 1024); a plain number means bytes. Fractions round to the nearest byte
// ("1.5GB" = 1500000000).
int64_t ParseBytes(std::string_view text);

// Bandwidth in bytes per second. Bytes: B/s, KB/s, MB/s, GB/s, TB/s, KiB/s .. TiB/s (also
// spelled GBps). Bits: bps, Kbps, Mbps, Gbps, Tbps (also spelled Gb/s), divided by 8.
// A unit is required: "400" alone is ambiguous between bits and bytes.
double ParseBandwidth(std::string_view text);

// Duration in nanoseconds: ns, us (or µs), ms, s, rounded to the nearest nanosecond.
// A unit is required except for zero ("0" is accepted, "5" is not).
int64_t ParseDurationNs(std::string_view text);

// The same sizes and durations as doubles, unbounded (finite): for range checks that name their
// limit whatever the magnitude ("1e30s" is over 1 h, not only over int64).
double ParseBytesAsDouble(std::string_view text);
double ParseDurationNsAsDouble(std::string_view text);

// Compute rate in FLOP/s: FLOPS, KFLOPS, MFLOPS, GFLOPS, TFLOPS, PFLOPS, EFLOPS (the "FLOPS"
// part case-insensitive, "FLOP/s" also accepted). A unit is required.
double ParseFlops(std::string_view text);

}  // namespace stagecraft::sim
