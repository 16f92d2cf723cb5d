// A Device for tests of the runtime's clocks as a GPU drives them: the host posts work and the
// device reaches it later. The test sets the host's clock (host_ns) and the time the device's
// queue reaches the work queued so far (queue_ns); Stamp() marks that time, as a CUDA event
// recorded on the compute stream does. Memory is host memory; the math is never called here
// (each math call throws, so a test that reaches one fails loudly). A test may hold the device
// back (reached_ns), as a GPU whose queue waits for a receive that has not come.
#pragma once

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "stagecraft/exec/device.h"
#include "stagecraft/schedules/run_record.h"

namespace stagecraft::testing {

class QueuedDevice final : public exec::Device {
 public:
  std::string Name() const override { return "queued"; }

  float* Allocate(int64_t floats) override {
    Track(floats * static_cast<int64_t>(sizeof(float)));
    return new float[static_cast<size_t>(floats)]();
  }
  void Free(float* data, int64_t floats) override {
    Track(-floats * static_cast<int64_t>(sizeof(float)));
    delete[] data;
  }
  void Upload(float* dst, const float* host, int64_t n) override { std::memcpy(dst, host, Bytes(n)); }
  void Download(float* host, const float* src, int64_t n) override { std::memcpy(host, src, Bytes(n)); }
  void Copy(float* dst, const float* src, int64_t n) override { std::memcpy(dst, src, Bytes(n)); }
  void Fill(float* dst, float value, int64_t n) override {
    for (int64_t i = 0; i < n; ++i) dst[i] = value;
  }

  void Gemm(bool, bool, int, int, int, float, const float*, const float*, float, float*) override { Math(); }
  void Axpy(int64_t, float, const float*, float*) override { Math(); }
  void BiasActivation(kernels::Activation, int, int, float*, const float*, const float*, float*) override { Math(); }
  void ActivationBackward(kernels::Activation, int64_t, const float*, const float*, float*) override { Math(); }
  void BiasGrad(int, int, const float*, float*, bool) override { Math(); }
  void Loss(kernels::LossKind, int, int, const float*, const float*, float*, float*, float) override { Math(); }
  void SgdMomentum(int64_t, const float*, float*, float*, float*, float, float, float) override { Math(); }
  void Adam(int64_t, const float*, float*, float*, float*, float*, float, const kernels::AdamParams&) override {
    Math();
  }
  void GemmBatched(bool, bool, int, int, int, float, const float*, int64_t, const float*, int64_t, float, float*,
                   int64_t, int) override {
    Math();
  }
  void BiasAdd(int, int, float*, const float*, const float*) override { Math(); }
  void LayerNorm(int, int, const float*, const float*, const float*, float*, float*, float*) override { Math(); }
  void LayerNormBackwardInput(int, int, const float*, const float*, const float*, const float*, const float*, float*,
                              bool) override {
    Math();
  }
  void LayerNormBackwardWeight(int, int, const float*, const float*, const float*, const float*, float*, float*,
                               bool) override {
    Math();
  }
  void HeadsFromRows(int, int, int, int, const float*, int64_t, float*) override { Math(); }
  void RowsFromHeads(int, int, int, int, const float*, float*, int64_t) override { Math(); }
  void CausalSoftmax(int, int, float*) override { Math(); }
  void CausalSoftmaxBackward(int, int, const float*, float*) override { Math(); }
  void Embedding(int, int, int, const float*, const float*, const float*, float*) override { Math(); }
  void EmbeddingBackward(int, int, int, int, const float*, const float*, float*, float*, bool) override { Math(); }

  // The queue drains: the device catches up with the host.
  void Synchronize() override { queue_ns = std::max(queue_ns, host_ns); }
  int64_t NowNs() override { return host_ns; }
  int Stamp() override {
    stamps_.push_back(queue_ns);
    return static_cast<int>(stamps_.size()) - 1;
  }
  int64_t StampNs(int id) override { return stamps_.at(static_cast<size_t>(id)); }
  void ClearStamps() override { stamps_.clear(); }
  // A stamp is reached once the device has got as far as its time; after `catch_up_after`
  // polls (when not negative) the device has caught up with all of them.
  bool Reached(int id) override {
    ++reached_polls;
    if (catch_up_after >= 0 && reached_polls > catch_up_after) reached_ns = INT64_MAX;
    return stamps_.at(static_cast<size_t>(id)) <= reached_ns;
  }

  int64_t host_ns = 0;   // the host's clock now
  int64_t queue_ns = 0;  // when the device reaches the work queued so far
  int64_t reached_ns = INT64_MAX;  // how far the device has got (Reached): everything, unless told
  int catch_up_after = -1;
  int reached_polls = 0;

 private:
  static size_t Bytes(int64_t n) { return static_cast<size_t>(n) * sizeof(float); }
  [[noreturn]] static void Math() { throw std::logic_error("QueuedDevice: no math in a clock test"); }
  std::vector<int64_t> stamps_;
};

// A rank's record of `ops` ops, none timed yet: where a clock under test writes.
inline schedules::RankRecord EmptyRecord(size_t ops) {
  schedules::RankRecord record;
  record.ops.resize(ops);
  return record;
}

}  // namespace stagecraft::testing
