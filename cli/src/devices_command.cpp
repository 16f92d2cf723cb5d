// `stagecraft devices`: the backends this build has, the GPUs this machine offers, and whether
// the cuda backend can run here, with the reason when it cannot (exec/devices.h). The exit code
// answers scripts: 0 usable, 3 no cuda backend in this build, 4 no GPU, 5 a GPU it cannot use.
#include <cstdio>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "stagecraft/base/output_file.h"
#include "stagecraft/exec/devices.h"

namespace stagecraft::cli {
namespace {

using OrderedJson = nlohmann::ordered_json;

struct DevicesFlags {
  bool quiet = false;
  std::string json_path;
};

const char* StatusName(exec::DevicesStatus status) {
  switch (status) {
    case exec::DevicesStatus::kUsable: return "usable";
    case exec::DevicesStatus::kNoCudaBackend: return "no_cuda_backend";
    case exec::DevicesStatus::kNoGpu: return "no_gpu";
    case exec::DevicesStatus::kUnusable: return "unusable";
  }
  return "unusable";
}

const char* ModeName(exec::ComputeMode mode) {
  switch (mode) {
    case exec::ComputeMode::kDefault: return "default";
    case exec::ComputeMode::kExclusiveThread: return "exclusive_thread";
    case exec::ComputeMode::kProhibited: return "prohibited";
    case exec::ComputeMode::kExclusiveProcess: return "exclusive_process";
  }
  return "unknown";
}

OrderedJson VersionOrNull(int version, std::string (*text)(int)) {
  return version > 0 ? OrderedJson(text(version)) : OrderedJson(nullptr);
}

OrderedJson GpusJson(const exec::CudaProbe& p, const exec::DevicesVerdict& v) {
  OrderedJson gpus = OrderedJson::array();
  for (size_t i = 0; i < p.gpus.size(); ++i) {
    const exec::GpuProbe& g = p.gpus[i];
    const exec::GpuVerdict& gv = v.gpus.at(i);
    gpus.push_back({{"index", g.index},
                    {"name", g.name},
                    {"pci_bus_id", g.pci_bus_id},
                    {"memory_bytes", g.memory_bytes},
                    {"free_bytes", g.free_bytes >= 0 ? OrderedJson(g.free_bytes) : OrderedJson(nullptr)},
                    {"compute_capability", std::to_string(g.major) + "." + std::to_string(g.minor)},
                    {"compute_mode", ModeName(g.compute_mode)},
                    {"usable", gv.usable},
                    {"why", gv.why},
                    {"note", gv.note}});
  }
  return gpus;
}

std::string DevicesJson(const exec::CudaProbe& p, const exec::DevicesVerdict& v) {
  OrderedJson j;
  j["status"] = StatusName(v.status);
  j["exit_code"] = exec::DevicesExitCode(v.status);
  j["usable"] = v.status == exec::DevicesStatus::kUsable;
  j["reason"] = v.reason;
  j["backends"] = {{"cpu", true}, {"cuda", p.have_backend}, {"nccl", p.have_nccl}};
  j["cuda_runtime"] = VersionOrNull(p.runtime_version, exec::CudaVersionText);
  j["cuda_driver"] = VersionOrNull(p.driver_version, exec::CudaVersionText);
  j["nccl"] = VersionOrNull(p.nccl_version, exec::NcclVersionText);
  j["cuda_architectures"] = p.architectures;
  j["cuda_visible_devices"] = p.visible_devices ? OrderedJson(*p.visible_devices) : OrderedJson(nullptr);
  j["gpus"] = GpusJson(p, v);
  j["lines"] = v.lines;
  return j.dump(2, ' ', false, OrderedJson::error_handler_t::replace) + "\n";
}

int Run(const DevicesFlags& f) {
  OutputSet outputs;  // checked before the GPUs are asked
  const int json = f.json_path.empty() ? -1 : outputs.Add(f.json_path, "--json");
  const exec::CudaProbe probe = exec::ProbeCuda(/*open_contexts=*/true);
  const exec::DevicesVerdict verdict = exec::JudgeDevices(probe);
  if (json >= 0) {
    outputs.Set(json, DevicesJson(probe, verdict));
    outputs.Commit();
  }
  if (!f.quiet) {
    std::FILE* out = outputs.WritesStdout() ? stderr : stdout;
    for (const std::string& line : verdict.lines) std::fprintf(out, "%s\n", line.c_str());
  }
  return exec::DevicesExitCode(verdict.status);
}

}  // namespace

Command AddDevicesCommand(CLI::App& root) {
  auto flags = std::make_shared<DevicesFlags>();
  CLI::App* app = root.add_subcommand(
      "devices",
      "The backends of this build and the GPUs of this machine, and whether the cuda backend can run here (the "
      "last line says why not). Exit code: 0 usable, 3 no cuda backend in this build, 4 no GPU, 5 a GPU this "
      "build cannot use");
  app->add_flag("-q,--quiet", flags->quiet, "Print nothing; the exit code answers");
  app->add_option("--json", flags->json_path, "Write the probe and the verdict as JSON");
  return {app, [flags] { return Run(*flags); }};
}

}  // namespace stagecraft::cli
