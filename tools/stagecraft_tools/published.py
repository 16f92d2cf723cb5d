"""Predicts published GPU training measurements with the roofline cost model and prints, per row,
predicted and published numbers and the error (docs/cost-model.md); the tables are in data/:
  1. Megatron-LM SC'21 Table 1 (TFLOP/s per GPU by the paper's FLOP count; the A100's constants
     were fitted once, to this table);
  2. Korthikanti et al. 2022, Table 5 (iteration time; the error as throughput);
  3. the same paper's Table 4 (one layer of its 22B model, forward and backward, read from
     `simulate --explain-json`);
  4. the Zero Bubble paper's Table 4 (samples per GPU per second, a step of a long run);
  5. Megatron-Turing NLG 530B's system performance (microbatch size unpublished: 1, 2 and 4; no target);
  6. mixture-of-experts and Llama-family runs (published_moe.py);
  7. Megatron-LM's weak scaling of GPT models on H100s (published_h100.py).
Targets per table: median |error| <= 5%, largest <= 10%. Exits 1 when table 1 misses them (any
table, with --strict). --zb-split adds part 4's schedule ratios with W's share split two ways."""
import statistics
import tempfile
from pathlib import Path

from . import common, published_h100, published_moe, tables

SCENARIO = common.SCENARIOS / "published" / "megatron-sc21.yaml"
ZB_VOCAB = 32000  # the Zero Bubble code release's vocabulary (the LLaMA tokenizer's)
MEDIAN_TARGET, LARGEST_TARGET = 0.05, 0.10


def within(errors):
    """Both targets met by these |errors| (fractions)."""
    return statistics.median(errors) <= MEDIAN_TARGET and max(errors) <= LARGEST_TARGET


def verdict(title, errors):
    return (f"{title}: median |error| {100 * statistics.median(errors):.1f}% (target <= 5%), largest "
            f"{100 * max(errors):.1f}% (target <= 10%): {'targets met' if within(errors) else 'targets not met'}")


