// Device: where tensors live and math runs (DESIGN.md §5), as the parts a backend implements
// each on its own: memory (tiers, accounting, copies: device_memory.h), streams (compute and a
// copy stream per direction: device_streams.h), clock (op stamps: device_clock.h), and the
// layer ops of its backend's column of the per-layer op table with the state they run with
// (layer_ops.h), and on cuda graphs (device_graphs.h). The cpu backend is OpenBLAS and the
// kernels/ host loops (cpu_device.h), the cuda backend cuBLAS and the kernels/ launchers
// (cuda_device.h). All tensors are fp32, row-major.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "stagecraft/exec/device_clock.h"
#include "stagecraft/exec/device_graphs.h"
#include "stagecraft/exec/device_memory.h"
#include "stagecraft/exec/device_streams.h"
#include "stagecraft/exec/layer_ops.h"

namespace stagecraft::exec {

// Owns its parts; destroying it releases them in the order its backend needs.
class Device {
 public:
  virtual ~Device() = default;
  virtual std::string Name() const = 0;
  virtual DeviceMemory& memory() = 0;
  virtual DeviceStreams& streams() = 0;
  virtual DeviceClock& clock() = 0;
  // The backend's column of the layer op table (LayerOpsFor), run as
  // ops().kind.op(op_context(), ...).
  virtual const LayerOps& ops() const = 0;
  virtual OpContext& op_context() = 0;
  // The graphs part (device_graphs.h); null for a device that runs every call at once.
  virtual DeviceGraphs* graphs() { return nullptr; }
};

// An owned tensor of `size` floats in a tier of a device's memory; move-only, freed through it.
class Buffer {
 public:
  Buffer() = default;
  Buffer(Device& device, int64_t size, MemoryTier tier = MemoryTier::kDevice)
      : memory_(&device.memory()), data_(memory_->Allocate(size, tier)), size_(size), tier_(tier) {}
  Buffer(Buffer&& other) noexcept { *this = std::move(other); }
  Buffer& operator=(Buffer&& other) noexcept {
    if (this != &other) {
      Reset();
      memory_ = std::exchange(other.memory_, nullptr);
      data_ = std::exchange(other.data_, nullptr);
      size_ = std::exchange(other.size_, 0);
      tier_ = other.tier_;
    }
    return *this;
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() { Reset(); }

  void Reset() {
    if (data_ != nullptr) memory_->Free(data_, size_, tier_);
    data_ = nullptr;
    size_ = 0;
  }
  float* data() { return data_; }
  const float* data() const { return data_; }
  int64_t size() const { return size_; }
  bool empty() const { return data_ == nullptr; }
  MemoryTier tier() const { return tier_; }

 private:
  DeviceMemory* memory_ = nullptr;
  float* data_ = nullptr;
  int64_t size_ = 0;
  MemoryTier tier_ = MemoryTier::kDevice;
};

// `b` moved into `tier` of `device`: a buffer there, the copy queued on `stream` after the compute
// queued so far (what made the data, and what last used the memory the new buffer comes from) and
// waited for, then the old buffer freed. Nothing when `b` is empty or already there. For what
// moves whole between the tiers and is not needed at once (spilled weights, optimizer state).
inline void MoveToTier(Device& device, Buffer* b, MemoryTier tier, StreamKind stream) {
  if (b->empty() || b->tier() == tier) return;
  Buffer moved(device, b->size(), tier);
  device.streams().OrderAfter(stream, StreamKind::kCompute);
  device.memory().CopyAsync(moved.data(), tier, b->data(), b->tier(), b->size(), stream);
  device.streams().Synchronize(stream);
  *b = std::move(moved);
}

}  // namespace stagecraft::exec
