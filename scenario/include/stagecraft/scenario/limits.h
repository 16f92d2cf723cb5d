// The range of every duration, rate, size and count that a scenario, topology or profile states,
// and the limits on what the simulator derives from them (docs/reliability.md). Each sits far
// outside real use, yet close enough that no arithmetic on values in range can overflow.
#pragma once

#include <cstdint>

namespace stagecraft::sim {

// Stated values, checked where they are parsed (an InputError naming the key and the limit):
//
//   key                                              range                   why
//   durations: model.costs.forward, backward_input,  0 .. 1 h                the limit per op: int64 ns
//     backward_weight, p2p_latency; link latency;                            hold 292 years, so sums of
//     profile layer times, input_copy, loss,                                 millions of ops stay exact
//     op_overhead, p2p.latency
//   bandwidths: links, profile p2p                   1 KB/s .. 10 PB/s        a byte never takes over 1 ms
//                                                                            per link, and 1/bandwidth
//                                                                            sums stay exact (ratio 1e13)
//   topology.device.peak                             1 MFLOPS .. 1 EFLOPS
//   topology.device.efficiency, memory_efficiency,   0.001 .. 1
//     gemm.max_efficiency, gemm.batched_efficiency,
//     gemm.fp8.max_efficiency (read from YAML only)
//   topology.device.memory_kernels (each rate)       0.001 .. 2
//   topology.device.gemm.sms                         1 .. 2^16
//   topology.device.gemm.tiles (m, n), k_overhead,   1 .. 2^16 (k_overhead from 0)
//     gemm.fp8.k_overhead
//   sizes: topology.device.memory (from 1 B),        0 .. 1 PiB per value    sums of 2^13 of them fit
//     model.costs.*_bytes, profile *_bytes                                   int64
//   pipeline.ranks; topology devices                 1 .. 2^16 (65,536)
//   pipeline.chunks                                  1 .. 2^10; stages = ranks x chunks <= 2^20
//   pipeline.microbatches                            1 .. 2^24
//   pipeline.steps                                   1 .. 2^20
//   pipeline.microbatch_size, profile's              1 .. 2^24
//   model.*.layers, profile layers                   1 .. 2^20
//   model.*.hidden                                   1 .. 2^20
//   model.transformer.heads                          1 .. 2^16
//   model.transformer.seq, vocab                     1 .. 2^24
//   explicit topology graph                          2^12 vertices, 2^16 links (a route search per
//                                                    pair of ranks that talk visits the graph: 4,095
//                                                    ranks around one switch load and simulate in 1.3 s)
//   training.lr                                      > 0, finite             executor only (a huge lr is
//                                                                            how divergence is tested)
//   profile op scales; op_time_cv                    (0, 1000]; 0 .. 10
//   profile stash depths; stash slopes                0 .. 2^20; 0 .. 1
//
// Derived values, checked once the costs are built (an InputError naming the keys they came
// from): every op's time (analytical FLOPs / (peak x efficiency), explicit or profiled sums) and
// every transfer's time alone on its route (latency + bytes / bandwidth) at most kMaxOpNs; every
// derived size at most kMaxValueBytes; and a whole run's simulated time, bounded by the sum of
// every op's time and every transfer's time alone, at most kMaxRunNs.

inline constexpr int64_t kNsPerS = 1'000'000'000;
inline constexpr int64_t kMaxOpNs = 3600 * kNsPerS;                          // 1 h
inline constexpr int64_t kMaxRunNs = int64_t{31'557'600} * kNsPerS;          // 1 year (365.25 days)
inline constexpr int64_t kMaxValueBytes = int64_t{1} << 50;                  // 1 PiB
inline constexpr double kMinBandwidthBytesPerS = 1e3;                        // 1 KB/s
inline constexpr double kMaxBandwidthBytesPerS = 1e16;                       // 10 PB/s
inline constexpr double kMinPeakFlops = 1e6;                                 // 1 MFLOPS
inline constexpr double kMaxPeakFlops = 1e18;                                // 1 EFLOPS
inline constexpr double kMinEfficiency = 1e-3;
// topology.device.memory_kernels: a kernel's rate relative to memory_efficiency's.
inline constexpr double kMaxMemoryKernelRate = 2;

inline constexpr int kMaxRanks = 1 << 16;
inline constexpr int kMaxDevices = 1 << 16;         // also the most replicas (pipeline.data_parallel)
inline constexpr int kMaxTensorParallel = 1 << 10;
inline constexpr int kMaxChunks = 1 << 10;
inline constexpr int kMaxStages = 1 << 20;
inline constexpr int kMaxMicrobatches = 1 << 24;
inline constexpr int kMaxSteps = 1 << 20;
// pipeline.search_evaluations: the moves `schedule: auto` tries (each one simulation of a step).
inline constexpr int64_t kDefaultSearchEvaluations = 2000;
inline constexpr int64_t kMaxSearchEvaluations = 100'000'000;
// pipeline.zb_refine_nodes: branch-and-bound nodes of the Zero Bubble refinement.
inline constexpr int64_t kMaxZbRefineNodes = 1'000'000'000;
inline constexpr int kMaxMicrobatchSize = 1 << 24;
inline constexpr int kMaxLayers = 1 << 20;
inline constexpr int kMaxHidden = 1 << 20;
inline constexpr int kMaxHeads = 1 << 16;
inline constexpr int kMaxSeq = 1 << 24;
inline constexpr int kMaxVocab = 1 << 24;
// model.transformer.moe.experts (and top_k, shared_experts), pipeline.expert_parallel.
inline constexpr int kMaxExperts = 1 << 16;
inline constexpr int kMaxStreamingMultiprocessors = 1 << 16;
inline constexpr int kMaxGemmTile = 1 << 16;
inline constexpr int kMaxGraphVertices = 1 << 12;
inline constexpr int kMaxGraphLinks = 1 << 16;
inline constexpr double kMaxOpScale = 1000;
inline constexpr double kMaxOpTimeCv = 10;
inline constexpr double kMaxStashDepth = 1 << 20;  // microbatches of activations held
inline constexpr double kMaxStashSlope = 1;         // relative time per microbatch held

}  // namespace stagecraft::sim
