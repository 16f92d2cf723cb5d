// Transfer fits, per-rank scales and overhead for calibrated profiles (see calibrate.h).
#include "stagecraft/harness/calibrate.h"

#include <algorithm>
#include <optional>
#include <utility>
#include <cmath>
#include <limits>

#include "stagecraft/base/stats.h"
#include "stagecraft/base/check.h"
#include "stagecraft/harness/profile_layers.h"
#include "stagecraft/schedules/bubble_split.h"
#include "stagecraft/schedules/shared_devices.h"
#include "stagecraft/schedules/weights.h"
#include "stagecraft/sim/collectives.h"
#include "stagecraft/sim/compute_streams.h"
#include "stagecraft/scenario/limits.h"

namespace stagecraft::harness {

using namespace stagecraft::exec;  // the executor's types, throughout
namespace {

constexpr int64_t kTag = 1;
constexpr int kUntimed = 5;
// Scales a profile can hold (and write with 4 decimals): anything outside is a broken timer.
constexpr double kMinScale = 1e-3, kMaxScale = 1e3;

int KindIndex(schedules::OpKind kind) {
  return schedules::CostIndex(kind);  // F, B, I, W: 0..3 (sim::StashKindIndex), STEP 4
}

}  // namespace

std::vector<PingPongPoint> PingPong(Transport& transport, Device& device, int a, int b,
                                    const std::vector<int64_t>& sizes, int repeats) {
  SC_CHECK(a != b && a < transport.size() && b < transport.size(), "a ping-pong between two ranks of the job");
  const int me = transport.rank();
  std::vector<PingPongPoint> out;
  for (const int64_t bytes : sizes) {
    SC_CHECK(bytes >= 4 && bytes % 4 == 0, "ping-pong sizes are whole floats");
    transport.Barrier();
    if (me != a && me != b) continue;
    const int64_t floats = bytes / 4;
    Buffer buffer(device, floats);
    device.memory().Fill(buffer.data(), 1.0f, floats);
    const int peer = me == a ? b : a;
    std::vector<int64_t> round_trips;
    for (int i = 0; i < kUntimed + repeats; ++i) {
      const int64_t start = device.clock().NowNs();
      if (me == a) {
        transport.Wait(transport.Isend(buffer.data(), floats, peer, kTag));
        transport.Wait(transport.Irecv(buffer.data(), floats, peer, kTag));
      } else {
        transport.Wait(transport.Irecv(buffer.data(), floats, peer, kTag));
        transport.Wait(transport.Isend(buffer.data(), floats, peer, kTag));
      }
      if (i >= kUntimed) round_trips.push_back(device.clock().NowNs() - start);
    }
    if (me == a) out.push_back({bytes, Median(round_trips) / 2});
  }
  transport.Barrier();
  return out;
}

int64_t WaitAfterCompute(Transport& transport, Device& device, int a, int b, int64_t bytes, int64_t compute_ns,
                         int repeats) {
  SC_CHECK(a != b && bytes >= 4 && bytes % 4 == 0, "a transfer of whole floats between two ranks");
  const int me = transport.rank();
  const int64_t floats = bytes / 4;
  Buffer buffer(device, floats);
  device.memory().Fill(buffer.data(), 1.0f, floats);
  // As in a pipeline: the receive is posted ahead, the send comes while the receiver computes
  // (a tenth of compute_ns after both left the barrier, so that b is out of MPI by then), and
  // both compute after posting, so neither moves the data from inside MPI meanwhile.
  const auto compute = [&](int64_t ns) {
    const int64_t spin_until = device.clock().NowNs() + ns;
    while (device.clock().NowNs() < spin_until) {
    }
  };
  std::vector<int64_t> waits;
  for (int i = 0; i < kUntimed + repeats; ++i) {
    Transport::Request r = -1;
    if (me == b) r = transport.Irecv(buffer.data(), floats, a, kTag);
    transport.Barrier();
    if (me == a) {
      compute(compute_ns / 10);
      r = transport.Isend(buffer.data(), floats, b, kTag);
      compute(compute_ns);
      transport.Wait(r);
    } else if (me == b) {
      compute(compute_ns);
      const int64_t start = device.clock().NowNs();
      transport.Wait(r);
      if (i >= kUntimed) waits.push_back(device.clock().NowNs() - start);
    }
  }
  transport.Barrier();
  return me == b ? Median(waits) : 0;
}

namespace {

// Least squares of y = intercept + slope·x over (x, y) points; nullopt without two distinct x.
// With `intercept_at_least_0`, a negative intercept is held at its bound, 0, and the slope
// refitted through the origin.
struct Line {
  double slope = 0, intercept = 0;
};
std::optional<Line> FitLine(const std::vector<std::pair<double, double>>& xy, bool intercept_at_least_0) {
  double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const auto& [x, y] : xy) {
    n += 1;
    sx += x;
    sy += y;
    sxx += x * x;
    sxy += x * y;
  }
  const double det = n * sxx - sx * sx;
  if (n < 2 || det <= 0) return std::nullopt;
  Line line{(n * sxy - sx * sy) / det, 0};
  line.intercept = (sy - line.slope * sx) / n;
  if (intercept_at_least_0 && line.intercept < 0) line = {sxy / sxx, 0};
  return line;
}

}  // namespace

