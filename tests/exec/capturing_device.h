// A cpu Device with graphs, for tests of the runtime's step graphs on the CPU: while a capture is
// open, every call that the cuda device would queue on its compute stream (the layer ops, the
// memory's copies and fills, the clock's stamps) is recorded with its arguments instead of run,
// as CUDA stream capture records it; Launch runs a segment's record again with the arguments it
// was captured with, its stamps reading the host clock into the instance's own slots (a test
// transport may record its transfers there too: RecordCall). A copy
// that waits for the device (Upload, Download) throws while capturing, as it fails a CUDA
// capture. Memory given out while capturing is the graphs' until Release, as on cuda. The device
// counts the layer-op calls it ran at once and those it recorded, and the launches.
#pragma once

#include <array>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <unordered_set>
#include <vector>

#include "stagecraft/exec/block_pool.h"
#include "stagecraft/exec/cpu_device.h"
#include "stagecraft/exec/device.h"
#include "stagecraft/exec/layer_ops.h"

namespace stagecraft::testing {

class CapturingCpuDevice final : public exec::Device {
 public:
  CapturingCpuDevice() : inner_(exec::MakeCpuDevice()), memory_(*this), clock_(*this), graphs_(*this) {
    devices_.push_back(this);
    table_ = Wrapped();
  }
  ~CapturingCpuDevice() override { std::erase(devices_, this); }
  CapturingCpuDevice(const CapturingCpuDevice&) = delete;
  CapturingCpuDevice& operator=(const CapturingCpuDevice&) = delete;

  std::string Name() const override { return "cpu (capturing)"; }
  exec::DeviceMemory& memory() override { return memory_; }
  exec::DeviceStreams& streams() override { return inner_->streams(); }
  exec::DeviceClock& clock() override { return clock_; }
  const exec::LayerOps& ops() const override { return table_; }
  exec::OpContext& op_context() override { return inner_->op_context(); }
  exec::DeviceGraphs* graphs() override { return &graphs_; }

  // For a test transport that records its transfers into a capture, as NCCL's are recorded into
  // a CUDA capture (capturing_transport.h): whether a capture is open, and a call recorded into it
  // (run at each launch, in order with the layer ops around it).
  bool capturing() const { return recording(); }
  void RecordCall(std::function<void()> call) { Record(std::move(call)); }

  int64_t direct_calls = 0;     // layer ops run as they were called (the optimizer's apart)
  int64_t direct_updates = 0;   // optimizer updates run as they were called
  int64_t recorded_calls = 0;   // layer ops recorded into a segment
  int64_t launches = 0;
  int64_t graph_blocks_taken_outside = 0;  // a graph's block given out while no capture was open

 private:
  using Call = std::function<void()>;
  bool recording() const { return recording_ != nullptr; }
  void Record(Call call) { recording_->push_back(std::move(call)); }

  // A field of the cpu column, run or recorded.
  template <auto Kind, auto Field, class Fn>
  struct Wrap;
  template <auto Kind, auto Field, class... A>
  struct Wrap<Kind, Field, void (*)(exec::OpContext&, A...)> {
    static void Call(exec::OpContext& cx, A... a) {
      const auto fn = (exec::LayerOpsFor(exec::OpBackend::kCpu).*Kind).*Field;
      CapturingCpuDevice& d = Of(cx);
      if (d.recording()) {
        ++d.recorded_calls;
        d.Record([fn, &cx, a...] { fn(cx, a...); });
        return;
      }
      if constexpr (std::is_same_v<decltype(Kind), decltype(&exec::LayerOps::optimizer)>) {
        ++d.direct_updates;
      } else {
        ++d.direct_calls;
      }
      fn(cx, a...);
    }
  };
#define SC_WRAP(kind, field)                                                                               \
  t.kind.field = &Wrap<&exec::LayerOps::kind, &decltype(exec::LayerOps::kind)::field,                    \
                       decltype(decltype(exec::LayerOps::kind)::field)>::Call
  static exec::LayerOps Wrapped() {
    exec::LayerOps t{};
    SC_WRAP(linear, gemm);
    SC_WRAP(linear, gemm_batched);
    SC_WRAP(linear, axpy);
    SC_WRAP(linear, scal);
    SC_WRAP(bias_activation, forward);
    SC_WRAP(bias_activation, backward);
    SC_WRAP(bias_activation, bias_grad);
    SC_WRAP(fused_linear, forward);
    SC_WRAP(fused_linear, input_grad);
    SC_WRAP(fused_linear, forward_bias);
    SC_WRAP(fused_linear, weight_grad);
    SC_WRAP(bias_add, forward);
    SC_WRAP(layer_norm, forward);
    SC_WRAP(layer_norm, backward_input);
    SC_WRAP(layer_norm, backward_weight);
    SC_WRAP(layer_norm, residual_forward);
    SC_WRAP(attention, heads_from_rows);
    SC_WRAP(attention, rows_from_heads);
    SC_WRAP(attention, causal_softmax);
    SC_WRAP(attention, causal_softmax_backward);
    SC_WRAP(embedding, forward);
    SC_WRAP(embedding, backward);
    SC_WRAP(loss, forward);
    SC_WRAP(optimizer, sgd_momentum);
    SC_WRAP(optimizer, adam);
    return t;
  }
#undef SC_WRAP

