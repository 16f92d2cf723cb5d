// model.transformer as plain data (DESIGN.md §3, §10): a GPT-2-style decoder block, the Llama
// family's choices (feed-forward width, SwiGLU, grouped-query attention, tied embeddings) and
// mixture-of-experts layers, with the parameter and model-FLOP counts every part reads.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "stagecraft/scenario/enum_names.h"

namespace stagecraft::sim {

// GPT-2-style decoder (the analytical model's formulas are in sim/src/transformer_costs.cpp). Its
// precision is training.dtype's (YAML may also state it as model.transformer.dtype).
// model.transformer.activation: the feed-forward's, GPT's GELU (up, GELU, down) or the Llama
// family's SwiGLU (gate and up, SiLU(gate)·up, down: three matrices of ffn_hidden).
enum class FfnActivation : uint8_t { kGelu, kSwiglu };
inline constexpr EnumName<FfnActivation> kFfnActivationNames[] = {{FfnActivation::kGelu, "gelu"},
                                                                  {FfnActivation::kSwiglu, "swiglu"}};
constexpr std::string_view Name(FfnActivation a) { return NameIn(kFfnActivationNames, a); }

// How attention runs (model.transformer.attention): Megatron-LM's unfused kernels (the scores
// materialised, softmax and dropout each a kernel: SC'21's and Korthikanti et al.'s runs), or one
// fused causal kernel (FlashAttention, cuDNN's fused attention: Transformer Engine's default),
// which computes the causal half of the scores, keeps none of them and recomputes them in its
// backward.
enum class AttentionKernel : uint8_t { kUnfused, kFlash };
inline constexpr EnumName<AttentionKernel> kAttentionKernelNames[] = {{AttentionKernel::kUnfused, "unfused"},
                                                                      {AttentionKernel::kFlash, "flash"}};

// Mixture-of-experts layers (model.transformer.moe; Shazeer et al. 2017, GShard, Switch,
// Mixtral, DeepSeek-V3): a MoE layer's feed-forward is `experts` routed experts, each a
// feed-forward of expert_hidden (the model's activation, no biases), of which a router (a linear
// layer of h -> experts, top-k of its softmax) sends each token to `top_k`, plus `shared_experts`
// every token passes through. Layer l (from 0) is a MoE layer when l >= first_dense and
// (l - first_dense) % every == 0 (Megatron-LM's moe_layer_freq, DeepSeek-V3's
// first_k_dense_replace); the others are dense. capacity_factor > 0: each expert takes at most
// that multiple of its even share of the tokens, padded to it (GShard, Megatron-LM's
// moe_expert_capacity_factor with pad_expert_input_to_capacity); 0: dropless, every routed token
// computed, the routing taken as balanced unless load_imbalance says how much more than its even
// share the busiest device computes (every device of the expert group waits for it at the combine,
// so each is charged its time: its experts' rows, its permutations and its all-to-alls' bytes; a
// trained router's figure, from its own statistics; the model FLOPs, useful work, and the memory,
// do not change).
struct MoeSpec {
  int experts = 0;
  int top_k = 1;
  int expert_hidden = 0;  // 0: the dense feed-forward's width
  int shared_experts = 0;
  int every = 1;
  int first_dense = 0;
  double capacity_factor = 0;  // 0: dropless
  double load_imbalance = 1;   // dropless: the busiest device's routed rows over the even share
  // Node-limited routing (DeepSeek-V3 §2.1.2, M = 4; Megatron-LM's --moe-router-group-topk with a
  // group a node): each token's experts on at most this many nodes of its expert group; 0: none.
  int node_limit = 0;

