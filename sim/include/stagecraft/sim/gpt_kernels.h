// The kernels of a GPT stage (DESIGN.md §9): one description of what a transformer block, the
// embeddings, the LM head with its loss, and the optimizer step run on a device, kernel by
// kernel, with each kernel's shape and the pass it belongs to (F, I = the backward for inputs,
// W = the backward for weights, STEP). The roofline cost model (roofline.h) times this list;
// the executor's GPT stage (exec/gpt.h) runs the same kernels in the same passes, which
// tests/exec/gpt_kernels_match_test.cpp checks call by call.
//
// The block is Megatron-LM's (Shoeybi et al. 2019; Narayanan et al. SC'21) and GPT-2's: pre-LN,
// fused QKV, causal softmax attention, a 4h GELU MLP, bias and dropout fused into one kernel
// after each projection (Megatron's bias-dropout-add), bias fused into GELU, softmax fused with
// its scale and mask. With tensor parallelism T (Megatron's column / row split) each device
// runs the GEMMs with N or K divided by T and a / T heads; with sequence parallelism the
// LayerNorms and the dropout-adds run on s / T of the rows.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "stagecraft/scenario/enum_names.h"
#include "stagecraft/scenario/recompute.h"

namespace stagecraft::sim {

// The pass a kernel runs in: F, I (input gradients, the B of 1F1B without its W), W (weight
// gradients), STEP (the optimizer).
enum class KernelPass { kF, kI, kW, kStep };
inline constexpr EnumName<KernelPass> kKernelPassNames[] = {
    {KernelPass::kF, "F"}, {KernelPass::kI, "I"}, {KernelPass::kW, "W"}, {KernelPass::kStep, "STEP"}};
constexpr std::string_view Name(KernelPass pass) { return NameIn(kKernelPassNames, pass); }

// What times a kernel: a GEMM (tensor cores, the device's GEMM model), a batched GEMM
// (attention's), a memory-bound kernel (bytes over the memory bandwidth), or a tensor-parallel
// collective over the tensor group (the links).
enum class KernelClass { kGemm, kBatchedGemm, kMemory, kCollective };
inline constexpr EnumName<KernelClass> kKernelClassNames[] = {{KernelClass::kGemm, "gemm"},
                                                              {KernelClass::kBatchedGemm, "batched_gemm"},
                                                              {KernelClass::kMemory, "memory"},
                                                              {KernelClass::kCollective, "collective"}};
constexpr std::string_view Name(KernelClass c) { return NameIn(kKernelClassNames, c); }

// A tensor-parallel collective's kind (Megatron: all-reduce; with sequence parallelism an
// all-gather before and a reduce-scatter after each parallel region), or the context group's ring
// of key-value exchanges (kContextRing: C - 1 steps over the context group's link, each passing on
// one device's chunk, bytes the whole sequence's; each step beside the fused attention's work on
// the chunk before, so only what the steps outlast that work costs: roofline.h TimeKernels).
enum class CollectiveKind { kNone, kAllReduce, kAllGather, kReduceScatter, kContextRing };

struct Kernel {
  std::string name;  // "qkv", "qkv.dX", "softmax", ...
  KernelPass pass = KernelPass::kF;
  KernelClass kind = KernelClass::kMemory;
  // GEMMs: C[m x n] = A[m x k] · B[k x n], `batch` times.
  int64_t m = 0, n = 0, k = 0, batch = 1;
  double flops = 0;  // 2·m·n·k·batch for GEMMs; the arithmetic of a memory-bound kernel
  double bytes = 0;  // read + written in device memory (a collective: the tensor's bytes)
  CollectiveKind collective = CollectiveKind::kNone;
  // A backward collective that the framework runs beside a weight-gradient GEMM when the
  // backward is one op (Megatron-LM's asynchronous tensor-parallel all-reduce, or with sequence
  // parallelism its reduce-scatter, started before the column-parallel layer's dW GEMM): that
  // GEMM's name; empty: none. See TensorParallelOverlapNs (roofline.h).
  std::string beside;
  // training.fp8: a GEMM on the device's FP8 tensor cores (its two operands one byte an element).
  bool fp8 = false;
  // With fp8, block-scaled (training.fp8_scaling blockwise): timed with the device's
  // gemm.fp8_blockwise constants.
  bool fp8_blockwise = false;
  // A collective over the context group (pipeline.context_parallel) rather than the tensor group.
  bool context_group = false;
};

// The GPT configuration a stage's kernels are listed for.
struct GptKernelShape {
  int64_t microbatch = 1;  // b
  int64_t seq = 1;         // s
  int64_t hidden = 1;      // h
  int64_t heads = 1;       // a
  int64_t vocab = 1;       // V
  int tensor_parallel = 1;         // T
  bool sequence_parallel = false;
  int dtype_bytes = 2;             // the activations' and weights' element size
  bool dropout = true;             // Megatron's dropouts (the executor's block has none)
  // The Llama family's (model.transformer): the feed-forward's width (0: 4h), SwiGLU's gate and
  // up in one GEMM of 2f and its fused activation in place of GELU's, and the key-value heads of
  // grouped-query attention (0: heads; the attention GEMMs run per query head either way).
  int64_t ffn = 0;
  bool swiglu = false;
  int64_t kv_heads = 0;
  int64_t head_dim = 0;  // 0: hidden / heads (model.transformer.head_dim)
  // model.transformer.attention: flash: one fused causal kernel in F (its two matmuls over the
  // causal half of the scores) and one in I (five: the scores again, dP, dV, dQ, dK), timed as
  // batched GEMMs at the device's GEMM model, reading and writing only Q, K, V, O and their
  // gradients; no softmax, dropout or recompute kernels.
  bool flash = false;
  // The layer's sliding window (model.transformer.sliding_window; 0: none, the whole causal past):
  // its flash kernel's matmuls run over CausalKeysPerQuery(s, window) keys a query.
  int64_t window = 0;
  // C (pipeline.context_parallel): `seq` is the device's s / C tokens of each sequence, whose
  // queries the flash kernel scores against the whole sequence's keys (C x seq, load-balanced: on
  // average half of them), which reach it round the context group's ring (`cp_ring` in F, beside
  // `flash_attention`; `cp_ring.dX` in I, the keys and values again and their gradients, beside
  // `flash_attention.dX`: Transformer Engine's P2P context parallelism).
  int context_parallel = 1;
  // pipeline.context_parallel_comm all_gather: in place of the ring, `cp_all_gather` of the whole
  // sequence's keys and values before the attention in F, and in I `cp_all_gather.dX` (them again)
  // and `cp_reduce_scatter.dX` (their gradients), none beside the attention.
  bool context_all_gather = false;
  // training.fp8: the linear layers' GEMMs in FP8 (Kernel::fp8), each F GEMM's input and each
  // input-gradient GEMM's incoming gradient cast by a kernel of its own (`<gemm>.cast`: the 16-bit
  // tensor read, its FP8 copy and the transposed one the weight gradient reads written); attention's
  // scores and context, the router and the LM head stay 16-bit.
  bool fp8 = false;
  // training.fp8_scaling current: each cast reads its input once more first, for its maximum.
  bool fp8_amax_pass = false;
  // training.fp8_scaling blockwise: its FP8 GEMMs are block-scaled (Kernel::fp8_blockwise).
  bool fp8_blockwise = false;
  // training.fp8_dispatch: the experts' FP8 inputs cast before the dispatch, on the device's tokens
  // (not on their routed copies after it): `expert.fc.cast` in F and `expert.fc2.dX.cast` (the
  // combine's gradient) in I; the permutation in F moves FP8 elements (kFp8ScaledElementBytes).
  bool fp8_dispatch = false;
  // model.transformer.bias: the attention's and dense feed-forward's biases, added in F (qkv's
  // kernel; the others fused into the activation and the dropout-adds) and summed in W (.db).
  bool bias = true;
  // Mixture-of-experts layers (model.transformer.moe; GptBlockKernels' `moe_layer`): the
  // router's experts, the copies of each token routed (top_k x the capacity factor), the experts
  // one device holds (experts / E) and their width, and the shared experts' total width.
  int64_t experts = 0;
  double routed = 1;
  int64_t local_experts = 1;
  int64_t expert_ffn = 0;
  int64_t shared_ffn = 0;
  // pipeline.moe_dispatcher: deepep: the routed copies are permuted into expert order once, after
  // DeepEP's dispatch, and back once before its combine. alltoall (Megatron-LM's
  // MoEAlltoAllTokenDispatcher): permuted into expert order before the dispatch, and with more
  // than one local expert the received chunks sorted by local expert after it and back before the
  // combine (`sort_chunks_by_idxs`): one more permutation each way.
  bool deepep = false;
  // Multi-head latent attention (model.transformer.mla): the queries' latent rank (0: one
  // projection), the keys' and values' latent rank, the rotary part of each query and key (one
  // rotary key every head shares) and the values' width (0: head_dim). Its downs and RMSNorms run
  // whole on every device of a tensor group; its ups and the projection are split by heads.
  bool mla = false;
  int64_t q_lora = 0;
  int64_t kv_lora = 0;
  int64_t rope_head_dim = 0;
  int64_t v_head_dim = 0;
  // The gradients' bytes an element, what the weight-gradient GEMMs accumulate into (Megatron's
  // main_grad) and the optimizer reads: training.grad_dtype (TrainingSpec::GradBytes); 0: the dtype's.
  int grad_bytes = 0;
  int main_grad_bytes() const { return grad_bytes > 0 ? grad_bytes : dtype_bytes; }
};

// An element sent in FP8 with its share of a float scale per 128 elements (DeepEP's and
// DeepSeek-V3's 1 x 128 tiles): training.fp8_dispatch's bytes an element.
inline constexpr double kFp8ScaledElementBytes = 1.0 + 4.0 / 128.0;

// The whole sequence's keys and values on one device's heads (MLA's: every head's own), the bytes
// the context group's exchanges move in F for one microbatch (GptKernelShape::context_parallel).
double ContextKvBytes(const GptKernelShape& g);

// One transformer block's kernels, F then I then W, in the order a device runs them. A MoE
// layer's (`moe_layer`) feed-forward is the router (a GEMM to the experts' logits, its top-k),
// the permutation of the routed token copies into expert order, the experts' grouped GEMMs (a
// batch of the local experts, each its even share of the rows; with Megatron's all-to-all
// dispatcher and several local experts the received chunks sorted by expert around them:
// GptKernelShape::deepep), the unpermutation with the
// router's weights, and the shared experts as a dense feed-forward split over the tensor group;
// its tokens are the device's sequence share, and the all-to-alls between the permutations are
// the ALL_TO_ALL op's, not listed here.
std::vector<Kernel> GptBlockKernels(const GptKernelShape& shape, bool moe_layer = false);
// The token and position embeddings of the first stage (F: gather and add; W: the scatter-add
// of their gradients); with T > 1 the vocabulary-parallel embedding's all-reduce.
std::vector<Kernel> GptEmbeddingKernels(const GptKernelShape& shape);
// The final LayerNorm, the LM head and the cross-entropy loss of the last stage.
std::vector<Kernel> GptHeadKernels(const GptKernelShape& shape);
// What recomputation repeats inside I, as kernels of pass I named `recompute.<forward's>`: the
// whole block's F (full), or the F kernels of the modules a selective recompute names
// (recompute.h: core_attn, attention's scores, softmax, dropout and context, Korthikanti et al.
// 2022; a MoE layer's `moe` also its all-to-alls, which the cost model's all-to-all count holds).
std::vector<Kernel> GptRecomputeKernels(const GptKernelShape& shape, const RecomputeModules& modules,
                                        bool moe_layer = false);
// Full recompute (`full`), or selective of core_attn alone.
std::vector<Kernel> GptRecomputeKernels(const GptKernelShape& shape, bool full, bool moe_layer = false);
// The optimizer step over `params` parameters of one device: clearing the gradients, the
// gradient norm (clipping) and the update, each one memory-bound pass;
// `update_bytes_per_param` is what the update reads and writes per parameter.
std::vector<Kernel> OptimizerStepKernels(double params, int main_grad_bytes, double update_bytes_per_param);
// training.fp8: the FP8 copies of `params` 16-bit weights (and their transposes) made once a step
// (Transformer Engine keeps them through a step's microbatches), as one memory-bound kernel of the
// STEP, `fp8_weight_cast`.
std::vector<Kernel> Fp8WeightCastKernels(double params, int dtype_bytes, bool amax_pass = false);
// The names of every memory-bound kernel the lists above hold (recomputed ones under their own
// names), sorted, computed once: what a device's `memory_kernels` may name.
const std::vector<std::string>& MemoryKernelNames();

}  // namespace stagecraft::sim