class Validation:
    """The tables predicted with `sets` ("k=v" overrides for every row); each part appends its
    lines to `lines` and its |errors| to `errors[part]`."""

    def __init__(self, sets=()):
        self.sets = list(sets)
        self.lines, self.errors, self.zb_runs = [], {}, {}

    def out(self, line=""):
        self.lines.append(line)

    def step_seconds(self, row):
        return step_seconds(row, self.sets)

    def megatron(self):
        self.out(f"{'model':>8} {'gpus':>5} {'t':>2} {'p':>3} {'d':>3} {'b':>3} {'m':>4} {'v':>2}  "
                 f"{'predicted':>9} {'published':>9} {'error':>7}   (TFLOP/s per GPU)")
        errors = self.errors.setdefault("megatron", [])
        for r, predicted, error in megatron_predictions(self.sets):
            errors.append(abs(error))
            lay = r.layout
            self.out(f"{r.params_b + 'B':>8} {r.gpus:>5} {lay['tensor_parallel']:>2} {lay['ranks']:>3} {lay['data_parallel']:>3} "
                     f"{lay['microbatch_size']:>3} {lay['microbatches']:>4} {lay['chunks']:>2}  "
                     f"{predicted:>9.1f} {r.tflops_per_gpu:>9.1f} {100 * error:>+6.1f}%")
        self.out(f"median |error| {100 * statistics.median(errors):.1f}% (target <= 5%), largest {100 * max(errors):.1f}% "
                 "(target <= 10%)")

    def korthikanti5(self):
        self.out()
        self.out("Korthikanti et al. 2022, Table 5 (not fitted to): iteration time")
        self.out(f"{'model':>8} {'gpus':>5} {'p':>3} {'m':>4} {'v':>2} {'recompute':>9} {'sp':>2}  "
                 f"{'predicted':>9} {'published':>9} {'error':>7}   (seconds; error as throughput)")
        errors, runs = self.errors.setdefault("korthikanti5", []), {}
        for r in tables.megatron_rows("korthikanti_2022_table5.csv", tables.KorthikantiRow):
            predicted = self.step_seconds(r)
            runs.setdefault(r.label, {})[r.layout["recompute"]] = (predicted, r.iteration_s)
            error = r.iteration_s / predicted - 1
            errors.append(abs(error))
            lay = r.layout
            self.out(f"{r.label:>8} {r.gpus:>5} {lay['ranks']:>3} {lay['microbatches']:>4} {lay['chunks']:>2} "
                     f"{lay['recompute']:>9} {'y' if lay['sequence_parallel'] == 'true' else 'n':>2}  "
                     f"{predicted:>9.2f} {r.iteration_s:>9.2f} {100 * error:>+6.1f}%")
        gains = [f"{label} {100 * (t['full'][0] / t['selective'][0] - 1):.1f}% / {100 * (t['full'][1] / t['selective'][1] - 1):.1f}%"
                 for label, t in runs.items() if "full" in t and "selective" in t]
        self.out("throughput increase of sequence parallel + selective over full recompute, predicted / published: "
                 + ", ".join(gains))
        self.out(verdict("Korthikanti et al. 2022", errors))

    def korthikanti4(self):
        self.out()
        self.out("Korthikanti et al. 2022, Table 4 (not fitted to): one layer of the 22B model, ms")
        self.out(f"{'experiment':>24}  {'forward predicted / published':>29} {'error':>7}  "
                 f"{'backward predicted / published':>30} {'error':>7}")
        errors = self.errors.setdefault("korthikanti4", [])
        for r in tables.rows("korthikanti_2022_table4.csv"):
            forward, backward = layer_ms(explain(SCENARIO, [
                "topology.nodes=1", "model.transformer={layers: 48, hidden: 6144, heads: 64, seq: 2048, vocab: 51200}",
                "pipeline.ranks=1", "pipeline.data_parallel=1", "pipeline.tensor_parallel=8", "pipeline.microbatch_size=4",
                "pipeline.microbatches=1", f"pipeline.recompute={r['recompute']}",
                f"pipeline.sequence_parallel={r['sequence_parallel']}", "pipeline.tensor_parallel_overlap=true", *self.sets]))
            f_err, b_err = forward / float(r["forward_ms"]) - 1, backward / float(r["backward_ms"]) - 1
            errors += [abs(f_err), abs(b_err)]
            self.out(f"{r['experiment']:>24}  {forward:>14.2f} / {float(r['forward_ms']):>12.1f} {100 * f_err:>+6.1f}%  "
                     f"{backward:>15.2f} / {float(r['backward_ms']):>12.1f} {100 * b_err:>+6.1f}%")
        self.out(verdict("Korthikanti et al. 2022, one layer", errors))

    def zero_bubble(self):
        self.out()
        self.out("Zero Bubble paper, Table 4 (not fitted to): samples per GPU per second; peak memory, GiB")
        self.out(f"{'model':>6} {'gpus':>4} {'m':>4} {'schedule':>8}  {'predicted':>9} {'published':>9} {'error':>7}   "
                 f"{'memory':>6} {'published':>9}")
        errors, memory = self.errors.setdefault("zero_bubble", []), []
        for r in tables.rows("zero_bubble_table4.csv"):
            if r["schedule"] == "1f1b-i":
                continue  # one layer per chunk, an uneven split stagecraft's interleaved schedule does not make
            layers, p, b, m = int(r["layers"]), int(r["gpus"]), int(r["microbatch"]), int(r["microbatches"])
            topology = (f"topology: {{device: A100-SXM-80GB, nodes: {max(1, p // 8)}, devices_per_node: {min(p, 8)}, links: "
                        "[{scope: node, bandwidth: 300GB/s, latency: 2us}, {scope: cluster, bandwidth: 200Gbps, latency: 5us}]}\n")
            pipeline = (f"pipeline: {{schedule: {r['schedule']}, ranks: {p}, microbatches: {m}, microbatch_size: {b}, steps: 1, "
                        f"partition: {tables.stage_layers(layers, p)}}}\n")
            s = common.simulate(None, self.sets, text="name: zero-bubble-table-4\n" + topology +
                                f"model: {{transformer: {{layers: {layers}, hidden: {r['hidden']}, heads: {r['heads']}, "
                                f"seq: {tables.ZB_SEQ}, vocab: {ZB_VOCAB}}}}}\n" + pipeline +
                                "training: {optimizer: adam, lr: 0.0001, dtype: fp16}\n")[0]
            step_s = common.long_run_step_ms(s, 1000) / 1e3
            self.zb_runs[(r["model"], m, r["schedule"])] = dict(
                stages=s["stages"], topology=topology, pipeline=pipeline, step_s=step_s,
                activation_bytes=2 * tables.ZB_SEQ * b * int(r["hidden"]), samples_per_gpu_s=float(r["samples_per_gpu_s"]))
            predicted = m * b / step_s / p
            error = predicted / float(r["samples_per_gpu_s"]) - 1
            errors.append(abs(error))
            # The paper's "GB" read as Megatron-LM's memory report gives them (bytes / 2^20 / 1024).
            gib = max(x["peak_memory_bytes"] for x in s["per_rank"]) / 2**30
            memory.append(gib / float(r["memory_gb"]) - 1)
            self.out(f"{r['model']:>6} {p:>4} {m:>4} {r['schedule']:>8}  {predicted:>9.2f} {float(r['samples_per_gpu_s']):>9.2f} "
                     f"{100 * error:>+6.1f}%   {gib:>6.1f} {float(r['memory_gb']):>9.0f}")
        self.out(verdict("Zero Bubble paper", errors))
        self.out(f"Zero Bubble paper, peak memory of the busiest rank (not a target): {100 * min(memory):+.1f}% to "
                 f"{100 * max(memory):+.1f}%, median {100 * statistics.median(memory):+.1f}%")

    def mt_nlg(self):
        mtnlg = tables.rows("mt_nlg_2022_system.csv")
        self.out()
        self.out("Megatron-Turing NLG 530B, system performance (not fitted to; microbatch size not published, "
                 f"no target): TFLOP/s per GPU\n{'servers':>7} {'gpus':>5} {'d':>3} {'published':>9}   "
                 + "   ".join(f"{'b ' + str(b) + ': predicted':>16} {'error':>7}" for b in (1, 2, 4)))
        predictions = {}
        for r in mtnlg:
            cells = []
            for b in (1, 2, 4):
                row = tables.MtNlgRow(r, b)
                predicted = row.flops() / self.step_seconds(row) / row.gpus / 1e12
                predictions[(r["servers"], b)] = predicted
                cells.append(f"{predicted:>16.1f} {100 * (predicted / row.tflops_per_gpu - 1):>+6.1f}%")
            self.out(f"{r['servers']:>7} {r['gpus']:>5} {row.layout['data_parallel']:>3} {float(r['tflops_per_gpu']):>9.0f}   "
                     + "   ".join(cells))
        first, falls = mtnlg[0], []
        for r in mtnlg[1:]:
            published = float(r["tflops_per_gpu"]) / float(first["tflops_per_gpu"]) - 1
            predicted = ", ".join(f"b {b} {100 * (predictions[(r['servers'], b)] / predictions[(first['servers'], b)] - 1):+.1f}%"
                                  for b in (1, 2, 4))
            falls.append(f"{r['servers']} servers {100 * published:+.1f}% (predicted {predicted})")
        self.out(f"throughput relative to {first['servers']} servers, published: " + "; ".join(falls))

    def zb_split(self):
        """Part 4's ratios again with explicit costs: each stage's F, B, W as the roofline predicts
        them ("model split"), then each middle stage's F + B + W split as the paper's profile
        splits it. Same totals, same layout: only the split differs."""
        profile = tables.zb_pass_times()
        split_sets = [s for s in self.sets if not s.startswith("model.")]  # these runs state their costs
        steps = {}

        def step_s(key, as_profile):
            if (key, as_profile) not in steps:
                steps[(key, as_profile)] = split_step_s(self.zb_runs[key], profile[key[0]], as_profile, split_sets)
            return steps[(key, as_profile)]

        self.out()
        self.out("Zero Bubble paper, Table 4's schedule ratios against W's share of a middle stage (--zb-split):\n"
                 "throughput over 1F1B's at the same m, published and predicted (error); the roofline as above,\n"
                 "then explicit costs with the model's split and with the profile's (F : B : W of its Appendix D)\n"
                 f"{'model':>6} {'m':>4} {'schedule':>8}  {'published':>9}  {'roofline':>16}  {'model split':>16}  {'profile split':>16}")
        split_errors = {"roofline": [], "model": [], "profile": []}
        for (model, m, schedule), run in self.zb_runs.items():
            if schedule == "1f1b":
                continue
            base_key = (model, m, "1f1b")
            base = self.zb_runs[base_key]
            published = run["samples_per_gpu_s"] / base["samples_per_gpu_s"]
            predicted = {"roofline": base["step_s"] / run["step_s"],
                         "model": step_s(base_key, False) / step_s((model, m, schedule), False),
                         "profile": step_s(base_key, True) / step_s((model, m, schedule), True)}
            cells = []
            for key, value in predicted.items():
                split_errors[key].append(abs(value / published - 1))
                cells.append(f"{value:>7.4f} ({100 * (value / published - 1):+5.1f}%)")
            self.out(f"{model:>6} {m:>4} {schedule:>8}  {published:>9.4f}  " + "  ".join(cells))
        self.out("median |error| of the ratios: " + ", ".join(
            f"{key} {100 * statistics.median(v):.1f}% (largest {100 * max(v):.1f}%)" for key, v in split_errors.items()))


