"""scripts/zb-fork-layer.sh --compare: a GPU run's JSON of the Zero Bubble release's own stage
(stagecraft_tools.zb_fork_layer) beside the roofline list's prediction of one layer of the same shapes
on the GPU's device file: per model F, B and W per layer, measured and predicted, in the Zero
Bubble runtime's split (its W the weight GEMMs alone), and B/F and W/F beside the paper's A100
profile. Writes FILE's name with .compare.json for .json; needs neither the trees nor PyTorch."""
import json
import os

from . import block, common
from .common import ToolError


def compare(sc, path, device):
    """The comparison's lines; FILE.compare.json written beside the run."""
    run = block.load(path, "run")
    device = block.device_file(run, device)
    models = run["models"]
    FIELDS = ("hidden", "heads", "seq", "microbatch", "mean_ms", "paper_b_over_f", "paper_w_over_f")
    if not isinstance(models, dict):
        raise ToolError(f'{path}: not a run\'s JSON ("models" is a {type(models).__name__}, not {{"MODEL/JIT": ...}})')
    for key, m in models.items():
        if "/" not in key or not isinstance(m, dict) or any(f not in m for f in FIELDS) or \
                not isinstance(m["mean_ms"], dict) or any(not isinstance(m["mean_ms"].get(p), (int, float)) for p in "FBW"):
            raise ToolError(f"{path}: not a run's JSON (models['{key}'] is not MODEL/JIT with "
                     f"{', '.join(FIELDS)} and mean_ms {{F, B, W}})")
    lines = [f"The release's stage on {run['device']} against the list on {device}: per layer, ms, measured / predicted, "
             "in the Zero Bubble runtime's split (W: the weight GEMMs alone)",
             f"{'model':>6} {'TorchScript':>11} {'F':>15} {'B':>15} {'W':>15} {'B/F meas / pred / paper':>25} "
             f"{'W/F meas / pred / paper':>25}"]
    out = {"device": device, "run_device": run["device"], "models": {}}
    shapes = {}  # one prediction per shape: a model's fused and unfused runs share it
    for key, m in models.items():
        model, jit = key.split("/", 1)
        shape = (m["hidden"], m["heads"], m["seq"], m["microbatch"])
        if shape not in shapes:
            kernels, _ = block.explain(sc, device, *shape, "fp16", True)
            shapes[shape] = {k: v / 1e3 for k, v in block.passes(kernels)[1].items()}
        pred = shapes[shape]
        meas = m["mean_ms"]
        out["models"][key] = {"measured_ms": meas, "predicted_ms": pred}
        cells = " ".join(f"{meas[k]:>7.3f} / {pred[k]:<5.3f}" for k in "FBW")
        lines.append(f"{model:>6} {jit:>11} {cells} {meas['B'] / meas['F']:>7.3f} / {pred['B'] / pred['F']:.3f} / "
                     f"{m['paper_b_over_f']:.3f} {meas['W'] / meas['F']:>9.3f} / {pred['W'] / pred['F']:.3f} / "
                     f"{m['paper_w_over_f']:.3f}")
    target = (path[:-len(".json")] if path.endswith(".json") else path) + ".compare.json"
    with open(target + ".tmp", "w") as fh:
        json.dump(out, fh, indent=1)
    os.replace(target + ".tmp", target)
    return lines


def main(argv):
    usage = "usage: scripts/zb-fork-layer.sh --compare FILE [--device-file NAME]"
    if len(argv) == 1 and argv[0]:
        path, device = argv[0], ""
    elif len(argv) == 3 and argv[0] and argv[1] == "--device-file" and argv[2]:
        path, device = argv[0], argv[2]
    else:
        raise common.usage_error(usage)
    print("\n".join(compare(common.cli(), path, device)))
    return 0


if __name__ == "__main__":
    raise SystemExit(common.entry("zb-fork-layer.sh", main))