  class Memory final : public exec::DeviceMemory {
   public:
    explicit Memory(CapturingCpuDevice& d) : d_(d) {}
    ~Memory() override {
      graph_free_.Drain([this](float* block, int64_t floats) { Inner().Free(block, floats, exec::MemoryTier::kDevice); });
    }
    float* Allocate(int64_t floats, exec::MemoryTier tier) override {
      Track(floats * static_cast<int64_t>(sizeof(float)), tier);
      if (tier != exec::MemoryTier::kDevice) return Inner().Allocate(floats, tier);
      float* block = d_.recording() ? graph_free_.Take(floats) : nullptr;
      if (block == nullptr) block = Inner().Allocate(floats, tier);
      if (d_.recording()) {
        graph_blocks_.insert(block);
      } else if (graph_blocks_.count(block) != 0) {
        ++d_.graph_blocks_taken_outside;  // cannot be: the inner pool never had it back
      }
      return block;
    }
    void Free(float* data, int64_t floats, exec::MemoryTier tier) override {
      Track(-floats * static_cast<int64_t>(sizeof(float)), tier);
      // A block freed while recording is the graphs' (the recorded work uses it at each launch).
      if (tier == exec::MemoryTier::kDevice && d_.recording() && data != nullptr) graph_blocks_.insert(data);
      if (tier == exec::MemoryTier::kDevice && graph_blocks_.count(data) != 0) return graph_free_.Keep(data, floats);
      Inner().Free(data, floats, tier);
    }
    void Upload(float* dst, const float* host, int64_t n) override {
      Refuse("Upload");
      Inner().Upload(dst, host, n);
    }
    void Download(float* host, const float* src, int64_t n) override {
      Refuse("Download");
      Inner().Download(host, src, n);
    }
    void Copy(float* dst, const float* src, int64_t n) override {
      if (d_.recording()) return d_.Record([this, dst, src, n] { Inner().Copy(dst, src, n); });
      Inner().Copy(dst, src, n);
    }
    void Fill(float* dst, float value, int64_t n) override {
      if (d_.recording()) return d_.Record([this, dst, value, n] { Inner().Fill(dst, value, n); });
      Inner().Fill(dst, value, n);
    }
    void CopyAsync(float* dst, exec::MemoryTier dst_tier, const float* src, exec::MemoryTier src_tier, int64_t n,
                   exec::StreamKind stream) override {
      if (d_.recording()) {
        return d_.Record([=, this] { Inner().CopyAsync(dst, dst_tier, src, src_tier, n, stream); });
      }
      Inner().CopyAsync(dst, dst_tier, src, src_tier, n, stream);
    }
    void ReleaseGraphBlocks() {
      graph_free_.Drain([this](float* block, int64_t floats) { Inner().Free(block, floats, exec::MemoryTier::kDevice); });
      graph_blocks_.clear();
    }