sim::P2pProfile FitLatencyBandwidth(const std::vector<PingPongPoint>& points) {
  std::vector<std::pair<double, double>> xy;
  for (const PingPongPoint& p : points) xy.emplace_back(static_cast<double>(p.bytes), static_cast<double>(p.oneway_ns));
  const std::optional<Line> line = FitLine(xy, false);
  SC_CHECK(line.has_value(), "a latency-bandwidth fit needs two distinct sizes");
  sim::P2pProfile fit;
  fit.latency_ns = std::max<int64_t>(0, std::llround(line->intercept));  // slope: ns per byte
  fit.bytes_per_s = line->slope > 0 ? 1e9 / line->slope : 0;
  return fit;
}

std::vector<AllReducePoint> AllReduceTimes(ReplicaGroup& group, Device& device, const std::vector<int64_t>& sizes,
                                           int repeats) {
  std::vector<AllReducePoint> out;
  for (const int64_t bytes : sizes) {
    SC_CHECK(bytes >= 4 && bytes % 4 == 0, "all-reduce sizes are whole floats");
    const int64_t floats = bytes / 4;
    Buffer buffer(device, floats);
    device.memory().Fill(buffer.data(), 0.0f, floats);  // sums of zeros stay finite however often repeated
    group.host().Barrier();
    std::vector<int64_t> times;
    for (int i = 0; i < kUntimed + repeats; ++i) {
      const int64_t start = device.clock().NowNs();
      group.Wait(group.PostSum(buffer.data(), floats));
      if (i >= kUntimed) times.push_back(device.clock().NowNs() - start);
    }
    out.push_back({bytes, Median(times)});
  }
  group.host().Barrier();
  return out;
}

// Both invert the ring all-reduce as the simulator states it (sim::RingPasses): time = steps x
// latency + bus bytes / bus bandwidth.
std::optional<sim::CollectiveFit> FitAllReduce(const std::vector<AllReducePoint>& points, int ranks) {
  if (ranks < 2) return std::nullopt;
  const sim::RingPasses ring{sim::kAllReducePasses, ranks};
  std::vector<std::pair<double, double>> xy;  // (bus bytes, ns)
  for (const AllReducePoint& p : points) xy.emplace_back(ring.BusBytes(static_cast<double>(p.bytes)), static_cast<double>(p.ns));
  const std::optional<Line> line = FitLine(xy, true);  // intercept: steps x latency, at least 0
  if (!line || line->slope <= 0) return std::nullopt;
  return sim::CollectiveFit{std::llround(line->intercept / ring.Steps()), 1e9 / line->slope, ranks};
}

