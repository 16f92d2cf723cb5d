// The executor's GPT stage (exec/gpt_stage.cpp) runs the GEMMs that the simulator's kernel
// list (sim/gpt_kernels.h) describes and the roofline model times: recorded call by call on the
// cpu device, pass by pass (F, then I, then W), against the list for the same shape. So a
// profile of the executor and the model's prediction speak of the same kernels.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "stagecraft/exec/cpu_device.h"
#include "stagecraft/exec/gpt.h"
#include "stagecraft/exec/stage.h"
#include "stagecraft/sim/gpt_kernels.h"

namespace stagecraft::exec {
namespace {

using Shape = std::tuple<int64_t, int64_t, int64_t, int64_t>;  // m, n, k, batch

// Forwards every call to the cpu device and records the GEMMs' shapes.
class RecordingDevice final : public Device {
 public:
  RecordingDevice() : inner_(MakeCpuDevice()) {}
  std::vector<Shape> gemms;

  std::string Name() const override { return inner_->Name(); }
  float* Allocate(int64_t floats) override { return inner_->Allocate(floats); }
  void Free(float* data, int64_t floats) override { inner_->Free(data, floats); }
  void Upload(float* dst, const float* host, int64_t n) override { inner_->Upload(dst, host, n); }
  void Download(float* host, const float* src, int64_t n) override { inner_->Download(host, src, n); }
  void Copy(float* dst, const float* src, int64_t n) override { inner_->Copy(dst, src, n); }
  void Fill(float* dst, float value, int64_t n) override { inner_->Fill(dst, value, n); }
  void Gemm(bool ta, bool tb, int m, int n, int k, float alpha, const float* a, const float* b, float beta,
            float* c) override {
    gemms.emplace_back(m, n, k, 1);
    inner_->Gemm(ta, tb, m, n, k, alpha, a, b, beta, c);
  }
  void Axpy(int64_t n, float alpha, const float* x, float* y) override { inner_->Axpy(n, alpha, x, y); }
  void BiasActivation(kernels::Activation act, int rows, int cols, float* z, const float* bias, const float* residual,
                      float* out) override {
    inner_->BiasActivation(act, rows, cols, z, bias, residual, out);
  }
  void ActivationBackward(kernels::Activation act, int64_t n, const float* dout, const float* z, float* dz) override {
    inner_->ActivationBackward(act, n, dout, z, dz);
  }
  void BiasGrad(int rows, int cols, const float* dz, float* bias_grad, bool accumulate) override {
    inner_->BiasGrad(rows, cols, dz, bias_grad, accumulate);
  }
  void Loss(kernels::LossKind kind, int rows, int cols, const float* y, const float* targets, float* dy, float* loss,
            float loss_scale) override {
    inner_->Loss(kind, rows, cols, y, targets, dy, loss, loss_scale);
  }
  void SgdMomentum(int64_t n, const float* w_in, float* w_out, float* velocity, float* grad, float grad_scale, float lr,
                   float momentum) override {
    inner_->SgdMomentum(n, w_in, w_out, velocity, grad, grad_scale, lr, momentum);
  }
  void Adam(int64_t n, const float* w_in, float* w_out, float* m, float* v, float* grad, float grad_scale,
            const kernels::AdamParams& params) override {
    inner_->Adam(n, w_in, w_out, m, v, grad, grad_scale, params);
  }
  void GemmBatched(bool ta, bool tb, int m, int n, int k, float alpha, const float* a, int64_t sa, const float* b,
                   int64_t sb, float beta, float* c, int64_t sc, int batch) override {
    gemms.emplace_back(m, n, k, batch);
    inner_->GemmBatched(ta, tb, m, n, k, alpha, a, sa, b, sb, beta, c, sc, batch);
  }
  void BiasAdd(int rows, int cols, float* x, const float* bias, const float* residual) override {
    inner_->BiasAdd(rows, cols, x, bias, residual);
  }
  void LayerNorm(int rows, int cols, const float* x, const float* gamma, const float* beta, float* out, float* mean,
                 float* rstd) override {
    inner_->LayerNorm(rows, cols, x, gamma, beta, out, mean, rstd);
  }
  void LayerNormBackwardInput(int rows, int cols, const float* dout, const float* x, const float* gamma,
                              const float* mean, const float* rstd, float* dx, bool accumulate) override {
    inner_->LayerNormBackwardInput(rows, cols, dout, x, gamma, mean, rstd, dx, accumulate);
  }
  void LayerNormBackwardWeight(int rows, int cols, const float* dout, const float* x, const float* mean,
                               const float* rstd, float* dgamma, float* dbeta, bool accumulate) override {
    inner_->LayerNormBackwardWeight(rows, cols, dout, x, mean, rstd, dgamma, dbeta, accumulate);
  }
  void HeadsFromRows(int batch, int seq, int heads, int head_dim, const float* rows, int64_t ld, float* out) override {
    inner_->HeadsFromRows(batch, seq, heads, head_dim, rows, ld, out);
  }
  void RowsFromHeads(int batch, int seq, int heads, int head_dim, const float* in, float* rows, int64_t ld) override {
    inner_->RowsFromHeads(batch, seq, heads, head_dim, in, rows, ld);
  }
  void CausalSoftmax(int matrices, int seq, float* scores) override { inner_->CausalSoftmax(matrices, seq, scores); }
  void CausalSoftmaxBackward(int matrices, int seq, const float* p, float* dp) override {
    inner_->CausalSoftmaxBackward(matrices, seq, p, dp);
  }
  void Embedding(int batch, int seq, int cols, const float* tokens, const float* wte, const float* wpe,
                 float* out) override {
    inner_->Embedding(batch, seq, cols, tokens, wte, wpe, out);
  }
  void EmbeddingBackward(int batch, int seq, int cols, int vocab, const float* tokens, const float* dout, float* dwte,
                         float* dwpe, bool accumulate) override {
    inner_->EmbeddingBackward(batch, seq, cols, vocab, tokens, dout, dwte, dwpe, accumulate);
  }
  void Synchronize() override { inner_->Synchronize(); }
  int64_t NowNs() override { return inner_->NowNs(); }
  int Stamp() override { return inner_->Stamp(); }
  int64_t StampNs(int id) override { return inner_->StampNs(id); }
  bool Reached(int id) override { return inner_->Reached(id); }
  void ClearStamps() override { inner_->ClearStamps(); }