  constexpr bool IsMoeLayer(int layer) const { return layer >= first_dense && (layer - first_dense) % every == 0; }
  // The routed tokens' multiple of top_k that the experts compute: the capacity, else (dropless)
  // the busiest device's share, 1 balanced.
  constexpr double TokenFactor() const { return capacity_factor > 0 ? capacity_factor : load_imbalance; }
  // The same for the activations a device keeps: the capacity, else 1 (the busiest device is a
  // different one from layer to layer, so a stage's memory holds about the even share).
  constexpr double KeptFactor() const { return capacity_factor > 0 ? capacity_factor : 1.0; }
};

// Multi-head latent attention (model.transformer.mla; DeepSeek-V2 and V3, Megatron-LM's
// MLASelfAttention): the queries through a rank-q_lora_rank latent (down, RMSNorm, up; 0: one
// projection h -> heads x (head_dim + rope_head_dim)), the keys and values through a shared
// latent of kv_lora_rank (down with one rope_head_dim-wide key every head shares, RMSNorm, up to
// each head's head_dim-wide key part and v_head_dim-wide value); the scores over head_dim +
// rope_head_dim, the output projection from heads x v_head_dim. No biases; no grouped heads.
struct MlaSpec {
  int q_lora_rank = 0;
  int kv_lora_rank = 0;
  int rope_head_dim = 0;
  int v_head_dim = 0;  // 0: head_dim
};

// Sliding-window attention (model.transformer.sliding_window; Mistral 7B, Gemma 2 and 3, GPT-OSS;
// Megatron-LM's window_size and window_attn_skip_freq): in a windowed layer each query attends to
// itself and the size - 1 keys before it. Layer l (from 0) attends to its whole causal past when
// full_every > 0 and (l + 1) % full_every == 0 (GPT-OSS: every second layer, from the second;
// Gemma 3: every sixth); with full_every 0 every layer is windowed. A fused kernel (attention:
// flash) computes only the keys inside the window; what it keeps does not change (none of the
// scores).
struct WindowSpec {
  int size = 0;
  int full_every = 0;

  constexpr bool IsWindowed(int layer) const { return full_every == 0 || (layer + 1) % full_every != 0; }
};

// The keys a query of a causal sequence of `seq` attends to on average: (1 + 2 + ... + seq) / seq
// over the whole past, taken as seq / 2 (the causal half); within a window of `window` < seq keys
// (sum over the queries of min(i + 1, window), over seq) window - window (window - 1) / (2 seq).
// `window` 0 (or >= seq): the whole past.
constexpr double CausalKeysPerQuery(double seq, double window) {
  if (window <= 0 || window >= seq) return seq / 2;
  return window - window * (window - 1) / (2 * seq);
}

struct TransformerSpec {
  int layers = 0;
  int hidden = 0;
  int heads = 0;
  int seq = 0;
  int vocab = 0;
  // Megatron-LM's dropouts (attention probabilities, after each projection, the embeddings),
  // which the roofline model times (sim/gpt_kernels.h); the executor's block has none.
  bool dropout = true;
  // The Llama family's choices (DESIGN.md §10): the feed-forward's width (0: 4 × hidden) and
  // activation, the key-value heads of grouped-query attention (0: heads, multi-head attention),
  // and whether the LM head is the token embedding (tied: one copy when one stage holds both;
  // a pipeline keeps a copy on its last stage either way, as Megatron-LM does).
  int ffn_hidden = 0;
  FfnActivation activation = FfnActivation::kGelu;
  int kv_heads = 0;
  bool tied_embeddings = false;
  // Each attention head's width (Megatron-LM's kv_channels; 0: hidden / heads), where the query
  // heads together are wider than the model (Qwen3's 64 heads of 128 in a hidden of 4096).
  int head_dim = 0;
  AttentionKernel attention = AttentionKernel::kUnfused;
  // Whether the attention's and the dense feed-forward's linear layers have biases (GPT's); the
  // Llama family, Mixtral and Qwen3 have none (Megatron-LM's --disable-bias-linear).
  bool bias = true;
  // Mixture-of-experts layers (model.transformer.moe); none: every layer dense.
  std::optional<MoeSpec> moe;
  // Multi-head latent attention (model.transformer.mla); none: the heads' own Q, K and V.
  std::optional<MlaSpec> mla;
  // Sliding-window attention (model.transformer.sliding_window); none: every layer attends to its
  // whole causal past.
  std::optional<WindowSpec> window;