def step_seconds(row, sets=()):
    """A Megatron-family row's predicted step (s), its layout and `sets` on the published scenario."""
    return common.simulate(SCENARIO, [*row.model_sets(), *row.layout_sets(), *sets])[0]["step_time_ms"] / 1e3


def megatron_predictions(sets=()):
    """SC'21 Table 1 predicted: (row, TFLOP/s per GPU by the paper's FLOP count, error) per row."""
    out = []
    for r in tables.megatron_rows():
        predicted = r.flops() / step_seconds(r, sets) / r.gpus / 1e12
        out.append((r, predicted, predicted / r.tflops_per_gpu - 1))
    return out


def split_step_s(run, profile, as_profile, sets):
    """A step of a long run with each stage's explicit costs (the middle stages' F : B : W as
    `profile`'s when `as_profile`)."""
    f_share, b_share, w_share = (x / sum(profile) for x in profile)
    costs = {"forward": [], "backward_input": [], "backward_weight": []}
    for i, st in enumerate(run["stages"]):
        f, bi, w = st["forward_ms"], st["backward_input_ms"], st["backward_weight_ms"]
        if as_profile and 0 < i < len(run["stages"]) - 1:
            total = f + bi + w
            f, bi, w = total * f_share, total * b_share, total * w_share
        for key, value in zip(costs, (f, bi, w)):
            costs[key].append(f"{value:.6f}ms")
    lists = ", ".join(f"{key}: [{', '.join(v)}]" for key, v in costs.items())
    s = common.simulate(None, sets, text="name: zero-bubble-table-4-split\n" + run["topology"] +
                        f"model: {{costs: {{{lists}, activation_bytes: {run['activation_bytes']}, weight_bytes: 1MiB, "
                        "p2p_latency: 0}}\n" + run["pipeline"])[0]
    return common.long_run_step_ms(s, 1000) / 1e3