 private:
  std::unique_ptr<Device> inner_;
};

// The list's GEMMs of `pass`, in order.
std::vector<Shape> ListedGemms(const std::vector<sim::Kernel>& kernels, sim::KernelPass pass, int times = 1) {
  std::vector<Shape> out;
  for (int i = 0; i < times; ++i) {
    for (const sim::Kernel& k : kernels) {
      if (k.pass == pass && (k.kind == sim::KernelClass::kGemm || k.kind == sim::KernelClass::kBatchedGemm)) {
        out.emplace_back(k.m, k.n, k.k, k.batch);
      }
    }
  }
  return out;
}

std::vector<Shape> Sorted(std::vector<Shape> v) {
  std::sort(v.begin(), v.end());
  return v;
}

// One stage of `blocks` blocks, with the embeddings and / or the head, through F, I and W: each
// pass's recorded GEMMs are the list's for that pass (the same multiset; blocks run in order).
void ExpectStageMatches(int blocks, bool embed, bool head) {
  constexpr int kBatch = 2, kSeq = 8, kHidden = 16, kHeads = 2, kVocab = 24;
  const GptModel model{.layers = blocks, .hidden = kHidden, .heads = kHeads, .seq = kSeq, .vocab = kVocab};
  sim::GptKernelShape shape;
  shape.microbatch = kBatch, shape.seq = kSeq, shape.hidden = kHidden, shape.heads = kHeads, shape.vocab = kVocab;
  shape.dtype_bytes = 4;
  shape.dropout = false;  // the executor's block has no dropout
  std::vector<sim::Kernel> listed;
  const auto add = [&](const std::vector<sim::Kernel>& k) { listed.insert(listed.end(), k.begin(), k.end()); };
  if (embed) add(sim::GptEmbeddingKernels(shape));
  for (int b = 0; b < blocks; ++b) add(sim::GptBlockKernels(shape));
  if (head) add(sim::GptHeadKernels(shape));

  RecordingDevice device;
  GptStage stage(device, model, kBatch, 0, blocks, embed, head);
  std::vector<float> host(static_cast<size_t>(stage.ParamFloats()));
  stage.InitParams(host.data());
  Buffer params(device, stage.ParamFloats());
  device.Upload(params.data(), host.data(), params.size());
  Buffer x(device, stage.InputFloats());
  std::vector<float> tokens(static_cast<size_t>(stage.InputFloats()), 1.0f);
  device.Upload(x.data(), tokens.data(), x.size());
  Activations saved;
  Buffer y = stage.Forward(params.data(), std::move(x), &saved, true);
  EXPECT_EQ(Sorted(device.gemms), Sorted(ListedGemms(listed, sim::KernelPass::kF))) << "F";
  device.gemms.clear();
  Buffer dy(device, stage.OutputFloats());
  device.Fill(dy.data(), 0.01f, dy.size());
  Buffer dx = stage.Backward(params.data(), std::move(dy), &saved, {nullptr, false});
  EXPECT_EQ(Sorted(device.gemms), Sorted(ListedGemms(listed, sim::KernelPass::kI))) << "I";
  device.gemms.clear();
  Buffer grads(device, stage.ParamFloats());
  stage.BackwardWeight(&saved, {grads.data(), false});
  EXPECT_EQ(Sorted(device.gemms), Sorted(ListedGemms(listed, sim::KernelPass::kW))) << "W";
}

TEST(GptKernelsMatch, MiddleStage) { ExpectStageMatches(2, false, false); }
TEST(GptKernelsMatch, FirstStageWithEmbeddings) { ExpectStageMatches(1, true, false); }
TEST(GptKernelsMatch, LastStageWithHead) { ExpectStageMatches(1, false, true); }
TEST(GptKernelsMatch, WholeModelOnOneStage) { ExpectStageMatches(2, true, true); }

}  // namespace
}  // namespace stagecraft::exec
