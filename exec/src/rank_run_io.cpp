// RankRun <-> bytes, for gathering every rank's measurements on rank 0. Plain native-endian
// fields: the ranks of one job run the same binary.
#include <cstring>

#include "stagecraft/exec/runtime.h"

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
    SC_CHECK(at_ + bytes <= in_.size(), "rank run bytes are well formed");
    std::memcpy(dst, in_.data() + at_, bytes);
    at_ += bytes;
  }
  const std::string& in_;
  size_t at_ = 0;
};

}  // namespace

std::string SerializeRankRun(const RankRun& run) {
  Writer w;
  w.PutVector(run.ops);
  w.PutVector(run.memory);
  for (int64_t v : {run.busy_ns, run.wait_ns, run.loop_ns, run.first_f_start_ns, run.last_compute_end_ns,
                    run.peak_memory_bytes}) {
    w.Put(v);
  }
  w.Put(run.peak_inflight);
  w.Put(run.peak_weight_versions);
  w.PutVector(run.losses);
  w.Put<int64_t>(static_cast<int64_t>(run.final_params.size()));
  for (const auto& p : run.final_params) w.PutVector(p);
  return w.Take();
}

RankRun ParseRankRun(const std::string& bytes) {
  Reader r(bytes);
  RankRun run;
  run.ops = r.GetVector<OpTime>();
  run.memory = r.GetVector<std::pair<int64_t, int64_t>>();
  for (int64_t* v : {&run.busy_ns, &run.wait_ns, &run.loop_ns, &run.first_f_start_ns, &run.last_compute_end_ns,
                     &run.peak_memory_bytes}) {
    *v = r.Get<int64_t>();
  }
  run.peak_inflight = r.Get<int>();
  run.peak_weight_versions = r.Get<int>();
  run.losses = r.GetVector<double>();
  const auto stages = r.Get<int64_t>();
  for (int64_t i = 0; i < stages; ++i) run.final_params.push_back(r.GetVector<float>());
  SC_CHECK(r.done(), "rank run bytes are well formed");
  return run;
}

}  // namespace stagecraft::exec