def explain(scenario, sets):
    """`stagecraft simulate --explain-json` of a scenario: {section id: section}."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "explain.json"
        common.run([common.cli(), "simulate", scenario, "--explain-json", out, *common.sets(sets)])
        return {s["id"]: s for s in common.read_json(out)["sections"]}


def layer_ms(sections):
    """One transformer block's forward and backward (ms) from --explain-json's sections: F; and
    I + W less what the tensor-parallel overlap hides, plus what recompute repeats inside I."""
    block = sections["block"]
    backward = block["pass_ms"]["I"] + block["pass_ms"]["W"] - block.get("overlap_saved_ms", 0.0)
    if "recompute" in sections:
        backward += sections["recompute"]["pass_ms"]["I"]
    return block["pass_ms"]["F"], backward


def main(argv):
    parser = common.ArgumentParser(prog="validate-published.sh", description=__doc__.splitlines()[0])
    parser.add_argument("--strict", action="store_true", help="exit 1 when any table misses the targets")
    parser.add_argument("--zb-split", action="store_true", help="the Zero Bubble ratios against W's share")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="an override for every row")
    args = parser.parse_args(argv)
    for s in args.set:
        if "=" not in s:
            raise common.usage_error(f"--set {s}: expected KEY=VALUE")
    v = Validation(args.set)
    v.megatron()
    v.korthikanti5()
    v.korthikanti4()
    v.zero_bubble()
    v.mt_nlg()
    published_moe.report(v, verdict)
    published_h100.report(v, verdict)
    if args.zb_split:
        v.zb_split()
    print("\n".join(v.lines))
    others = all(within(v.errors[k]) for k in ("korthikanti5", "korthikanti4", "zero_bubble", "moe_llama", "megatron_h100"))
    return 0 if within(v.errors["megatron"]) and (others or not args.strict) else 1


if __name__ == "__main__":
    raise SystemExit(common.entry("validate-published", main))
