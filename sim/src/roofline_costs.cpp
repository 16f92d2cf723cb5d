// The roofline cost model (model.transformer on a device with memory_bandwidth and a GEMM
// model; roofline.h, docs/cost-model.md): a stage's F, I, W and STEP are the sums of their
// kernels' roofline times (gpt_kernels.h), the tensor group's collectives included. Its sizes
// (weights, activations, stashes, messages) are the transformer row's: only the times differ.
#include "stagecraft/sim/roofline.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "analytical_costs.h"
#include "cost_checks.h"
#include "cost_model_rows.h"
#include "sharded_params.h"
#include "stagecraft/sim/collectives.h"

namespace stagecraft::sim {

double KernelTime::ns() const { return std::max(compute_ns, memory_ns) + link_ns + launch_ns; }

double GemmComputeNs(const DeviceSpec& device, double peak_flops, int64_t m, int64_t n, int64_t k, int64_t batch,
                     bool batched, bool blockwise_fp8) {
  const GemmModel& g = device.gemm;
  const double efficiency = g.MaxEfficiency(blockwise_fp8) * (batched ? g.batched_efficiency : 1.0);
  const double k_overhead = g.KOverhead(blockwise_fp8);
  const double sm_rate = peak_flops * efficiency / g.sms;  // FLOP/s of one SM
  double best = std::numeric_limits<double>::infinity();
  for (const auto& [tm, tn] : g.tiles) {
    const double tiles = std::ceil(static_cast<double>(m) / tm) * std::ceil(static_cast<double>(n) / tn) * batch;
    const double waves = std::ceil(tiles / g.sms);
    best = std::min(best, waves * 2.0 * tm * tn * (static_cast<double>(k) + k_overhead) / sm_rate * 1e9);
  }
  return best;
}

KernelTime TimeKernel(const Kernel& kernel, const DeviceSpec& device, int group, double link_bytes_per_s,
                      int64_t link_latency_ns) {
  KernelTime t;
  if (kernel.kind == KernelClass::kCollective) {
    const RingLink link{link_bytes_per_s, link_latency_ns};
    switch (kernel.collective) {
      case CollectiveKind::kAllReduce: t.link_ns = AllReduceNs(kernel.bytes, group, link); break;
      case CollectiveKind::kAllGather: t.link_ns = AllGatherNs(kernel.bytes, group, link); break;
      case CollectiveKind::kReduceScatter: t.link_ns = ReduceScatterNs(kernel.bytes, group, link); break;
      case CollectiveKind::kContextRing: t.link_ns = AllGatherNs(kernel.bytes, group, link); break;
      case CollectiveKind::kNone: break;
    }
    t.launch_ns = static_cast<double>(device.launch_overhead_ns);
    return t;
  }
  if (kernel.kind == KernelClass::kMemory) {
    t.compute_ns = kernel.flops / device.peak_by_dtype[static_cast<int>(Dtype::kFp32)] * 1e9;
    if (!(t.compute_ns >= 0) || std::isinf(t.compute_ns)) t.compute_ns = 0;  // no fp32 rate stated
  } else {
    // An FP8 GEMM (training.fp8) at the device's FP8 peak, through the same tile and wave model.
    const double peak = kernel.fp8 ? device.peak_by_dtype[static_cast<int>(Dtype::kFp8)] : device.peak_flops;
    t.compute_ns =
        GemmComputeNs(device, peak, kernel.m, kernel.n, kernel.k, kernel.batch, kernel.kind == KernelClass::kBatchedGemm,
                      kernel.fp8 && kernel.fp8_blockwise);
  }
  const double rate = kernel.kind == KernelClass::kMemory ? device.MemoryKernelRate(kernel.name) : 1.0;
  t.memory_ns = kernel.bytes / (device.memory_bandwidth * device.memory_efficiency * rate) * 1e9;
  t.launch_ns = static_cast<double>(device.launch_overhead_ns);
  return t;
}

GptKernelShape KernelShapeOf(const Scenario& sc) {
  const TransformerSpec& t = *sc.model.transformer;
  GptKernelShape g;
  g.microbatch = sc.pipeline.microbatch_size;
  g.seq = t.seq / sc.pipeline.context_parallel, g.hidden = t.hidden, g.heads = t.heads, g.vocab = t.vocab;
  g.context_parallel = sc.pipeline.context_parallel;
  g.context_all_gather = sc.pipeline.context_all_gather;
  g.tensor_parallel = sc.pipeline.tensor_parallel;
  g.sequence_parallel = sc.pipeline.sequence_parallel;
  g.dtype_bytes = DtypeBytes(sc.training.dtype);
  g.dropout = t.dropout;
  g.ffn = t.Ffn();
  g.swiglu = t.activation == FfnActivation::kSwiglu;
  g.kv_heads = t.KvHeads();
  g.head_dim = t.HeadDim();
  g.flash = t.attention == AttentionKernel::kFlash;
  g.bias = t.bias;
  g.grad_bytes = sc.training.GradBytes();
  g.fp8 = sc.training.fp8;
  g.fp8_amax_pass = sc.training.fp8 && sc.training.fp8_scaling == Fp8Scaling::kCurrent;
  g.fp8_blockwise = sc.training.fp8 && sc.training.fp8_scaling == Fp8Scaling::kBlockwise;
  g.fp8_dispatch = sc.training.fp8 && sc.training.fp8_dispatch;
  if (t.mla) {
    g.mla = true;
    g.q_lora = t.mla->q_lora_rank, g.kv_lora = t.mla->kv_lora_rank;
    g.rope_head_dim = t.mla->rope_head_dim, g.v_head_dim = t.VHeadDim();
  }
  if (t.moe) {
    g.experts = t.moe->experts;
    g.routed = t.moe->top_k * t.moe->TokenFactor();
    g.local_experts = t.moe->experts / sc.pipeline.expert_parallel;
    g.expert_ffn = t.ExpertFfn();
    g.shared_ffn = t.moe->shared_experts * t.ExpertFfn();
    g.deepep = sc.pipeline.deepep;
  }
  return g;
}

std::vector<Kernel> RecomputeKernels(const PipelineSpec& p, const GptKernelShape& shape, bool moe_layer) {
  if (p.recompute == Recompute::kNone) return {};
  return p.full_recompute() ? GptRecomputeKernels(shape, true, moe_layer)
                            : GptRecomputeKernels(shape, p.SelectiveModules(), moe_layer);
}

namespace {

// TimeKernels over the tensor group's `link` and the context group's `context`.
std::vector<TimedKernel> TimeKernelsOver(const Scenario& sc, const DeviceSpec& device, const std::vector<Kernel>& kernels,
                                         const RingLink& link, const RingLink& context) {
  const int c = sc.pipeline.context_parallel;
  std::vector<TimedKernel> out;
  for (const Kernel& k : kernels) {
    out.push_back({k, k.context_group ? TimeKernel(k, device, c, context.bytes_per_s, context.latency_ns)
                           : TimeKernel(k, device, sc.pipeline.tensor_parallel, link.bytes_per_s, link.latency_ns)});
  }
  // Each of a ring's C - 1 steps runs beside the attention's work on the chunk before it (1 / C of
  // the kernel's): only what the steps outlast of that work is left.
  for (TimedKernel& r : out) {
    if (r.kernel.collective != CollectiveKind::kContextRing) continue;
    for (const TimedKernel& attention : out) {
      if (attention.kernel.name != r.kernel.beside) continue;
      r.time.link_ns = ContextRingLeftNs(r.time.link_ns, attention.time.ns(), c);
      break;
    }
  }
  return out;
}

RingLink ContextLinkOf(const Scenario& sc, int rank) {
  return sc.pipeline.context_parallel > 1 ? detail::ContextGroupLink(sc, rank) : RingLink{};
}

}  // namespace

std::vector<TimedKernel> TimeKernels(const Scenario& sc, int rank, const DeviceSpec& device,
                                     const std::vector<Kernel>& kernels) {
  return TimeKernelsOver(sc, device, kernels, detail::TensorGroupLink(sc, rank), ContextLinkOf(sc, rank));
}

const DeviceSpec& FirstRankDevice(const Scenario& sc) { return sc.topology.GroupDevice(RankGroups(sc, 0).front()); }

double TensorParallelOverlapNs(const std::vector<TimedKernel>& kernels) {
  double saved = 0;
  for (const TimedKernel& c : kernels) {
    if (c.kernel.beside.empty() || c.kernel.collective == CollectiveKind::kContextRing) continue;
    for (const TimedKernel& gemm : kernels) {
      if (gemm.kernel.name == c.kernel.beside) {
        saved += std::min(c.time.ns(), gemm.time.ns());
        break;
      }
    }
  }
  return saved;
}

double UpdateBytesPerParam(const Scenario& sc) {
  const int d = DtypeBytes(sc.training.dtype);
  const double state = static_cast<double>(detail::OptimizerBytesPerParam(sc));
  // Read the main gradient (training.grad_dtype's); read and write the fp32 weights (the master
  // copy for 16-bit ones) and the optimizer's state; write the 16-bit weights back.
  return sc.training.GradBytes() + 2 * (state + (d < 4 ? 0 : 4)) + (d < 4 ? d : 0);
}

double UpdatedParams(const Scenario& sc, const StageCost& cost) {
  const double state = static_cast<double>(detail::OptimizerBytesPerParam(sc));
  return sc.pipeline.zero >= 1 && state > 0 ? static_cast<double>(cost.optimizer_bytes) / state
                                            : static_cast<double>(cost.weight_bytes) / DtypeBytes(sc.training.dtype);
}

RooflineFit FitRoofline(const Scenario& sc, const double measured_ns[3]) {
  const std::vector<Kernel> block = GptBlockKernels(KernelShapeOf(sc));
  const RingLink tensor = detail::TensorGroupLink(sc, 0), context = ContextLinkOf(sc, 0);  // once, not per trial
  const auto passes = [&](const DeviceSpec& device, double out[3]) {
    out[0] = out[1] = out[2] = 0;
    for (const TimedKernel& k : TimeKernelsOver(sc, device, block, tensor, context)) {
      const int pass = static_cast<int>(k.kernel.pass);
      if (pass < 3) out[pass] += k.time.ns();
    }
  };
  RooflineFit fit;
  const DeviceSpec stated = FirstRankDevice(sc);
  passes(stated, fit.predicted_ns);
  double best = std::numeric_limits<double>::infinity();
  DeviceSpec trial = stated;
  for (int g = 1; g <= 200; ++g) {
    for (int m = 1; m <= 200; ++m) {
      trial.gemm.max_efficiency = g / 100.0;
      // One factor on every GEMM's rate: block-scaled FP8 GEMMs' own efficiency scaled alike.
      trial.gemm.blockwise_max_efficiency =
          stated.gemm.blockwise_max_efficiency * trial.gemm.max_efficiency / stated.gemm.max_efficiency;
      trial.memory_efficiency = m / 100.0;
      double ns[3];
      passes(trial, ns);
      double error = 0;
      for (int i = 0; i < 3; ++i) error += std::pow(std::log(ns[i] / measured_ns[i]), 2);
      if (error < best) {
        best = error;
        fit.gemm_efficiency = trial.gemm.max_efficiency;
        fit.memory_efficiency = trial.memory_efficiency;
        std::copy(ns, ns + 3, fit.fitted_ns);
      }
    }
  }
  return fit;
}

namespace detail {
namespace {

// Sums of one pass's kernel times (ns), and what a whole B saves with
// pipeline.tensor_parallel_overlap.
struct PassSums {
  double f = 0, i = 0, w = 0, step = 0, overlap = 0;
  void Add(const std::vector<TimedKernel>& kernels, double times) {
    for (const TimedKernel& k : kernels) {
      const double ns = k.time.ns() * times;
      switch (k.kernel.pass) {
        case KernelPass::kF: f += ns; break;
        case KernelPass::kI: i += ns; break;
        case KernelPass::kW: w += ns; break;
        case KernelPass::kStep: step += ns; break;
      }
    }
  }
  // Each pass the slower of the two (a rank whose devices differ runs at its slowest's pace);
  // the overlap so that a whole B is the slower one's too.
  void Slowest(const PassSums& o) {
    const double backward = std::max(i + w - overlap, o.i + o.w - o.overlap);
    f = std::max(f, o.f), i = std::max(i, o.i), w = std::max(w, o.w), step = std::max(step, o.step);
    overlap = i + w - backward;
  }
};

// Whether layers `a` and `b` run the same block (dense or MoE, windowed or not).
bool SameBlock(const TransformerSpec& t, int a, int b) {
  return t.IsMoeLayer(a) == t.IsMoeLayer(b) && t.IsWindowedLayer(a) == t.IsWindowedLayer(b);
}

// The kernel shape of layer `layer`'s block: the scenario's, with its sliding window if it has one.
GptKernelShape LayerShape(const Scenario& sc, int layer) {
  GptKernelShape shape = KernelShapeOf(sc);
  const TransformerSpec& t = *sc.model.transformer;
  shape.window = t.WindowOf(layer);
  return shape;
}

// The parameters a STEP updates (the stage's, or with ZeRO the device's share of the optimizer
// state) and, with training.fp8, the weights it casts to FP8 (the stage's layers' as the device
// holds them; the embedding and the LM head stay 16-bit).
struct StepParams {
  double updated = 0, cast = 0;
};

// Stage `st` of `stages` (on pipeline rank `rank`, holding `layers` layers from layer `first`)
// timed on `device`: each kind of layer (dense or MoE, windowed or not) once, times its count.
PassSums StagePasses(const Scenario& sc, int st, int stages, int rank, int first, int layers, StepParams step,
                     const DeviceSpec& device) {
  const PipelineSpec& p = sc.pipeline;
  const TransformerSpec& t = *sc.model.transformer;
  const GptKernelShape shape = KernelShapeOf(sc);
  const auto timed = [&](const std::vector<Kernel>& kernels) { return TimeKernels(sc, rank, device, kernels); };
  std::vector<std::pair<int, int>> kinds;  // (a layer of the kind, how many), by IsMoeLayer and IsWindowedLayer
  for (int l = first; l < first + layers; ++l) {
    const auto same = [&](const std::pair<int, int>& k) { return SameBlock(t, k.first, l); };
    const auto kind = std::find_if(kinds.begin(), kinds.end(), same);
    if (kind == kinds.end()) {
      kinds.emplace_back(l, 1);
    } else {
      ++kind->second;
    }
  }
  PassSums sums;
  for (const auto& [layer, count] : kinds) {
    const bool moe_layer = t.IsMoeLayer(layer);
    const GptKernelShape layer_shape = LayerShape(sc, layer);
    const std::vector<TimedKernel> block = timed(GptBlockKernels(layer_shape, moe_layer));
    sums.Add(block, count);
    if (p.tensor_parallel_overlap) sums.overlap += TensorParallelOverlapNs(block) * count;
    sums.Add(timed(RecomputeKernels(p, layer_shape, moe_layer)), count);
  }
  if (st == 0) sums.Add(timed(GptEmbeddingKernels(shape)), 1);
  if (st == stages - 1) {
    const std::vector<TimedKernel> head = timed(GptHeadKernels(shape));
    sums.Add(head, 1);
    if (p.tensor_parallel_overlap) sums.overlap += TensorParallelOverlapNs(head);
  }
  sums.Add(timed(OptimizerStepKernels(step.updated, shape.main_grad_bytes(), UpdateBytesPerParam(sc))), 1);
  if (shape.fp8) sums.Add(timed(Fp8WeightCastKernels(step.cast, shape.dtype_bytes, shape.fp8_amax_pass)), 1);
  return sums;
}

// A layer weighs its block's F + I + W (with what recompute repeats); the embeddings and the
// LM head with its loss weigh theirs, in blocks, on the first and last stage.
LayerWeights RooflineWeights(const Scenario& sc) {
  const GptKernelShape shape = KernelShapeOf(sc);
  const auto total = [&](const std::vector<Kernel>& kernels) {
    double ns = 0;
    for (const TimedKernel& k : TimeKernels(sc, 0, FirstRankDevice(sc), kernels)) ns += k.time.ns();
    return ns;
  };
  // A layer of shape `layer_shape` (with what recompute repeats) on pipeline rank `rank`'s `device`.
  const auto layer_on = [&](const DeviceSpec& device, int rank, const GptKernelShape& layer_shape, bool moe_layer) {
    double ns = 0;
    for (const TimedKernel& k : TimeKernels(sc, rank, device, GptBlockKernels(layer_shape, moe_layer))) {
      ns += k.time.ns();
    }
    for (const TimedKernel& k : TimeKernels(sc, rank, device, RecomputeKernels(sc.pipeline, layer_shape, moe_layer))) {
      ns += k.time.ns();
    }
    return ns;
  };
  const double block = layer_on(FirstRankDevice(sc), 0, shape, false);
  const TransformerSpec& t = *sc.model.transformer;
  std::vector<double> cost;  // MoE and windowed layers weigh their own kernels
  if (t.moe || t.window) {
    for (int l = 0; l < t.layers; ++l) {
      cost.push_back(l > 0 && SameBlock(t, l, l - 1) ? cost.back()
                                  : layer_on(FirstRankDevice(sc), 0, LayerShape(sc, l), t.IsMoeLayer(l)) / block);
    }
  }
  // With node groups, each rank's pace: a block on its device.
  const std::vector<double> rank_scale =
      RankScale(sc, [&](const DeviceSpec& device, int rank) { return layer_on(device, rank, shape, false); });
  return {"model.transformer", t.layers, cost, total(GptEmbeddingKernels(shape)) / block,
          total(GptHeadKernels(shape)) / block, rank_scale};
}

CostTable RooflineTable(const Scenario& sc, const CostQuery& query) {
  const int stages = query.shape.stages();
  const std::vector<int> layers = SplitWeights(RooflineWeights(sc), query.shape, sc.pipeline);
  CostTable table = TransformerTable(sc, query, layers);  // the sizes; the times follow
  table.source = "roofline";
  const TransformerSpec& t = *sc.model.transformer;
  const PipelineSpec& p = sc.pipeline;
  const KeysOf keys = [&](int st) {
    return fmt::format("model.transformer: {} of hidden {}, heads {}, seq {}, microbatch {}, on {} {}",
                       Count(layers[st], "layer"), t.hidden, t.heads, t.seq, p.microbatch_size,
                       sc.topology.grouped() ? "topology.groups' device" : "topology.device",
                       RankDeviceNames(sc, query.shape.RankOf(st), " and "));
  };
  int first = 0;
  for (int st = 0; st < stages; ++st) {
    const int rank = query.shape.RankOf(st);
    StageCost& cost = table.stages[st];
    const int from = first;
    const StageLayers mix{from, layers[st], t.MoeLayersIn(from, layers[st]), t.WindowedLayersIn(from, layers[st])};
    first += layers[st];
    StepParams step;
    step.updated = UpdatedParams(sc, cost);
    if (sc.training.fp8) {
      const StageParams own = ParamsOf(sc, 1, 3, mix);  // as a middle stage holds them: the layers alone
      step.cast = p.zero >= 3 && p.replicas() > 1 ? ShardOf(p, own) : own.shared + own.routed;
    }
    std::optional<PassSums> sums;
    for (const int g : RankGroups(sc, rank)) {
      const PassSums on = StagePasses(sc, st, stages, rank, from, layers[st], step, sc.topology.GroupDevice(g));
      if (sums) {
        sums->Slowest(on);
      } else {
        sums = on;
      }
    }
    const StageChecks check(sc.path, st, keys);
    cost.forward_ns = check.Ns(sums->f, "a forward");
    cost.backward_input_ns = check.Ns(sums->i, "a backward for inputs");
    cost.backward_weight_ns = check.Ns(sums->w, "a backward for weights");
    cost.step_ns = check.Ns(sums->step, "an optimizer step");
    cost.fused_backward_ns = sums->overlap > 0 ? check.Ns(sums->i + sums->w - sums->overlap, "a backward") : 0;
    AddShardedComm(ShardedCommOf(sc, rank, ParamsOf(sc, st, stages, mix), mix.count), &cost);
  }
  CheckComposedOps(table, sc.path, keys);
  return table;
}

}  // namespace

CostModel RooflineCostModel() {
  return {"roofline", "model.transformer",
          [](const Scenario& sc) { return sc.model.transformer.has_value() && sc.topology.roofline(); },
          RooflineTable, RooflineWeights};
}

}  // namespace detail
}  // namespace stagecraft::sim