std::optional<double> InPipelineBusBandwidth(const std::vector<std::pair<int64_t, int64_t>>& reduces, int n,
                                             int64_t latency_ns) {
  if (n < 2) return std::nullopt;
  const sim::RingPasses ring{sim::kAllReducePasses, n};
  const double latency = ring.Steps() * static_cast<double>(latency_ns);
  std::vector<double> rates;
  for (const auto& [bytes, ns] : reduces) {
    if (static_cast<double>(ns) <= latency || bytes <= 0) continue;
    rates.push_back(ring.BusBytes(static_cast<double>(bytes)) * 1e9 / (static_cast<double>(ns) - latency));
  }
  if (rates.empty()) return std::nullopt;
  return Median(std::move(rates));
}

double OverlapFraction(const sim::P2pProfile& fit, int64_t bytes, int64_t wait_after_compute_ns) {
  if (fit.bytes_per_s <= 0) return 1;
  const double data_ns = static_cast<double>(bytes) * 1e9 / fit.bytes_per_s;
  return std::clamp(1 - static_cast<double>(wait_after_compute_ns) / data_ns, 0.0, 1.0);
}

namespace {

// Calls fn(rank, op index, kind index, measured ns, isolated ns) for every compute op and STEP
// of `s` from step `first_step` on that ran, in each rank's op order: the ops a calibration
// compares with their cost under `isolated`.
template <typename Fn>
void ForEachComparedOp(const schedules::Schedule& s, const schedules::RunRecord& record, const sim::CostTable& isolated,
                       int first_step, Fn fn) {
  const auto in_place = schedules::StepsInPlace(s);
  for (int r = 0; r < s.ranks(); ++r) {
    for (size_t i = 0; i < s.ops[r].size(); ++i) {
      const schedules::Op& op = s.ops[r][i];
      const int k = KindIndex(op.kind);
      const schedules::OpTiming& t = record.ranks[r].ops.at(i);
      if (k < 0 || op.step < first_step || t.start_ns < 0 || t.end_ns < t.start_ns) continue;
      fn(r, i, k, t.end_ns - t.start_ns, sim::OpDurationNs(isolated.stages.at(op.stage), op.kind, in_place[r][i]));
    }
  }
}

}  // namespace

void AddScaleSums(const schedules::Schedule& s, const schedules::RunRecord& record, const sim::CostTable& isolated,
                  int first_step, std::vector<ScaleSums>* sums) {
  SC_CHECK(static_cast<int>(sums->size()) == s.ranks() && static_cast<int>(record.ranks.size()) == s.ranks(),
           "one record and one sum per rank");
  ForEachComparedOp(s, record, isolated, first_step, [&](int r, size_t, int k, int64_t measured, int64_t cost) {
    (*sums)[r].measured[k] += static_cast<double>(measured);
    (*sums)[r].isolated[k] += static_cast<double>(cost);
  });
}

void AddStashSums(const schedules::Schedule& s, const schedules::RunRecord& record, const sim::CostTable& isolated,
                  int first_step, std::vector<StashSums>* sums) {
  SC_CHECK(static_cast<int>(sums->size()) == s.ranks() && static_cast<int>(record.ranks.size()) == s.ranks(),
           "one record and one sum per rank");
  const std::vector<std::vector<double>> depths = sim::StashDepths(s);
  ForEachComparedOp(s, record, isolated, first_step, [&](int r, size_t i, int k, int64_t measured, int64_t cost) {
    if (k >= static_cast<int>(StashSums::kKinds)) return;  // a STEP
    StashSums& sum = (*sums)[r];
    sum.measured[k] += static_cast<double>(measured);
    sum.isolated[k] += static_cast<double>(cost);
    sum.depth_isolated[k] += depths[r][i] * static_cast<double>(cost);
    sum.deepest = std::max(sum.deepest, depths[r][i]);
    if (cost > 0) {
      const double ratio = static_cast<double>(measured) / static_cast<double>(cost);
      ++sum.ops[k];
      sum.ratio_sum[k] += ratio;
      sum.ratio_squares[k] += ratio * ratio;
    }
  });
}