  constexpr int64_t Ffn() const { return ffn_hidden > 0 ? ffn_hidden : int64_t{4} * hidden; }
  constexpr int64_t KvHeads() const { return kv_heads > 0 ? kv_heads : heads; }
  // The width of the keys (and of the values): kv heads of hidden / heads each.
  constexpr int64_t HeadDim() const { return head_dim > 0 ? head_dim : heads > 0 ? hidden / heads : 0; }
  // A query's (and a key's) width per head, HeadDim() + MLA's rotary part; a value's, HeadDim()
  // or MLA's v_head_dim.
  constexpr int64_t QkHeadDim() const { return HeadDim() + (mla ? mla->rope_head_dim : 0); }
  constexpr int64_t VHeadDim() const { return mla && mla->v_head_dim > 0 ? mla->v_head_dim : HeadDim(); }
  // The queries' width, heads x QkHeadDim(); the attention's output (the projection's input),
  // heads x VHeadDim(); both heads x HeadDim() without MLA.
  constexpr int64_t QWidth() const { return heads * QkHeadDim(); }
  constexpr int64_t OWidth() const { return heads * VHeadDim(); }
  constexpr int64_t KvWidth() const { return KvHeads() * HeadDim(); }
  // 2 for SwiGLU's gate and up, 1 for GELU's up.
  constexpr int64_t Ups() const { return activation == FfnActivation::kSwiglu ? 2 : 1; }
  // One expert's width (moe.expert_hidden, else the dense feed-forward's); 0 without experts.
  constexpr int64_t ExpertFfn() const { return !moe ? 0 : moe->expert_hidden > 0 ? moe->expert_hidden : Ffn(); }
  // Whether layer `layer` (from 0) is a mixture-of-experts layer.
  constexpr bool IsMoeLayer(int layer) const { return moe && moe->IsMoeLayer(layer); }
  // The MoE layers among layers [first, first + count).
  constexpr int MoeLayersIn(int first, int count) const {
    int n = 0;
    for (int l = first; l < first + count; ++l) n += IsMoeLayer(l) ? 1 : 0;
    return n;
  }
  // Whether layer `layer` (from 0) attends within a sliding window, and how many of layers
  // [first, first + count) do.
  constexpr bool IsWindowedLayer(int layer) const { return window && window->IsWindowed(layer); }
  constexpr int WindowedLayersIn(int first, int count) const {
    int n = 0;
    for (int l = first; l < first + count; ++l) n += IsWindowedLayer(l) ? 1 : 0;
    return n;
  }
  // The sliding window where it is shorter than the sequence (one no shorter changes nothing a
  // windowed layer runs), else 0; and layer `layer`'s: that window where the layer is windowed.
  constexpr int ShorterWindow() const { return window && window->size < seq ? window->size : 0; }
  constexpr int WindowOf(int layer) const { return IsWindowedLayer(layer) ? ShorterWindow() : 0; }
  // The keys a query of layer kind `windowed` is scored against by the model-FLOP count's
  // convention (the whole square, no causal half): the sequence, or the window where shorter.
  constexpr double CountedKeys(bool windowed) const {
    return windowed && ShorterWindow() > 0 ? ShorterWindow() : static_cast<double>(seq);
  }
  // The GPT-2 block the executor builds: GELU of 4 × hidden, multi-head attention, untied head.
  constexpr bool IsGpt2Block() const {
    return Ffn() == int64_t{4} * hidden && activation == FfnActivation::kGelu && KvHeads() == heads &&
           !tied_embeddings && !moe && !mla && !window && QWidth() == hidden && attention == AttentionKernel::kUnfused && bias;
  }
};

// A block's parameters (GPT's layout: biases on every linear layer, two LayerNorms): attention
// Q h·q (q = heads x head_dim, h by default), K and V h·kv each, with their biases, the
// projection q·h + h; the feed-forward up (and gate) h·f + f each, down f·h + h; LayerNorms 4h.
// GPT-2 (f = 4h, kv = q = h): 12h² + 13h. Without biases (bias: false) the + terms go.
// MLA (t.mla, no biases): the queries' down h·r_q, RMSNorm r_q and up r_q·q (without a latent,
// h·q), the keys' and values' down h·(r_kv + rope), RMSNorm r_kv and up r_kv·heads·(head_dim +
// v_head_dim), the projection o·h (o = heads x v_head_dim); its replicated part (what a tensor
// group does not split: the downs and the RMSNorms) is MlaReplicatedParams.
constexpr int64_t MlaReplicatedParams(const TransformerSpec& t) {
  if (!t.mla) return 0;
  const int64_t h = t.hidden, rq = t.mla->q_lora_rank, rkv = t.mla->kv_lora_rank;
  return h * rq + rq + h * (rkv + t.mla->rope_head_dim) + rkv;
}
// MLA's ups (split over a tensor group by heads): (r_q, or h without a query latent)·q and
// r_kv·heads·(head_dim + v_head_dim); 0 without MLA.
constexpr int64_t MlaUpParams(const TransformerSpec& t) {
  if (!t.mla) return 0;
  const int64_t rq = t.mla->q_lora_rank, rkv = t.mla->kv_lora_rank;
  return (rq > 0 ? rq : int64_t{t.hidden}) * t.QWidth() + rkv * t.heads * (t.HeadDim() + t.VHeadDim());
}
constexpr int64_t AttentionParams(const TransformerSpec& t) {
  const int64_t h = t.hidden, q = t.QWidth(), kv = t.KvWidth(), o = t.OWidth(), biases = t.bias ? 1 : 0;
  if (t.mla) return MlaReplicatedParams(t) + MlaUpParams(t) + o * h;
  return h * (q + 2 * kv) + biases * (q + 2 * kv) + o * h + biases * h;
}
constexpr int64_t DenseFfnParams(const TransformerSpec& t) {
  const int64_t h = t.hidden, f = t.Ffn(), biases = t.bias ? 1 : 0;
  return t.Ups() * (h * f + biases * f) + f * h + biases * h;
}
constexpr int64_t TransformerBlockParams(const TransformerSpec& t) {
  return AttentionParams(t) + DenseFfnParams(t) + 4 * int64_t{t.hidden};
}
// A MoE layer's: one expert (u + 1)·h·f_e (no biases, as Mixtral's, Qwen's and DeepSeek's), the
// router h·experts; the layer holds the router, every routed and shared expert, attention and the
// LayerNorms; a token uses the router, top_k + shared experts, attention and the LayerNorms.
constexpr int64_t ExpertParams(const TransformerSpec& t) { return (t.Ups() + 1) * t.hidden * t.ExpertFfn(); }
constexpr int64_t RouterParams(const TransformerSpec& t) { return t.moe ? int64_t{t.hidden} * t.moe->experts : 0; }
constexpr int64_t MoeBlockParams(const TransformerSpec& t) {
  const int64_t experts = t.moe ? t.moe->experts + t.moe->shared_experts : 0;
  return AttentionParams(t) + RouterParams(t) + experts * ExpertParams(t) + 4 * int64_t{t.hidden};
}
constexpr int64_t ActiveMoeBlockParams(const TransformerSpec& t) {
  const int64_t used = t.moe ? t.moe->top_k + t.moe->shared_experts : 0;
  return AttentionParams(t) + RouterParams(t) + used * ExpertParams(t) + 4 * int64_t{t.hidden};
}

// The model FLOPs of one token, forward and backward, by the convention of Megatron-LM (Narayanan
// et al., SC'21: 72BsLh²(1 + s/6h + V/12hL) per batch without recompute; its MoE form counts the
// top-k experts a token uses) and PaLM (Chowdhery et al. 2022, App. B: 6N + 12LHQT): 6 × the
// parameters a token's matmuls use (every block's, a MoE layer's active ones, and the LM head's
// V·h; the embeddings are lookups) + 12·L·q·s for the attention's scores and context (q the
// queries' width, h by default; with MLA's wider keys than values 6·L·(q + o)·s; a layer with a
// sliding window shorter than s counts the window's keys in place of s); no recompute counted.
constexpr double TransformerModelFlopsPerToken(const TransformerSpec& t) {
  const double h = t.hidden;
  const int moe = t.MoeLayersIn(0, t.layers), windowed = t.WindowedLayersIn(0, t.layers);
  const double blocks = static_cast<double>(t.layers - moe) * static_cast<double>(TransformerBlockParams(t)) +
                        moe * static_cast<double>(ActiveMoeBlockParams(t));
  const double keys = (t.layers - windowed) * t.CountedKeys(false) + windowed * t.CountedKeys(true);
  return 6 * (blocks + static_cast<double>(t.vocab) * h) + 6.0 * static_cast<double>(t.QWidth() + t.OWidth()) * keys;
}

}  // namespace stagecraft::sim
