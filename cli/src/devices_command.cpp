// `stagecraft devices`: the backends this build has, the GPUs this machine offers, and whether
// the cuda backend can run here, with the reason when it cannot (exec/devices.h). The exit code
// answers scripts: 0 usable, 3 no cuda backend in this build, 4 no GPU, 5 a GPU it cannot use.
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "commands.h"
#include "stagecraft/base/output_file.h"
#include "stagecraft/exec/devices.h"
#include "stagecraft/schedules/json_out.h"

namespace stagecraft::cli {
namespace {

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

// The version as text, or null when the probe found none.
void VersionOrNull(schedules::JsonOut& out, std::string_view key, int version, std::string (*text)(int)) {
  out.Key(key);
  version > 0 ? out.String(text(version)) : out.Null();
}

void GpusJson(schedules::JsonOut& out, const exec::CudaProbe& p, const exec::DevicesVerdict& v) {
  out.Key("gpus").StartArray();
  for (size_t i = 0; i < p.gpus.size(); ++i) {
    const exec::GpuProbe& g = p.gpus[i];
    const exec::GpuVerdict& gv = v.gpus.at(i);
    out.StartObject().Key("index").Int(g.index).Key("name").String(g.name).Key("pci_bus_id").String(g.pci_bus_id);
    out.Key("memory_bytes").Int(g.memory_bytes).Key("free_bytes");
    g.free_bytes >= 0 ? out.Int(g.free_bytes) : out.Null();
    out.Key("compute_capability").String(std::to_string(g.major) + "." + std::to_string(g.minor));
    out.Key("compute_mode").String(ModeName(g.compute_mode)).Key("usable").Bool(gv.usable);
    out.Key("why").String(gv.why).Key("note").String(gv.note).EndObject();
  }
  out.EndArray();
}

std::string DevicesJson(const exec::CudaProbe& p, const exec::DevicesVerdict& v) {
  schedules::JsonOut out;
  out.StartObject().Key("status").String(StatusName(v.status));
  out.Key("exit_code").Int(exec::DevicesExitCode(v.status)).Key("usable").Bool(v.status == exec::DevicesStatus::kUsable);
  out.Key("reason").String(v.reason);
  out.Key("backends").StartObject().Key("cpu").Bool(true).Key("cuda").Bool(p.have_backend);
  out.Key("nccl").Bool(p.have_nccl).EndObject();
  VersionOrNull(out, "cuda_runtime", p.runtime_version, exec::CudaVersionText);
  VersionOrNull(out, "cuda_driver", p.driver_version, exec::CudaVersionText);
  VersionOrNull(out, "nccl", p.nccl_version, exec::NcclVersionText);
  out.Key("cuda_architectures").String(p.architectures);
  out.Key("cuda_visible_devices");
  p.visible_devices ? out.String(*p.visible_devices) : out.Null();
  GpusJson(out, p, v);
  out.Key("lines").Strings(v.lines);
  return out.EndObject().Take() + "\n";
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