std::optional<sim::StashScale> StashOf(const StashSums& shallow, const StashSums& deep) {
  if (deep.deepest <= 0) return std::nullopt;
  sim::StashScale scale;
  scale.deep = std::min(deep.deepest, sim::kMaxStashDepth);
  for (size_t k = 0; k < StashSums::kKinds; ++k) {
    sim::StashSlope& out = scale.*sim::kStashFields[k].second;
    if (shallow.isolated[k] <= 0 || deep.isolated[k] <= 0 || shallow.measured[k] <= 0) continue;
    const double at = shallow.depth_isolated[k] / shallow.isolated[k];
    const double deep_at = deep.depth_isolated[k] / deep.isolated[k];
    out.at = std::min(at, sim::kMaxStashDepth);
    if (deep_at - at < 0.5) continue;
    const double shallow_ratio = shallow.measured[k] / shallow.isolated[k];
    const double ratio = (deep.measured[k] / deep.isolated[k]) / shallow_ratio;
    out.measured_slope = std::clamp((ratio - 1) / (deep_at - at), 0.0, sim::kMaxStashSlope);
    // Two standard errors of the difference of the runs' mean ratios, as a slope.
    const auto variance_of_mean = [&](const StashSums& s) {
      const double n = static_cast<double>(s.ops[k]);
      const double mean = s.ratio_sum[k] / n;
      return std::max(0.0, (s.ratio_squares[k] - n * mean * mean) / (n - 1)) / n;
    };
    if (shallow.ops[k] < 2 || deep.ops[k] < 2) {
      out.noise = std::numeric_limits<double>::infinity();
    } else {
      out.noise = 2 * std::sqrt(variance_of_mean(shallow) + variance_of_mean(deep)) / shallow_ratio / (deep_at - at);
    }
    out.slope = out.measured_slope > out.noise ? out.measured_slope : 0;
  }
  return scale;
}

double JitterSums::Cv() const { return pairs > 0 ? std::sqrt(sum / static_cast<double>(pairs)) : 0.0; }

void AddJitter(const schedules::Schedule& s, const schedules::RunRecord& record, const sim::CostTable& isolated,
               int first_step, JitterSums* sums) {
  // Per rank and kind F, B, I, W (not STEP), the ratios in op order.
  std::vector<std::vector<double>> ratios(static_cast<size_t>(s.ranks()) * 4);
  ForEachComparedOp(s, record, isolated, first_step, [&](int r, size_t, int k, int64_t measured, int64_t cost) {
    if (k < 4 && cost > 0) ratios[static_cast<size_t>(r) * 4 + k].push_back(static_cast<double>(measured) / cost);
  });
  for (const std::vector<double>& v : ratios) {
    if (v.size() < 2) continue;
    double mean = 0;
    for (const double x : v) mean += x;
    mean /= static_cast<double>(v.size());
    if (mean <= 0) continue;
    for (size_t i = 0; i + 1 < v.size(); ++i) {
      const double d = (v[i + 1] - v[i]) / mean;
      sums->sum += d * d / 2;
      ++sums->pairs;
    }
  }
}

sim::OpScale ScaleOf(const ScaleSums& sums, const sim::OpScale& fallback) {
  sim::OpScale scale = fallback;
  for (size_t k = 0; k < ScaleSums::kKinds; ++k) {
    if (sums.isolated[k] > 0 && sums.measured[k] > 0) {
      scale.*sim::kOpScaleFields[k].second = std::clamp(sums.measured[k] / sums.isolated[k], kMinScale, kMaxScale);
    }
  }
  return scale;
}

}  // namespace stagecraft::harness
