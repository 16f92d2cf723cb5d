// RankRun (the rank's record and final weights) <-> bytes, for gathering every rank's measurements on rank 0. Plain native-endian
// fields: the ranks of one job run the same binary.
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "stagecraft/exec/runtime.h"

#include "stagecraft/base/check.h"

namespace stagecraft::exec {
namespace {

class Writer {
 public:
  template <typename T>
  void Put(const T& value) {
    out_.append(reinterpret_cast<const char*>(&value), sizeof(T));
  }
  template <typename T>
  void PutVector(const std::vector<T>& values) {
    Put<int64_t>(static_cast<int64_t>(values.size()));
    out_.append(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
  }
  std::string Take() { return std::move(out_); }

 private:
  std::string out_;
};

class Reader {
 public:
  explicit Reader(const std::string& in) : in_(in) {}
  template <typename T>
  T Get() {
    T value;
    Read(&value, sizeof(T));
    return value;
  }
  template <typename T>
  std::vector<T> GetVector() {
    const auto n = Get<int64_t>();
    SC_CHECK(n >= 0 && static_cast<size_t>(n) * sizeof(T) <= in_.size() - at_, "rank run bytes are well formed");
    std::vector<T> values(static_cast<size_t>(n));
    Read(values.data(), values.size() * sizeof(T));
    return values;
  }
  bool done() const { return at_ == in_.size(); }

 private:
  void Read(void* dst, size_t bytes) {
    SC_CHECK(bytes <= in_.size() - at_, "rank run bytes are well formed");
    if (bytes == 0) return;  // an empty vector's data() may be null, which memcpy must not get
    std::memcpy(dst, in_.data() + at_, bytes);
    at_ += bytes;
  }
  const std::string& in_;
  size_t at_ = 0;
};

}  // namespace

std::string ClockId() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  if (!(in >> id)) return "";
  return id;
}

std::string SerializeRankRun(const RankRun& run) {
  Writer w;
  const schedules::RankRecord& rec = run.record;
  w.PutVector(rec.ops);
  w.PutVector(rec.memory);
  for (int64_t v : {rec.busy_ns, rec.first_f_start_ns, rec.last_compute_end_ns, rec.peak_memory_bytes,
                    rec.peak_host_memory_bytes}) {
    w.Put(v);
  }
  w.Put(rec.peak_inflight);
  w.Put(rec.peak_weight_versions);
  w.Put(rec.oom);
  w.PutVector(rec.losses);
  w.Put<int64_t>(static_cast<int64_t>(run.final_params.size()));
  for (const auto& p : run.final_params) w.PutVector(p);
  w.Put(run.clock_origin_ns);
  w.PutVector(std::vector<char>(run.clock_id.begin(), run.clock_id.end()));
  return w.Take();
}

RankRun ParseRankRun(const std::string& bytes) {
  Reader r(bytes);
  RankRun run;
  schedules::RankRecord& rec = run.record;
  rec.ops = r.GetVector<schedules::OpTiming>();
  rec.memory = r.GetVector<schedules::MemorySample>();
  for (int64_t* v : {&rec.busy_ns, &rec.first_f_start_ns, &rec.last_compute_end_ns, &rec.peak_memory_bytes,
                     &rec.peak_host_memory_bytes}) {
    *v = r.Get<int64_t>();
  }
  rec.peak_inflight = r.Get<int>();
  rec.peak_weight_versions = r.Get<int>();
  rec.oom = r.Get<bool>();
  rec.losses = r.GetVector<double>();
  const auto stages = r.Get<int64_t>();
  for (int64_t i = 0; i < stages; ++i) run.final_params.push_back(r.GetVector<float>());
  run.clock_origin_ns = r.Get<int64_t>();
  const std::vector<char> id = r.GetVector<char>();
  run.clock_id.assign(id.begin(), id.end());
  SC_CHECK(r.done(), "rank run bytes are well formed");
  return run;
}

}  // namespace stagecraft::exec
