// What the backward rebuilds instead of keeping (pipeline.recompute, pipeline.recompute_modules):
// nothing; selective: the modules named (Megatron-LM's `--recompute-modules`; by default its
// `core_attn`, Korthikanti et al. 2022's selective recompute of the attention's softmax and
// dropout), charged by the transformer's cost models only; full: a stage keeps only its input
// and repeats its forward inside B/I (in the IR: GeneratorParams).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>

#include "stagecraft/scenario/enum_names.h"

namespace stagecraft::sim {

enum class Recompute { kNone, kSelective, kFull };
inline constexpr EnumName<Recompute> kRecomputeNames[] = {
    {Recompute::kNone, "none"}, {Recompute::kSelective, "selective"}, {Recompute::kFull, "full"}};
constexpr std::string_view Name(Recompute recompute) { return NameIn(kRecomputeNames, recompute); }

// The modules a selective recompute rebuilds in a layer's backward for inputs, as Megatron-LM
// names them (TransformerConfig.recompute_modules, with Transformer Engine's layers):
//   core_attn: the attention's scores, softmax, dropout and context (none with a fused
//     attention kernel, whose backward recomputes its scores itself);
//   layernorm: the LayerNorms Transformer Engine runs apart from a linear layer, their outputs
//     dropped (a MoE layer's before its router, MLA's before its downs; the others are fused
//     into the QKV's and the feed-forward's first GEMM and have none);
//   mla_up_proj: MLA's up-projections with their fused RMSNorms and the rotary embedding, their
//     outputs (the queries, keys and values) dropped;
//   moe_act: the routed experts' activation function, its output dropped;
//   mlp: a dense layer's whole feed-forward (its LayerNorm, GEMMs, activation and the tensor
//     group's collectives), only its input kept;
//   moe: a MoE layer's whole feed-forward (router, dispatch, experts, combine and the shared
//     experts), only its input kept: its two all-to-alls run again;
//   shared_experts: a MoE layer's shared experts.
enum class RecomputeModule : uint8_t { kCoreAttn, kLayernorm, kMlaUpProj, kMoeAct, kMlp, kMoe, kSharedExperts };
inline constexpr EnumName<RecomputeModule> kRecomputeModuleNames[] = {
    {RecomputeModule::kCoreAttn, "core_attn"}, {RecomputeModule::kLayernorm, "layernorm"},
    {RecomputeModule::kMlaUpProj, "mla_up_proj"}, {RecomputeModule::kMoeAct, "moe_act"},
    {RecomputeModule::kMlp, "mlp"},           {RecomputeModule::kMoe, "moe"},
    {RecomputeModule::kSharedExperts, "shared_experts"}};
constexpr std::string_view Name(RecomputeModule module) { return NameIn(kRecomputeModuleNames, module); }

// A set of RecomputeModule.
class RecomputeModules {
 public:
  constexpr RecomputeModules() = default;
  constexpr RecomputeModules(std::initializer_list<RecomputeModule> modules) {
    for (RecomputeModule m : modules) Add(m);
  }
  static constexpr RecomputeModules All() {
    RecomputeModules all;
    for (const auto& entry : kRecomputeModuleNames) all.Add(entry.value);
    return all;
  }
  constexpr void Add(RecomputeModule m) { bits_ |= Bit(m); }
  constexpr bool Has(RecomputeModule m) const { return (bits_ & Bit(m)) != 0; }
  constexpr bool empty() const { return bits_ == 0; }
  constexpr bool operator==(const RecomputeModules&) const = default;
  // "core_attn, moe_act", in kRecomputeModuleNames' order.
  std::string Names() const {
    std::string out;
    for (const auto& [module, name] : kRecomputeModuleNames) {
      if (!Has(module)) continue;
      if (!out.empty()) out += ", ";
      out += name;
    }
    return out;
  }

 private:
  static constexpr uint32_t Bit(RecomputeModule m) { return 1u << static_cast<unsigned>(m); }
  uint32_t bits_ = 0;
};

}  // namespace stagecraft::sim
