// Loss against wall time (loss_plot.h).
#include "stagecraft/harness/loss_plot.h"

#include <algorithm>
#include <cstdint>

#include <fmt/format.h>

#include "png_canvas.h"
#include "stagecraft/base/check.h"
#include "stagecraft/base/error.h"

namespace stagecraft::harness {
namespace {

constexpr uint32_t kColors[] = {0x1f77b4, 0xff7f0e, 0x2ca02c, 0xd62728, 0x9467bd,
                                0x8c564b, 0xe377c2, 0x7f7f7f, 0xbcbd22, 0x17becf};

// One schedule's points: (seconds from the run's start, loss) at each step's end.
std::vector<std::pair<double, double>> PointsOf(const schedules::ExecutorMetrics& e) {
  std::vector<std::pair<double, double>> points;
  double ms = 0;
  for (size_t k = 0; k < e.losses.size() && k < e.step_ms.size(); ++k) {
    ms += e.step_ms[k];
    points.emplace_back(ms * 1e-3, e.losses[k]);
  }
  return points;
}

}  // namespace

std::string LossPng(const std::vector<schedules::ScheduleMetrics>& runs, int width, int height) {
  SC_CHECK(width >= 300 && height >= 200, "a plot large enough for its axes and legend");
  double x1 = 0, y0 = 1e300, y1 = -1e300;
  std::optional<double> target;
  for (const schedules::ScheduleMetrics& m : runs) {
    if (!m.executor) continue;
    if (m.executor->target_loss) target = m.executor->target_loss;
    for (const auto& [s, loss] : PointsOf(*m.executor)) {
      x1 = std::max(x1, s);
      y0 = std::min(y0, loss);
      y1 = std::max(y1, loss);
    }
  }
  if (y0 > y1) throw InputError("--plot: no schedule has a step with a loss to draw");
  if (target) y0 = std::min(y0, *target), y1 = std::max(y1, *target);
  const double dy = std::max(y1 - y0, 1e-9 + 0.05 * std::abs(y1));
  y0 -= 0.04 * dy, y1 += 0.04 * dy;
  x1 = x1 > 0 ? x1 * 1.02 : 1;
  Canvas canvas(width, height);
  const int left = 100, right = width - 190, top = 40, bottom = height - 60;
  const auto px = [&](double s) { return left + Cell(s, 0, x1, right - left); };
  const auto py = [&](double loss) { return bottom - Cell(loss, y0, y1, bottom - top); };
  canvas.Line(left, top, left, bottom, 0x000000);
  canvas.Line(left, bottom, right, bottom, 0x000000);
  for (int k = 0; k <= 4; ++k) {
    const double s = x1 * k / 4, loss = y0 + (y1 - y0) * k / 4;
    canvas.Line(px(s), bottom, px(s), bottom + 6, 0x000000);
    canvas.Text(px(s) - 12, bottom + 12, fmt::format("{:.3g}", s), 2, 0x000000);
    canvas.Line(left - 6, py(loss), left, py(loss), 0x000000);
    canvas.Text(8, py(loss) - 5, fmt::format("{:.4g}", loss), 2, 0x000000);
  }
  canvas.Text(left, height - 22, "WALL TIME (S) FROM THE START OF THE RUN", 2, 0x000000);
  const std::string title = target ? fmt::format("TRAINING LOSS PER STEP - TARGET {:.4g} GREY", *target)
                                   : std::string("TRAINING LOSS PER STEP");
  canvas.Text(8, 10, title, 2, 0x000000);
  if (target) {
    for (int x = left; x < right; x += 12) canvas.Line(x, py(*target), std::min(x + 6, right), py(*target), 0xa0a0a0);
  }
  int row = 0;
  for (size_t i = 0; i < runs.size(); ++i) {
    if (!runs[i].executor) continue;
    const uint32_t color = kColors[i % std::size(kColors)];
    const std::vector<std::pair<double, double>> points = PointsOf(*runs[i].executor);
    for (size_t k = 0; k < points.size(); ++k) {
      const int x = px(points[k].first), y = py(points[k].second);
      if (k > 0) canvas.Line(px(points[k - 1].first), py(points[k - 1].second), x, y, color);
      canvas.Fill(x - 2, y - 2, x + 2, y + 2, color);
    }
    const int ly = top + 4 + 22 * row++;
    canvas.Fill(right + 16, ly, right + 30, ly + 10, color);
    canvas.Text(right + 38, ly, runs[i].schedule, 2, 0x000000);
  }
  return canvas.Png();
}

}  // namespace stagecraft::harness
