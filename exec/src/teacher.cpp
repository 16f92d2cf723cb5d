// The MLP's training targets (model.h): the teacher's forward, one GEMM per microbatch on a
// device (BLAS on the cpu device, cuBLAS on the cuda one), so that building a dataset costs what
// one layer's forward costs there, however wide the model.
#include <algorithm>
#include <cmath>
#include <vector>

#include "stagecraft/exec/cpu_device.h"
#include "stagecraft/exec/device.h"
#include "stagecraft/exec/model.h"
#include "stagecraft/exec/runtime.h"

namespace stagecraft::exec {

void TeacherTargets(Device& device, const MlpModel& model, int rows, int64_t first, int64_t count, float* targets,
                    const std::function<void()>& after_each) {
  const int h = model.hidden;
  if (const auto& set = model.data) {  // a labelled set's classes (model.h)
    for (int64_t k = 0; k < count; ++k) {
      for (int r = 0; r < rows; ++r) targets[k * rows + r] = set->labels[set->RowOf(first + k, rows, r)];
      if (after_each) after_each();
    }
    return;
  }
  const float scale = 2.0f * std::sqrt(3.0f / static_cast<float>(h));
  Buffer w(device, static_cast<int64_t>(h) * h), b(device, h);
  {
    std::vector<float> host(static_cast<size_t>(h) * h);
    for (size_t i = 0; i < host.size(); ++i) host[i] = scale * UniformAt(model.seed, kTeacherStream, i);
    device.memory().Upload(w.data(), host.data(), w.size());
    for (int o = 0; o < h; ++o) host[static_cast<size_t>(o)] = 0.1f * UniformAt(model.seed, kTeacherStream + 1, o);
    device.memory().Upload(b.data(), host.data(), h);
  }
  const int64_t n = static_cast<int64_t>(rows) * h;
  Buffer x(device, n), z(device, n);
  std::vector<float> host_x(static_cast<size_t>(n)), host_y(static_cast<size_t>(n));
  const int64_t per = TargetFloats(model, rows);
  for (int64_t k = 0; k < count; ++k) {
    MicrobatchInput(model, rows, first + k, host_x.data());
    device.memory().Upload(x.data(), host_x.data(), n);
    // z = x W_tᵀ, then GELU(z + b_t) (written over x, read no more): the teacher's block, W_t
    // row-major [out][in].
    device.ops().linear.gemm(device.op_context(), false, true, rows, h, h, 1.0f, x.data(), w.data(), 0.0f, z.data());
    device.ops().bias_activation.forward(device.op_context(), kernels::Activation::kGelu, rows, h, z.data(), b.data(),
                                         nullptr, x.data());
    device.memory().Download(host_y.data(), x.data(), n);
    float* out = targets + k * per;
    if (model.loss == kernels::LossKind::kMse) {
      std::copy(host_y.begin(), host_y.end(), out);
    } else {
      for (int r = 0; r < rows; ++r) {
        const float* row = host_y.data() + static_cast<int64_t>(r) * h;
        out[r] = static_cast<float>(std::max_element(row, row + h) - row);  // the first of equal maxima
      }
    }
    if (after_each) after_each();
  }
}

void MicrobatchTargets(const MlpModel& model, int rows, int64_t first, int64_t count, float* targets,
                       const std::function<void()>& after_each) {
  const std::unique_ptr<Device> cpu = MakeCpuDevice();
  TeacherTargets(*cpu, model, rows, first, count, targets, after_each);
}

void MicrobatchTarget(const MlpModel& model, int rows, int64_t g, float* targets) {
  MicrobatchTargets(model, rows, g, 1, targets);
}

}  // namespace stagecraft::exec
