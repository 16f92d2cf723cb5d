// The executor's transformer: a GPT-2-style decoder (Radford et al., 2019; llm.c's layout),
// split into pipeline stages like the MLP (stage.h). A stage holds a contiguous range of the
// model's blocks; the first stage also holds the token and position embeddings, the last the
// final LayerNorm and the LM head (its own weights, not tied to the embedding: the two sit on
// different ranks, as Megatron-LM's pipeline keeps a copy of its own there).
//
// Per block, with x [B·T, C] the residual stream (B sequences of T tokens, C = NH·hd):
//   h = LN1(x);  qkv = h·Wqkvᵀ + bqkv;  q, k, v: heads of qkv's three column thirds
//   a = causal_softmax(q·kᵀ/√hd)·v;  x1 = x + merge(a)·Wprojᵀ + bproj
//   y = x1 + gelu(LN2(x1)·Wfcᵀ + bfc)·Wfcprojᵀ + bfcproj          (gelu: tanh form)
// Head: logits = LNf(x)·Wheadᵀ, scored by the mean cross-entropy over the B·T next tokens.
//
// Parameters of a stage, one buffer, in this order: [wte V·C, wpe T·C] on the first stage; per
// block ln1.w C, ln1.b C, qkv.w 3C·C, qkv.b 3C, proj.w C·C, proj.b C, ln2.w C, ln2.b C, fc.w
// 4C·C, fc.b 4C, fcproj.w C·4C, fcproj.b C (12C² + 13C); [lnf.w C, lnf.b C, head.w V·C] on the
// last. Weights are row-major [out][in], as torch.nn.Linear's.
//
// F, I and W are separate for every piece (the zero-bubble schedules split them): I carries the
// gradient through the stage and keeps what W needs (each linear layer's input and output
// gradient, each LayerNorm's input, statistics and output gradient, the tokens and the
// embeddings' output gradient); W makes every weight gradient from it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "stagecraft/exec/device.h"
#include "stagecraft/exec/stage.h"
#include "stagecraft/scenario/scenario.h"

namespace stagecraft::exec {

struct GptModel {
  int layers = 0;  // blocks
  int hidden = 0;  // C
  int heads = 0;   // NH; C % NH == 0
  int seq = 0;     // T
  int vocab = 0;   // V
  uint64_t seed = 1;
  // The tokens of training.data (LoadTokenFile); null: the synthetic stream (GptMicrobatch).
  std::shared_ptr<const std::vector<int32_t>> data = nullptr;
  // One float per parameter (scenario/scenario.h's counts).
  int64_t BlockFloats() const { return sim::GptBlockParams(hidden); }
  int64_t EmbeddingFloats() const { return sim::GptEmbeddingParams(vocab, seq, hidden); }
  int64_t HeadFloats() const { return sim::GptHeadParams(vocab, hidden); }
};

// Where each tensor of a block starts within the block's parameters.
struct GptBlockOffsets {
  explicit GptBlockOffsets(int64_t c);
  int64_t ln1_w, ln1_b, qkv_w, qkv_b, proj_w, proj_b, ln2_w, ln2_b, fc_w, fc_b, fcproj_w, fcproj_b, end;
};

// Initial parameters of a stage as GptStage lays them out, from the seed alone (any rank
// rebuilds any block's): GPT-2's scheme, weights of std 0.02 (the residual projections
// 0.02/√(2·layers)), biases 0, LayerNorms γ = 1, β = 0, drawn as √3·std·U(seed, stream, index).
void InitGptParams(const GptModel& model, int first_block, int blocks, bool embed, bool head, float* params);

// Synthetic tokens with structure a model can learn: sequence n (row r of global microbatch g
// is n = g·B + r) starts at a uniform token, and each next token is succ(prev) = (a·prev + 1)
// mod V with probability 3/4, else uniform (a: the first of 5, 7, 11, 13, ... prime to V). A
// model that learns succ scores about 0.75·ln(1/0.75) + 0.25·ln(4V), far below ln V (8.3 for
// V = 4096 against 2.5). Writes the inputs, tokens 0..T−1 of each sequence, and the targets,
// tokens 1..T, both [B·T] as floats; the same on every rank and in every run.
// With model.data, sequence n is instead the window of T + 1 tokens from (n·T) mod (N − T) of the
// file's N tokens.
void GptMicrobatch(const GptModel& model, int batch, int64_t g, float* tokens, float* targets);

// Reads training.data: an llm.c token shard (a header of 256 int32: magic 20240520, version 1
// with uint16 tokens or 2 with uint32, the token count; then the tokens), or any other file as
// text tokenized by bytes (token = byte value). Only the first `max_tokens` tokens are read
// (what a run can use: GptMicrobatch's windows over a longer file start in that prefix), so a
// file's size costs nothing beyond its use. Throws InputError naming the file and what is
// wrong: not a regular file, a truncated shard (the header's count against the file's size),
// fewer than seq + 1 tokens, or a token of the prefix outside [0, vocab) (with its position).
std::shared_ptr<const std::vector<int32_t>> LoadTokenFile(const std::string& path, int vocab, int seq,
                                                          int64_t max_tokens = INT64_MAX);

class GptStage final : public StageModel {
 public:
  // Blocks first_block .. first_block + blocks − 1 of `model` for microbatches of `batch`
  // sequences; `embed` / `head` when the stage is the first / last.
  GptStage(Device& device, const GptModel& model, int batch, int first_block, int blocks, bool embed, bool head);

  int64_t ParamFloats() const override { return param_floats_; }
  void InitParams(float* params) const override;
  // Tokens [B·T] (as floats) on the first stage, else the residual stream [B·T·C].
  int64_t InputFloats() const override;
  // Logits [B·T·V] on the last stage, else the residual stream.
  int64_t OutputFloats() const override;

  Buffer Forward(const float* params, Buffer x, Activations* saved, bool keep_all) override;
  // I (grads.data null: keeps what W needs) or B (the weight gradients too). Returns the
  // gradient at the stage input; empty on the first stage (tokens have none).
  Buffer Backward(const float* params, Buffer dout, Activations* saved, GradTarget grads) override;
  void BackwardWeight(Activations* saved, GradTarget grads) override;

 private:
  int64_t BlockStart(int b) const { return (embed_ ? model_.EmbeddingFloats() : 0) + b * model_.BlockFloats(); }
  int64_t HeadStart() const { return BlockStart(blocks_); }
  Buffer BlockForward(const float* p, Buffer x, Buffer* kept, bool keep);
  Buffer BlockBackward(const float* p, Buffer dy, Buffer* kept);
  void BlockWeight(Buffer* kept, float* g, bool accumulate);
  Buffer HeadForward(const float* p, Buffer x, Buffer* kept, bool keep);
  Buffer HeadBackward(const float* p, Buffer dlogits, Buffer* kept);
  int64_t Rows() const { return int64_t{batch_} * model_.seq; }

  GptModel model_;
  int batch_, first_block_, blocks_;
  bool embed_, head_;
  int64_t param_floats_ = 0;
};

}  // namespace stagecraft::exec
