// splitmix64 (Steele, Lea & Flood, 2014): a bijective 64-bit mixer, so distinct inputs (counters,
// seeds, op places) give independent-looking values. The executor's synthetic weights and data
// and the simulator's op-time draws both derive their randomness from it.
#pragma once

#include <cstdint>

namespace stagecraft {

constexpr uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace stagecraft
