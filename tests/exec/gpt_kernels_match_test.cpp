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

// The cpu device with its GEMMs recorded: its ops are the cpu column of the op table with the
// two matrix products, and the fused linear layer's (one GEMM each), replaced by ones that note
// the GEMM's shape and run the cpu's.
class RecordingDevice final : public Device {
 public:
  RecordingDevice() : inner_(MakeCpuDevice()), ops_(inner_->ops()) {
    ops_.linear.gemm = &RecordGemm;
    ops_.linear.gemm_batched = &RecordGemmBatched;
    ops_.fused_linear.forward = &RecordFusedForward;
    ops_.fused_linear.weight_grad = &RecordFusedWeightGrad;
    ops_.fused_linear.input_grad = &RecordFusedInputGrad;
    ops_.fused_linear.forward_bias = &RecordFusedBias;
    context_.self = this;
  }
  std::vector<Shape> gemms;

  std::string Name() const override { return inner_->Name(); }
  DeviceMemory& memory() override { return inner_->memory(); }
  DeviceStreams& streams() override { return inner_->streams(); }
  DeviceClock& clock() override { return inner_->clock(); }
  const LayerOps& ops() const override { return ops_; }
  OpContext& op_context() override { return context_; }

 private:
  struct Context final : OpContext {
    RecordingDevice* self = nullptr;
  };
  static RecordingDevice& Self(OpContext& cx) { return *static_cast<Context&>(cx).self; }
  static void RecordGemm(OpContext& cx, bool ta, bool tb, int m, int n, int k, float alpha, const float* a,
                         const float* b, float beta, float* c) {
    RecordingDevice& d = Self(cx);
    d.gemms.emplace_back(m, n, k, 1);
    d.inner_->ops().linear.gemm(d.inner_->op_context(), ta, tb, m, n, k, alpha, a, b, beta, c);
  }
  static void RecordGemmBatched(OpContext& cx, bool ta, bool tb, int m, int n, int k, float alpha, const float* a,
                                int64_t sa, const float* b, int64_t sb, float beta, float* c, int64_t sc, int batch) {
    RecordingDevice& d = Self(cx);
    d.gemms.emplace_back(m, n, k, batch);
    d.inner_->ops().linear.gemm_batched(d.inner_->op_context(), ta, tb, m, n, k, alpha, a, sa, b, sb, beta, c, sc,
                                        batch);
  }

  // The fused layer's GEMM: x[rows x in] · wᵀ forward, dz · w for the input, dzᵀ[out x rows] · x
  // for the weights.
  static void RecordFusedForward(OpContext& cx, kernels::Activation act, int rows, int out, int in, const float* x,
                                 const float* w, const float* bias, const float* residual, float* z, float* y) {
    RecordingDevice& d = Self(cx);
    d.gemms.emplace_back(rows, out, in, 1);
    d.inner_->ops().fused_linear.forward(d.inner_->op_context(), act, rows, out, in, x, w, bias, residual, z, y);
  }
  static void RecordFusedBias(OpContext& cx, int rows, int out, int in, const float* x, const float* w,
                              const float* bias, const float* residual, float* y) {
    RecordingDevice& d = Self(cx);
    d.gemms.emplace_back(rows, out, in, 1);
    d.inner_->ops().fused_linear.forward_bias(d.inner_->op_context(), rows, out, in, x, w, bias, residual, y);
  }
  static void RecordFusedInputGrad(OpContext& cx, kernels::Activation act, int rows, int out, int in, const float* dz,
                                   const float* w, const float* pre, float* dpre) {
    RecordingDevice& d = Self(cx);
    d.gemms.emplace_back(rows, in, out, 1);  // dz[rows x out] · w[out x in]
    d.inner_->ops().fused_linear.input_grad(d.inner_->op_context(), act, rows, out, in, dz, w, pre, dpre);
  }
  static void RecordFusedWeightGrad(OpContext& cx, int rows, int out, int in, const float* dz, const float* x,
                                    float* dw, float* dbias, bool accumulate) {
    RecordingDevice& d = Self(cx);
    d.gemms.emplace_back(out, in, rows, 1);
    d.inner_->ops().fused_linear.weight_grad(d.inner_->op_context(), rows, out, in, dz, x, dw, dbias, accumulate);
  }

  std::unique_ptr<Device> inner_;
  LayerOps ops_;
  Context context_;
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
  device.memory().Upload(params.data(), host.data(), params.size());
  Buffer x(device, stage.InputFloats());
  std::vector<float> tokens(static_cast<size_t>(stage.InputFloats()), 1.0f);
  device.memory().Upload(x.data(), tokens.data(), x.size());
  Activations saved;
  Buffer y = stage.Forward(params.data(), std::move(x), &saved, true);
  EXPECT_EQ(Sorted(device.gemms), Sorted(ListedGemms(listed, sim::KernelPass::kF))) << "F";
  device.gemms.clear();
  Buffer dy(device, stage.OutputFloats());
  device.memory().Fill(dy.data(), 0.01f, dy.size());
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
