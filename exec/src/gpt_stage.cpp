// GptStage: the transformer's forward, input and weight gradients on a Device (see gpt.h).
#include "stagecraft/exec/gpt.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "stagecraft/base/check.h"
#include "stagecraft/exec/model.h"

namespace stagecraft::exec {
namespace {

// What a block keeps (Activations::kept, kBlockSlots per piece of the stage). F keeps up to
// kGelu; I drops what only it needed (q, k, v, the probabilities, z of the MLP) and adds the
// gradients W reads.
enum BlockSlot {
  kX, kMean1, kRstd1, kLn1, kQ, kK, kV, kProbs, kAttY, kX1, kMean2, kRstd2, kLn2, kFcPre, kGelu,
  kDy, kDFcPre, kDx1, kDQkv, kDLn2, kDLn1, kBlockSlots
};
// The embedding's and the head's slots, in a piece of their own.
enum EmbedSlot { kTokens, kDEmbedded };
enum HeadSlot { kHx, kHMean, kHRstd, kHLn, kDLogits, kDLnf };

constexpr uint64_t kGptWeightStream = 5000;  // + piece index · 16 + tensor index
constexpr uint64_t kGptTokenStream = 3;       // and kGptTokenStream + 1 for the successor draws

}  // namespace

GptBlockOffsets::GptBlockOffsets(int64_t c) {
  int64_t at = 0;
  auto next = [&at](int64_t n) { return std::exchange(at, at + n); };
  ln1_w = next(c), ln1_b = next(c), qkv_w = next(3 * c * c), qkv_b = next(3 * c), proj_w = next(c * c),
  proj_b = next(c), ln2_w = next(c), ln2_b = next(c), fc_w = next(4 * c * c), fc_b = next(4 * c),
  fcproj_w = next(4 * c * c), fcproj_b = next(c);
  end = at;
}

void InitGptParams(const GptModel& m, int first_block, int blocks, bool embed, bool head, float* params) {
  const int64_t c = m.hidden;
  auto fill = [&](float* dst, int64_t n, float std, uint64_t stream) {
    const float scale = std::sqrt(3.0f) * std;
    for (int64_t i = 0; i < n; ++i) dst[i] = std == 0.0f ? 0.0f : scale * UniformAt(m.seed, stream, i);
  };
  auto ones = [](float* dst, int64_t n) { std::fill(dst, dst + n, 1.0f); };
  float* p = params;
  if (embed) {
    fill(p, int64_t{m.vocab} * c, 0.02f, kGptWeightStream);
    fill(p + int64_t{m.vocab} * c, int64_t{m.seq} * c, 0.01f, kGptWeightStream + 1);
    p += m.EmbeddingFloats();
  }
  const GptBlockOffsets o(c);
  const float residual_std = 0.02f / std::sqrt(2.0f * static_cast<float>(m.layers));
  for (int b = 0; b < blocks; ++b, p += o.end) {
    const uint64_t stream = kGptWeightStream + 16 * static_cast<uint64_t>(first_block + b + 1);
    ones(p + o.ln1_w, c);
    fill(p + o.ln1_b, c, 0.0f, 0);
    fill(p + o.qkv_w, 3 * c * c, 0.02f, stream + 0);
    fill(p + o.qkv_b, 3 * c, 0.0f, 0);
    fill(p + o.proj_w, c * c, residual_std, stream + 1);
    fill(p + o.proj_b, c, 0.0f, 0);
    ones(p + o.ln2_w, c);
    fill(p + o.ln2_b, c, 0.0f, 0);
    fill(p + o.fc_w, 4 * c * c, 0.02f, stream + 2);
    fill(p + o.fc_b, 4 * c, 0.0f, 0);
    fill(p + o.fcproj_w, 4 * c * c, residual_std, stream + 3);
    fill(p + o.fcproj_b, c, 0.0f, 0);
  }
  if (head) {
    ones(p, c);
    fill(p + c, c, 0.0f, 0);
    fill(p + 2 * c, int64_t{m.vocab} * c, 0.02f, kGptWeightStream + 16 * static_cast<uint64_t>(m.layers + 1));
  }
}

void GptMicrobatch(const GptModel& m, int batch, int64_t g, float* tokens, float* targets) {
  const int t = m.seq;
  if (m.data) {
    const std::vector<int32_t>& file = *m.data;
    const int64_t windows = static_cast<int64_t>(file.size()) - t;  // LoadTokenFile keeps it ≥ 1
    for (int r = 0; r < batch; ++r) {
      const int64_t start = ((g * batch + r) * t) % windows;
      for (int i = 0; i < t; ++i) {
        tokens[int64_t{r} * t + i] = static_cast<float>(file[static_cast<size_t>(start + i)]);
        targets[int64_t{r} * t + i] = static_cast<float>(file[static_cast<size_t>(start + i + 1)]);
      }
    }
    return;
  }
  int64_t a = 5;
  while (std::gcd(a, int64_t{m.vocab}) != 1) a += 2;
  auto uniform_token = [&](uint64_t index) {
    const float u = 0.5f * (UniformAt(m.seed, kGptTokenStream, index) + 1.0f);  // [0, 1)
    return std::min<int64_t>(static_cast<int64_t>(u * static_cast<float>(m.vocab)), m.vocab - 1);
  };
  for (int r = 0; r < batch; ++r) {
    const uint64_t base = static_cast<uint64_t>(g * batch + r) * static_cast<uint64_t>(t + 1) * 2;
    int64_t token = uniform_token(base);
    for (int i = 0; i <= t; ++i) {
      if (i > 0) {
        const bool follows = UniformAt(m.seed, kGptTokenStream + 1, base + static_cast<uint64_t>(i)) < 0.5f;
        token = follows ? (a * token + 1) % m.vocab : uniform_token(base + 2 * static_cast<uint64_t>(i) + 1);
      }
      if (i < t) tokens[int64_t{r} * t + i] = static_cast<float>(token);
      if (i > 0) targets[int64_t{r} * t + i - 1] = static_cast<float>(token);
    }
  }
}

GptStage::GptStage(Device& device, const GptModel& model, int batch, int first_block, int blocks, bool embed,
                   bool head)
    : StageModel(device), model_(model), batch_(batch), first_block_(first_block), blocks_(blocks), embed_(embed),
      head_(head) {
  SC_CHECK(model.hidden > 0 && model.heads > 0 && model.hidden % model.heads == 0, "hidden is a multiple of heads");
  SC_CHECK(blocks >= 0 && batch > 0 && model.seq > 0 && model.vocab > 0, "a stage has a shape");
  param_floats_ = HeadStart() + (head ? model.HeadFloats() : 0);
}

void GptStage::InitParams(float* params) const {
  std::vector<float> host(static_cast<size_t>(param_floats_));
  InitGptParams(model_, first_block_, blocks_, embed_, head_, host.data());
  device_.memory().Upload(params, host.data(), param_floats_);
}

int64_t GptStage::InputFloats() const { return embed_ ? Rows() : Rows() * model_.hidden; }
int64_t GptStage::OutputFloats() const { return Rows() * (head_ ? model_.vocab : model_.hidden); }

Buffer GptStage::Forward(const float* params, Buffer x, Activations* saved, bool keep_all) {
  SC_CHECK(x.size() == InputFloats(), "stage input has the microbatch's shape");
  const int pieces = blocks_ + 2;  // embedding, blocks, head
  saved->inputs.clear();
  saved->kept.clear();
  if (keep_all) saved->kept.resize(static_cast<size_t>(pieces) * kBlockSlots);
  Buffer* kept = keep_all ? saved->kept.data() : nullptr;
  if (!keep_all) {  // recompute later from the stage input alone
    Buffer copy(device_, x.size());
    device_.memory().Copy(copy.data(), x.data(), x.size());
    saved->inputs.push_back(std::move(copy));
  }
  const int64_t c = model_.hidden;
  if (embed_) {
    Buffer out(device_, Rows() * c);
    ops_.embedding.forward(cx_, batch_, model_.seq, model_.hidden, x.data(), params, params + int64_t{model_.vocab} * c,
                           out.data());
    if (keep_all) kept[kTokens] = std::move(x);
    x = std::move(out);
  }
  for (int b = 0; b < blocks_; ++b) {
    x = BlockForward(params + BlockStart(b), std::move(x), keep_all ? kept + (b + 1) * kBlockSlots : nullptr, keep_all);
  }
  if (head_) x = HeadForward(params + HeadStart(), std::move(x), keep_all ? kept + (blocks_ + 1) * kBlockSlots : nullptr,
                             keep_all);
  return x;
}

Buffer GptStage::BlockForward(const float* p, Buffer x, Buffer* kept, bool keep) {
  const GptBlockOffsets o(model_.hidden);
  const int rows = static_cast<int>(Rows()), c = model_.hidden, t = model_.seq, nh = model_.heads, hd = c / nh;
  const int matrices = batch_ * nh;
  const int64_t head_floats = int64_t{t} * hd;
  Buffer mean1(device_, rows), rstd1(device_, rows), ln1(device_, Rows() * c);
  ops_.layer_norm.forward(cx_, rows, c, x.data(), p + o.ln1_w, p + o.ln1_b, ln1.data(), mean1.data(), rstd1.data());
  Buffer qkv(device_, Rows() * 3 * c);
  ops_.fused_linear.forward_bias(cx_, rows, 3 * c, c, ln1.data(), p + o.qkv_w, p + o.qkv_b, nullptr, qkv.data());
  Buffer q(device_, Rows() * c), k(device_, Rows() * c), v(device_, Rows() * c);
  ops_.attention.heads_from_rows(cx_, batch_, t, nh, hd, qkv.data(), 3 * c, q.data());
  ops_.attention.heads_from_rows(cx_, batch_, t, nh, hd, qkv.data() + c, 3 * c, k.data());
  ops_.attention.heads_from_rows(cx_, batch_, t, nh, hd, qkv.data() + 2 * c, 3 * c, v.data());
  qkv.Reset();
  Buffer probs(device_, int64_t{matrices} * t * t);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  ops_.linear.gemm_batched(cx_, false, true, t, t, hd, scale, q.data(), head_floats, k.data(), head_floats, 0.0f,
                           probs.data(), int64_t{t} * t, matrices);
  ops_.attention.causal_softmax(cx_, matrices, t, probs.data());
  Buffer att(device_, Rows() * c);
  ops_.linear.gemm_batched(cx_, false, false, t, hd, t, 1.0f, probs.data(), int64_t{t} * t, v.data(), head_floats, 0.0f,
                           att.data(), head_floats, matrices);
  Buffer att_y(device_, Rows() * c);
  ops_.attention.rows_from_heads(cx_, batch_, t, nh, hd, att.data(), att_y.data(), c);
  att.Reset();
  Buffer x1(device_, Rows() * c);
  ops_.linear.gemm(cx_, false, true, rows, c, c, 1.0f, att_y.data(), p + o.proj_w, 0.0f, x1.data());
  Buffer mean2(device_, rows), rstd2(device_, rows), ln2(device_, Rows() * c);
  ops_.layer_norm.residual_forward(cx_, rows, c, x1.data(), p + o.proj_b, x.data(), p + o.ln2_w, p + o.ln2_b,
                                   ln2.data(), mean2.data(), rstd2.data());
  Buffer fc_pre(device_, Rows() * 4 * c), gelu(device_, Rows() * 4 * c);
  ops_.fused_linear.forward(cx_, kernels::Activation::kGelu, rows, 4 * c, c, ln2.data(), p + o.fc_w, p + o.fc_b,
                            nullptr, fc_pre.data(), gelu.data());
  Buffer y(device_, Rows() * c);
  ops_.fused_linear.forward_bias(cx_, rows, c, 4 * c, gelu.data(), p + o.fcproj_w, p + o.fcproj_b, x1.data(),
                                 y.data());
  if (keep) {
    kept[kX] = std::move(x), kept[kMean1] = std::move(mean1), kept[kRstd1] = std::move(rstd1);
    kept[kLn1] = std::move(ln1), kept[kQ] = std::move(q), kept[kK] = std::move(k), kept[kV] = std::move(v);
    kept[kProbs] = std::move(probs), kept[kAttY] = std::move(att_y), kept[kX1] = std::move(x1);
    kept[kMean2] = std::move(mean2), kept[kRstd2] = std::move(rstd2), kept[kLn2] = std::move(ln2);
    kept[kFcPre] = std::move(fc_pre), kept[kGelu] = std::move(gelu);
  }
  return y;
}

Buffer GptStage::HeadForward(const float* p, Buffer x, Buffer* kept, bool keep) {
  const int rows = static_cast<int>(Rows()), c = model_.hidden;
  Buffer mean(device_, rows), rstd(device_, rows), ln(device_, Rows() * c);
  ops_.layer_norm.forward(cx_, rows, c, x.data(), p, p + c, ln.data(), mean.data(), rstd.data());
  Buffer logits(device_, Rows() * model_.vocab);
  ops_.linear.gemm(cx_, false, true, rows, model_.vocab, c, 1.0f, ln.data(), p + 2 * c, 0.0f, logits.data());
  if (keep) {
    kept[kHx] = std::move(x), kept[kHMean] = std::move(mean), kept[kHRstd] = std::move(rstd);
    kept[kHLn] = std::move(ln);
  }
  return logits;
}

Buffer GptStage::Backward(const float* params, Buffer dout, Activations* saved, GradTarget grads) {
  SC_CHECK(saved->kept.size() == static_cast<size_t>(blocks_ + 2) * kBlockSlots, "backward needs the forward's activations");
  SC_CHECK(dout.size() == OutputFloats(), "the gradient has the stage output's shape");
  Buffer* kept = saved->kept.data();
  if (head_) dout = HeadBackward(params + HeadStart(), std::move(dout), kept + (blocks_ + 1) * kBlockSlots);
  for (int b = blocks_ - 1; b >= 0; --b) {
    dout = BlockBackward(params + BlockStart(b), std::move(dout), kept + (b + 1) * kBlockSlots);
  }
  saved->inputs.clear();
  if (embed_) kept[kDEmbedded] = std::move(dout);
  if (grads.data != nullptr) BackwardWeight(saved, grads);
  return dout;  // empty on the first stage
}

Buffer GptStage::HeadBackward(const float* p, Buffer dlogits, Buffer* kept) {
  const int rows = static_cast<int>(Rows()), c = model_.hidden;
  Buffer dln(device_, Rows() * c);
  ops_.linear.gemm(cx_, false, false, rows, c, model_.vocab, 1.0f, dlogits.data(), p + 2 * c, 0.0f, dln.data());
  Buffer dx(device_, Rows() * c);
  ops_.layer_norm.backward_input(cx_, rows, c, dln.data(), kept[kHx].data(), p, kept[kHMean].data(),
                                 kept[kHRstd].data(), dx.data(), false);
  kept[kDLogits] = std::move(dlogits);
  kept[kDLnf] = std::move(dln);
  return dx;
}

Buffer GptStage::BlockBackward(const float* p, Buffer dy, Buffer* kept) {
  const GptBlockOffsets o(model_.hidden);
  const int rows = static_cast<int>(Rows()), c = model_.hidden, t = model_.seq, nh = model_.heads, hd = c / nh;
  const int matrices = batch_ * nh;
  const int64_t head_floats = int64_t{t} * hd, n = Rows() * c;
  // MLP: dy is the output gradient of fcproj and (residual) of x1.
  Buffer d_fc_pre(device_, Rows() * 4 * c);
  ops_.fused_linear.input_grad(cx_, kernels::Activation::kGelu, rows, c, 4 * c, dy.data(), p + o.fcproj_w,
                               kept[kFcPre].data(), d_fc_pre.data());
  kept[kFcPre].Reset();
  Buffer d_ln2(device_, n);
  ops_.linear.gemm(cx_, false, false, rows, c, 4 * c, 1.0f, d_fc_pre.data(), p + o.fc_w, 0.0f, d_ln2.data());
  Buffer dx1(device_, n);
  device_.memory().Copy(dx1.data(), dy.data(), n);
  ops_.layer_norm.backward_input(cx_, rows, c, d_ln2.data(), kept[kX1].data(), p + o.ln2_w, kept[kMean2].data(),
                                 kept[kRstd2].data(), dx1.data(), true);
  // Attention: dx1 is the output gradient of proj and (residual) of x.
  Buffer d_att_y(device_, n);
  ops_.linear.gemm(cx_, false, false, rows, c, c, 1.0f, dx1.data(), p + o.proj_w, 0.0f, d_att_y.data());
  Buffer d_att(device_, n);
  ops_.attention.heads_from_rows(cx_, batch_, t, nh, hd, d_att_y.data(), c, d_att.data());
  d_att_y.Reset();
  Buffer d_probs(device_, int64_t{matrices} * t * t);
  ops_.linear.gemm_batched(cx_, false, true, t, t, hd, 1.0f, d_att.data(), head_floats, kept[kV].data(), head_floats,
                           0.0f, d_probs.data(), int64_t{t} * t, matrices);
  Buffer dv(device_, n);
  ops_.linear.gemm_batched(cx_, true, false, t, hd, t, 1.0f, kept[kProbs].data(), int64_t{t} * t, d_att.data(),
                           head_floats, 0.0f, dv.data(), head_floats, matrices);
  d_att.Reset();
  ops_.attention.causal_softmax_backward(cx_, matrices, t, kept[kProbs].data(), d_probs.data());
  kept[kProbs].Reset();
  kept[kV].Reset();
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  Buffer dq(device_, n), dk(device_, n);
  ops_.linear.gemm_batched(cx_, false, false, t, hd, t, scale, d_probs.data(), int64_t{t} * t, kept[kK].data(),
                           head_floats, 0.0f, dq.data(), head_floats, matrices);
  ops_.linear.gemm_batched(cx_, true, false, t, hd, t, scale, d_probs.data(), int64_t{t} * t, kept[kQ].data(),
                           head_floats, 0.0f, dk.data(), head_floats, matrices);
  d_probs.Reset();
  kept[kQ].Reset();
  kept[kK].Reset();
  Buffer d_qkv(device_, Rows() * 3 * c);
  ops_.attention.rows_from_heads(cx_, batch_, t, nh, hd, dq.data(), d_qkv.data(), 3 * c);
  ops_.attention.rows_from_heads(cx_, batch_, t, nh, hd, dk.data(), d_qkv.data() + c, 3 * c);
  ops_.attention.rows_from_heads(cx_, batch_, t, nh, hd, dv.data(), d_qkv.data() + 2 * c, 3 * c);
  Buffer d_ln1(device_, n);
  ops_.linear.gemm(cx_, false, false, rows, c, 3 * c, 1.0f, d_qkv.data(), p + o.qkv_w, 0.0f, d_ln1.data());
  Buffer dx(device_, n);
  device_.memory().Copy(dx.data(), dx1.data(), n);
  ops_.layer_norm.backward_input(cx_, rows, c, d_ln1.data(), kept[kX].data(), p + o.ln1_w, kept[kMean1].data(),
                                 kept[kRstd1].data(), dx.data(), true);
  kept[kDy] = std::move(dy), kept[kDFcPre] = std::move(d_fc_pre), kept[kDx1] = std::move(dx1);
  kept[kDQkv] = std::move(d_qkv), kept[kDLn2] = std::move(d_ln2), kept[kDLn1] = std::move(d_ln1);
  return dx;
}

void GptStage::BackwardWeight(Activations* saved, GradTarget grads) {
  SC_CHECK(saved->kept.size() == static_cast<size_t>(blocks_ + 2) * kBlockSlots, "W needs what its I kept");
  Buffer* kept = saved->kept.data();
  const float beta = grads.accumulate ? 1.0f : 0.0f;
  const int64_t c = model_.hidden;
  if (embed_) {
    SC_CHECK(!kept[kDEmbedded].empty(), "W follows its I");
    ops_.embedding.backward(cx_, batch_, model_.seq, model_.hidden, model_.vocab, kept[kTokens].data(),
                            kept[kDEmbedded].data(), grads.data, grads.data + int64_t{model_.vocab} * c,
                            grads.accumulate);
  }
  for (int b = 0; b < blocks_; ++b) BlockWeight(kept + (b + 1) * kBlockSlots, grads.data + BlockStart(b), grads.accumulate);
  if (head_) {
    Buffer* h = kept + (blocks_ + 1) * kBlockSlots;
    float* g = grads.data + HeadStart();
    const int rows = static_cast<int>(Rows());
    ops_.layer_norm.backward_weight(cx_, rows, model_.hidden, h[kDLnf].data(), h[kHx].data(), h[kHMean].data(),
                                    h[kHRstd].data(), g, g + c, grads.accumulate);
    ops_.linear.gemm(cx_, true, false, model_.vocab, model_.hidden, rows, 1.0f, h[kDLogits].data(), h[kHLn].data(),
                     beta, g + 2 * c);
  }
  saved->kept.clear();
  saved->inputs.clear();
}

void GptStage::BlockWeight(Buffer* kept, float* g, bool accumulate) {
  const GptBlockOffsets o(model_.hidden);
  const int rows = static_cast<int>(Rows()), c = model_.hidden;
  auto linear = [&](const Buffer& dz, const Buffer& in, int out_features, int in_features, int64_t w, int64_t b) {
    ops_.fused_linear.weight_grad(cx_, rows, out_features, in_features, dz.data(), in.data(), g + w, g + b, accumulate);
  };
  linear(kept[kDy], kept[kGelu], c, 4 * c, o.fcproj_w, o.fcproj_b);
  linear(kept[kDFcPre], kept[kLn2], 4 * c, c, o.fc_w, o.fc_b);
  ops_.layer_norm.backward_weight(cx_, rows, c, kept[kDLn2].data(), kept[kX1].data(), kept[kMean2].data(),
                                  kept[kRstd2].data(), g + o.ln2_w, g + o.ln2_b, accumulate);
  linear(kept[kDx1], kept[kAttY], c, c, o.proj_w, o.proj_b);
  linear(kept[kDQkv], kept[kLn1], 3 * c, c, o.qkv_w, o.qkv_b);
  ops_.layer_norm.backward_weight(cx_, rows, c, kept[kDLn1].data(), kept[kX].data(), kept[kMean1].data(),
                                  kept[kRstd1].data(), g + o.ln1_w, g + o.ln1_b, accumulate);
}

}  // namespace stagecraft::exec