   private:
    exec::DeviceMemory& Inner() { return d_.inner_->memory(); }
    void Refuse(const char* call) const {
      if (d_.recording()) throw std::logic_error(std::string(call) + " waits for the device: a capture cannot record it");
    }
    CapturingCpuDevice& d_;
    std::unordered_set<const float*> graph_blocks_;
    exec::BlockPool graph_free_;
  };

  class Clock final : public exec::DeviceClock {
   public:
    explicit Clock(CapturingCpuDevice& d) : d_(d) {}
    int64_t NowNs() override { return Inner().NowNs(); }
    int Stamp() override {
      if (!d_.recording()) return Inner().Stamp();
      const int index = static_cast<int>(graph_ns_[0].size());
      for (std::vector<int64_t>& instance : graph_ns_) instance.push_back(-1);
      d_.Record([this, index] { graph_ns_[static_cast<size_t>(d_.instance_)][static_cast<size_t>(index)] = NowNs(); });
      return exec::DeviceGraphs::kGraphStampBase + index;
    }
    int64_t StampNs(int id) override { return id >= exec::DeviceGraphs::kGraphStampBase ? Graph(id) : Inner().StampNs(id); }
    bool Reached(int id) override { return id >= exec::DeviceGraphs::kGraphStampBase || Inner().Reached(id); }
    void ClearStamps() override { Inner().ClearStamps(); }
    void ClearGraphStamps() {
      for (std::vector<int64_t>& instance : graph_ns_) instance.clear();
    }

   private:
    exec::DeviceClock& Inner() { return d_.inner_->clock(); }
    // A graph stamp's time in the instance its id names; one not reached (never launched) throws.
    int64_t Graph(int id) {
      const int offset = id - exec::DeviceGraphs::kGraphStampBase;
      const size_t instance = static_cast<size_t>(offset / exec::DeviceGraphs::kInstanceStride),
                   index = static_cast<size_t>(offset % exec::DeviceGraphs::kInstanceStride);
      const int64_t ns = graph_ns_.at(instance).at(index);
      if (ns < 0) throw std::logic_error("graph stamp " + std::to_string(id) + " read before its launch");
      return ns;
    }
    CapturingCpuDevice& d_;
    std::array<std::vector<int64_t>, exec::DeviceGraphs::kInstances> graph_ns_;
  };

  class Graphs final : public exec::DeviceGraphs {
   public:
    explicit Graphs(CapturingCpuDevice& d) : d_(d) {}
    void BeginCapture() override {
      if (d_.recording()) throw std::logic_error("a capture is already open");
      open_.clear();
      d_.recording_ = &open_;
    }
    int EndCapture() override {
      if (!d_.recording()) throw std::logic_error("no capture is open");
      d_.recording_ = nullptr;
      segments_.push_back(std::move(open_));
      return static_cast<int>(segments_.size()) - 1;
    }
    void AbandonCapture() noexcept override { d_.recording_ = nullptr; }
    bool capturing() const override { return d_.recording(); }
    void Launch(int segment, int instance) override {
      d_.instance_ = instance;
      for (const Call& call : segments_.at(static_cast<size_t>(segment))) call();
      ++d_.launches;
    }
    void Release() override {
      segments_.clear();
      d_.memory_.ReleaseGraphBlocks();
      d_.clock_.ClearGraphStamps();
    }
    int segments() const override { return static_cast<int>(segments_.size()); }

   private:
    CapturingCpuDevice& d_;
    std::vector<Call> open_;
    std::vector<std::vector<Call>> segments_;
  };

  // The device whose context a wrapped op was called with.
  static CapturingCpuDevice& Of(const exec::OpContext& cx) {
    for (CapturingCpuDevice* d : devices_) {
      if (&d->inner_->op_context() == &cx) return *d;
    }
    throw std::logic_error("a layer op called with the context of no capturing device");
  }
  static inline std::vector<CapturingCpuDevice*> devices_;
  std::unique_ptr<exec::Device> inner_;
  Memory memory_;
  Clock clock_;
  Graphs graphs_;
  exec::LayerOps table_{};
  std::vector<Call>* recording_ = nullptr;
  int instance_ = 0;
};

}  // namespace stagecraft::testing
