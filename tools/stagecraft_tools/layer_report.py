"""The layer probe's report (scripts/layer-probe.sh): a probe's JSON (one transformer block of each
Zero Bubble paper model timed kernel by kernel on a GPU, layer_probe.py) beside the roofline
model's kernel list for the same block (`simulate --explain-json` on the matching device file): per
model F, I and W per layer, B/F and W/F in the Zero Bubble runtime's split beside the paper's A100
profile, the kernels the model has most wrong, and what the run implies for the device file's
efficiencies. Writes OUT/layer-probe.md and OUT/layer-probe-compare.json; prints the report."""
import json
import os
import statistics

from . import block, common, tables


def run(sc, out, path, device, sets):
    """The report of the probe at `path` into folder `out` (its text returned); `sets` are
    simulate's --set arguments, flattened."""
    probe = block.load(path, "probe")
    models = probe["models"]
    device = block.device_file(probe, device)
    paper = tables.zb_pass_times()

    def explain(m):
        """The block's kernels as the model times them, {(pass, name): us}, and the device they were
        timed on with every field resolved (the --set overrides applied)."""
        return block.explain(sc, device, m["hidden"], m["heads"], m["seq"], m["microbatch"], probe["dtype"],
                             probe["dropout"] > 0, sets)

    md = [f"# The kernel list against {probe['device']} (PyTorch {probe.get('torch', '?')}, {probe['dtype']}, "
          f"dropout {probe['dropout']}, {'the fused kernels by torch.compile, ' if probe.get('fused') else ''}"
          f"median of {probe.get('reps', '?')}), predicted on {device}", "",
          "Per layer, ms. B/F and W/F in the Zero Bubble runtime's split (only the weight GEMMs in W); "
          "the paper's are its A100 profile (Appendix D), a whole stage.", "",
          "| model | F meas / pred | I meas / pred | W meas / pred | B/F meas / pred / paper | W/F meas / pred / paper "
          "| timed whole (Timer): F, I, W |", "| --- | --- | --- | --- | --- | --- | --- |"]
    detail, compare = [], {"device": device, "probe_device": probe["device"], "models": []}
    resolved = None  # the device file as simulate read it (the same for every model)
    for m in models:
        pred, resolved = explain(m)
        meas = {(k["pass"], k["name"]): k["us"] for k in m["kernels"]}
        missing = sorted(set(pred) ^ set(meas))
        if missing:
            raise common.ToolError(f"the probe's kernels and the list's differ: {missing[:6]}")
        (ms, mz), (ps, pz) = block.passes(meas), block.passes(pred)
        f, b, w = paper.get(m["model"], (float("nan"),) * 3)
        t = m["timer_us"]
        md.append(f"| {m['model']} | {ms['F']/1e3:.3f} / {ps['F']/1e3:.3f} | {ms['I']/1e3:.3f} / {ps['I']/1e3:.3f} | "
                  f"{ms['W']/1e3:.3f} / {ps['W']/1e3:.3f} | {mz['B']/mz['F']:.3f} / {pz['B']/pz['F']:.3f} / {b/f:.3f} | "
                  f"{mz['W']/mz['F']:.3f} / {pz['W']/pz['F']:.3f} / {w/f:.3f} | {t['F']/1e3:.3f}, {t['I']/1e3:.3f}, {t['W']/1e3:.3f} |")
        rows = sorted(((pred[k] / meas[k] - 1, k) for k in meas if meas[k] > 0), key=lambda r: -abs(r[0]) * meas[r[1]])
        detail.append(f"- {m['model']}: the kernels whose error costs most time (predicted / measured µs): " + "; ".join(
            f"{p} {n} {pred[(p, n)]:.0f} / {meas[(p, n)]:.0f} ({e:+.0%})" for e, (p, n) in rows[:6]))
        compare["models"].append({"model": m["model"], "measured_us": ms, "predicted_us": ps, "measured_zb_us": mz,
                                  "predicted_zb_us": pz, "paper_us": {"F": f, "B": b, "W": w},
                                  "kernels": [{"pass": p, "name": n, "measured_us": meas[(p, n)], "predicted_us": pred[(p, n)]}
                                              for (p, n) in meas]})
    md += [""] + detail

    # What this run says of the device file's three efficiencies (docs/cost-model.md, "Calibrating a
    # device from the layer probe"): each constant scales its class's time inversely, so the stated
    # value times the class's predicted / measured gives the value that would have predicted it (the
    # batched GEMMs' rate is max_efficiency x batched_efficiency, so theirs is over the GEMMs'). The
    # GEMMs and batched GEMMs by their median kernel; the memory-bound kernels by their summed time,
    # over the ones PyTorch runs as one kernel moving the list's bytes (the scale-mask-softmax, the
    # bias-dropout-adds, bias + GELU and the head split run as 2-3 kernels in PyTorch, one fused
    # kernel in Megatron-LM; the scores' input gradients add a scaling pass).
    LINEAR = {f"{n}{s}" for n in ("qkv", "proj", "fc", "fc2") for s in ("", ".dX", ".dW")}
    BATCHED = {"scores", "context", "context.dP", "context.dV"}
    GEMMS = LINEAR | BATCHED | {"scores.dQ", "scores.dK"}  # the probe's dQ and dK add a scaling pass to theirs
    SINGLE_MEMORY = {"ln1", "ln2", "qkv.bias", "merge_heads", "attention_dropout", "bias_dropout_add2.dX",
                     "bias_gelu.dX", "bias_dropout_add1.dX", "attention_dropout.dX", "softmax.dX", "split_heads.dX",
                     "fc2.db", "fc.db", "proj.db", "qkv.db", "ln2.dgamma", "ln1.dgamma"}
    stated = {"max_efficiency": resolved["gemm"]["max_efficiency"],
              "batched_efficiency": resolved["gemm"]["batched_efficiency"],
              "memory_efficiency": resolved["memory_efficiency"]}
    rates = resolved["memory_kernels"]
    launch_us = resolved["launch_overhead_ns"] / 1e3
    STREAMING = {"attention_dropout", "attention_dropout.dX", "bias_dropout_add1.dX", "bias_dropout_add2.dX", "bias_gelu.dX"}
    ratios = {"max_efficiency": [], "batched_efficiency": []}
    streaming = []
    mem_pred = mem_meas = 0.0
    # Each memory-bound kernel's own rate (the file's memory_kernels): its stated rate times its
    # predicted over measured time, launch taken off both, the median over the models.
    own = {}
    for m in compare["models"]:
        for k in m["kernels"]:
            if k["name"] not in GEMMS and k["measured_us"] > launch_us:
                own.setdefault(k["name"], []).append(
                    rates.get(k["name"], 1.0) * (k["predicted_us"] - launch_us) / (k["measured_us"] - launch_us))
            if k["name"] in LINEAR:
                ratios["max_efficiency"].append(k["predicted_us"] / k["measured_us"])
            elif k["name"] in BATCHED:
                ratios["batched_efficiency"].append(k["predicted_us"] / k["measured_us"])
            elif k["name"] in SINGLE_MEMORY:
                mem_pred, mem_meas = mem_pred + k["predicted_us"], mem_meas + k["measured_us"]
                if k["name"] in STREAMING:
                    streaming.append(k["predicted_us"] / k["measured_us"])
    implied = {key: statistics.median(v) for key, v in ratios.items() if v}
    if "batched_efficiency" in implied and "max_efficiency" in implied:  # batched GEMMs run at the product of both
        implied["batched_efficiency"] /= implied["max_efficiency"]
    if streaming:
        implied["memory_efficiency"] = statistics.median(streaming)
    compare["implied"] = {}
    md += ["", f"What this run implies for {device}'s file (the stated value x predicted / measured; GEMMs and batched "
           "GEMMs by their median kernel, memory_efficiency by the streaming elementwise kernels, dropout and the GELU's "
           "and bias-dropout-adds' backward, which move the list's bytes in one pass):", ""]
    for key, ratio in implied.items():
        name = ("gemm." if key != "memory_efficiency" else "") + key
        if key in stated:
            compare["implied"][name] = {"stated": stated[key], "scaled_by": ratio, "implied": stated[key] * ratio}
            md.append(f"- {name}: {stated[key] * ratio:.3f} (stated {stated[key]:g}; scaled by {ratio:.3f})")
    if mem_meas > 0:
        # The rest (LayerNorm, softmax backward, bias adds and sums, layout copies) run below the
        # streaming rate; one memory_efficiency cannot hold both, and it also bounds the GEMMs' streams.
        compare["memory_bound_predicted_over_measured"] = mem_pred / mem_meas
        md.append(f"- every memory-bound kernel PyTorch runs as one: summed predicted / measured {mem_pred / mem_meas:.3f} "
                  "(the list's one memory_efficiency also bounds the GEMMs' reads, so it is not fitted to these)")
    if own:
        own = {n: statistics.median(v) for n, v in own.items()}
        compare["implied"]["memory_kernels"] = own
        md += ["", f"Each memory-bound kernel's rate against memory_efficiency's (`memory_kernels` in {device}'s file; the "
               "median over the models, launch overhead taken off):", "", "```", "memory_kernels:"]
        md += [f"  {n}: {v:.2f}" for n, v in sorted(own.items())]
        md += ["```"]
    text = "\n".join(md) + "\n"
    for name, content in (("layer-probe.md", text), ("layer-probe-compare.json", json.dumps(compare, indent=1) + "\n")):
        with open(os.path.join(out, name + ".tmp"), "w") as fh:
            fh.write(content)
        os.replace(os.path.join(out, name + ".tmp"), os.path.join(out, name))
    return text


def main(argv):
    parser = common.ArgumentParser(prog="layer-probe.sh (report)", description=__doc__.splitlines()[0])
    parser.add_argument("json", help="the probe's JSON")
    parser.add_argument("--out", required=True, help="the report's folder")
    parser.add_argument("--device-file", default="", help="the device file to predict with (default: from the GPU's name)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="an override for the prediction")
    args = parser.parse_args(argv)
    print(run(common.cli(), args.out, args.json, args.device_file, common.sets(args.set)))
    return 0


if __name__ == "__main__":
    raise SystemExit(common.entry("layer-probe", main))
