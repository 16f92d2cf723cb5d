"""stagecraft's CPU executor against PyTorch, side by side on this machine (scripts/bench-vs-torch.sh):
  1. per-layer F, I, W: `stagecraft profile` vs the same math in PyTorch, one thread each;
  2. the main scenario (mlp-cpu.yaml, 2 ranks) vs PyTorch with no pipeline on 1 core and on 2 BLAS
     threads, same model, Adam, the same 8 x 64 microbatches per step;
  3. MLP 8 x Linear(1024) + ReLU, batch 256 as 4 microbatches, 2 ranks, vs a PyTorch GPipe over two
     gloo processes;
  4. each schedule of the main scenario against the ideal the simulator predicts from stagecraft's
     own per-layer profile, taken just before and just after that schedule runs (no PyTorch);
  5. the transformer (gpt-tiny-cpu.yaml): one block's forward and backward and a training step on
     one rank against the same GPT in PyTorch, one thread each; every schedule on 2 ranks against it.
End-to-end numbers are the median of REPEATS runs with their min..max. Without PyTorch (Debian's
python3-torch) the sections that need it are skipped, saying so."""
import json
import os
import statistics
import subprocess
import tempfile
from pathlib import Path

from . import common

MLP = common.SCENARIOS / "mlp-cpu.yaml"
GPT = common.SCENARIOS / "gpt-tiny-cpu.yaml"
WIDE = ["model.mlp.hidden=1024", "model.mlp.activation=relu", "pipeline.microbatch_size=64", "pipeline.microbatches=4",
        "pipeline.steps=10"]
TORCH_PYTHON = "/usr/bin/python3"  # Debian's interpreter, where python3-torch lives


def have_torch(python=TORCH_PYTHON):
    return subprocess.run([python, "-c", "import torch"], capture_output=True).returncode == 0


def torch_peer(*args, blas_threads=1, python=TORCH_PYTHON, timeout=None):
    """One measurement of stagecraft_tools.torch_peer under `python` (its JSON: stdout's last
    line, whatever PyTorch printed before it); a failure, or a run past `timeout` seconds, is a
    ToolError with its last line."""
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS=str(blas_threads),
               PYTHONPATH=str(common.ROOT / "tools"))
    what = f"torch_peer {' '.join(map(str, args))}"
    try:
        done = subprocess.run([python, "-m", "stagecraft_tools.torch_peer", *map(str, args)], capture_output=True,
                              text=True, env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise common.ToolError(f"{what}: no result within {timeout} s")
    except OSError as e:
        raise common.ToolError(f"{what}: cannot run {python}: {e.strerror}")
    if done.returncode != 0:
        raise common.ToolError(f"{what} failed: {(done.stderr.strip().splitlines() or ['?'])[-1]}")
    try:
        return json.loads((done.stdout.strip().splitlines() or [""])[-1])
    except ValueError:
        raise common.ToolError(f"{what}: no JSON on its last line of output")


def stats(values):
    """(median, "min..max") of numbers."""
    v = sorted(values)
    return statistics.median(v), f"{v[0]:.1f}..{v[-1]:.1f}"


def per_schedule(runs):
    """{schedule: [samples/s, one per run]} over execute --json contents."""
    out = {}
    for run in runs:
        for s in run["schedules"]:
            out.setdefault(s["schedule"], []).append(s["throughput_samples_per_s"])
    return out


def report(peer, peer_median, runs):
    """Per schedule its median samples/s, range and ratio to the peer's."""
    lines = []
    for name, v in per_schedule(runs).items():
        median, spread = stats(v)
        lines.append(f"stagecraft {name:<12} {median:10.1f}  ({spread})  {median / peer_median:.2f}x {peer}")
    return lines


def ns_to_us(text):
    """A profile's "1234ns" as microseconds."""
    if not str(text).endswith("ns"):
        raise common.ToolError(f"a profile time in ns expected, got '{text}'")
    return int(str(text)[:-2]) / 1e3


def layer_medians(profile):
    """A profile's (F, I, W) median over its layers, us."""
    layers = profile["layers"]
    return tuple(statistics.median(ns_to_us(l[k]) for l in layers) for k in ("forward", "backward_input", "backward_weight"))


def gpt_shape(scenario):
    """(L, C, NH, T, V, B, M) of a transformer scenario, as torch_peer takes them."""
    t, p = scenario["model"]["transformer"], scenario["pipeline"]
    return t["layers"], t["hidden"], t["heads"], t["seq"], t["vocab"], p.get("microbatch_size", 1), p["microbatches"]


def ideal_report(names, runs):
    """runs: {name: [(measured schedule, ideal before, ideal after) per repeat]}: per schedule its
    samples/s of the ideal (the mean of the two), by mean and by median step, and the drift."""
    out = ["of ideal: each run's samples/s against the mean of the ideals from the profiles just before and just after it;",
           "median step: the same with the run's median step time in place of its mean (a step the host slowed counts once).",
           f"{'schedule':<12} {'of ideal':>9} {'(min..max)':>14} {'median step':>12} {'(min..max)':>14}   every run; ideal after/before"]
    for name in names:
        v, vm, drift = [], [], []
        for m, before, after in runs[name]:
            ideal = (before + after) / 2
            v.append(100 * m["throughput_samples_per_s"] / ideal)
            vm.append(100 * m["throughput_samples_per_s"] * m["step_time_ms"] / statistics.median(m["step_ms"]) / ideal)
            drift.append(100 * (after / before - 1))
        out.append(f"{name:<12} {statistics.median(v):8.1f}% {f'({min(v):.1f}..{max(v):.1f})':>14} {statistics.median(vm):11.1f}% "
                   f"{f'({min(vm):.1f}..{max(vm):.1f})':>14}   " + " ".join(f"{x:.1f}" for x in v)
                   + "; " + " ".join(f"{x:+.1f}%" for x in drift))
    return out


class Bench:
    def __init__(self, repeats, tmp, sets, ideal_steps, profile_repeats):
        self.repeats, self.tmp, self.sets = repeats, Path(tmp), list(sets)
        self.ideal_steps, self.profile_repeats = ideal_steps, profile_repeats
        self.sc = common.cli()

    def execute(self, np, scenario, sets, name):
        path = self.tmp / f"{name}.json"
        common.mpirun(np, [self.sc, "execute", scenario, *common.sets(sets), "--json", path])
        return common.read_json(path)

    def layers(self):
        print("== 1/5 per-layer times, one thread (median us)")
        print(f"{'layer':<26} {'F ours':>10} {'F torch':>10} {'I ours':>10} {'I torch':>10} {'W ours':>10} {'W torch':>10}")
        for h, act in ((512, "gelu"), (1024, "relu")):
            common.run([self.sc, "profile", MLP, *common.sets([f"model.mlp.hidden={h}", f"model.mlp.activation={act}"]),
                        "--out", self.tmp / "profile.yaml"])
            f, i, w = layer_medians(common.read_yaml(self.tmp / "profile.yaml"))
            t = torch_peer("layers", h, 64, act)
            tf, ti, tw = t["forward_us"], t["backward_input_us"], t["backward_weight_us"]
            print(f"{f'Linear({h})+{act} [64x{h}]':<26} {f:10.1f} {tf:10.1f} {i:10.1f} {ti:10.1f} {w:10.1f} {tw:10.1f}   "
                  f"ours/torch F {f / tf:.2f} I {i / ti:.2f} W {w / tw:.2f}")

    def main_scenario(self):
        print("\n== 2/5 main scenario (mlp-cpu: 8 x Linear(512)+GELU, 8 x 64 per Adam step), samples/s")
        runs, t1, t2 = [], [], []
        for k in range(self.repeats):
            runs.append(self.execute(2, MLP, self.sets, f"main.{k}"))
            t1.append(torch_peer("train", 512, 8, 64, 8, 20, "gelu", 1)["samples_per_s"])
            t2.append(torch_peer("train", 512, 8, 64, 8, 20, "gelu", 1, blas_threads=2)["samples_per_s"])
        (m1, r1), (m2, r2) = stats(t1), stats(t2)
        print(f"{'PyTorch, no pipeline, 1 thread':<34} {m1:10.1f}  ({r1})\n{'PyTorch, no pipeline, 2 BLAS threads':<34} {m2:10.1f}  ({r2})")
        print("\n".join(report("PyTorch on 2 BLAS threads", m2, runs)))

    def wide(self):
        print("\n== 3/5 MLP 8 x Linear(1024)+ReLU, batch 256 as 4 x 64, 2 ranks, samples/s")
        runs, tg = [], []
        for k in range(self.repeats):
            runs.append(self.execute(2, MLP, [*self.sets, *WIDE], f"wide.{k}"))
            tg.append(torch_peer("gpipe", 1024, 8, 64, 4, 10, "relu")["samples_per_s"])
        m, r = stats(tg)
        print(f"{'PyTorch GPipe, two gloo processes':<34} {m:10.1f}  ({r})")
        print("\n".join(report("PyTorch GPipe", m, runs)))

    def ideal(self):
        """Every schedule against the ideals from profiles taken just before and just after it runs
        (profile, run, profile, run, ..., profile): the machine's speed drifts on a shared host."""
        print("== 4/5 every schedule of the main scenario against the ideal from its own profile")
        long = [*self.sets, f"pipeline.steps={self.ideal_steps}"]
        schedules = [(s["schedule"], s["chunks"]) for s in common.simulate(MLP, self.sets)]

        def profile_at(n):
            path = self.tmp / f"profile.{n}.yaml"
            common.mpirun(2, [self.sc, "profile", MLP, *common.sets(long), "--calibration-steps", "0", "--repeats",
                              self.profile_repeats, "--out", path])
            return path

        previous, runs = profile_at(0), {}
        for k in range(self.repeats):
            for name, chunks in schedules:
                one = [*long, f"pipeline.schedule={name}", f"pipeline.chunks={chunks}"]
                measured = self.execute(2, MLP, one, f"measured.{k}.{name}")["schedules"][0]
                after = profile_at(f"{k}.{name}")
                ideal = [common.simulate(MLP, [*one, f"model.profile={p}"])[0]["throughput_samples_per_s"] for p in (previous, after)]
                runs.setdefault(name, []).append((measured, *ideal))
                previous = after
        print("\n".join(ideal_report([n for n, _ in schedules], runs)))

    def gpt(self):
        scenario = common.read_yaml(GPT)
        L, C, NH, T, V, B, M = gpt_shape(scenario)
        print(f"== 5/5 transformer (gpt-tiny-cpu: {L} blocks, hidden {C}, {NH} heads, seq {T}, vocab {V}; "
              f"{M} x {B} sequences per Adam step)")
        common.run([self.sc, "profile", GPT, "--calibration-steps", "0", "--out", self.tmp / "gpt-profile.yaml"])
        f, i, w = layer_medians(common.read_yaml(self.tmp / "gpt-profile.yaml"))
        t = torch_peer("gpt_block", C, NH, T, B)
        tf, tb = t["forward_us"], t["backward_us"]
        print(f"{'one block, one thread (median us)':<34} {'F ours':>10} {'F torch':>10} {'B ours':>10} {'B torch':>10}")
        print(" " * 34, f"{f:10.0f} {tf:10.0f} {i + w:10.0f} {tb:10.0f}   ours/torch F {f / tf:.2f} B {(i + w) / tb:.2f}")
        ours, peer, runs = [], [], []
        for k in range(self.repeats):
            ours.append(self.execute(1, GPT, ["pipeline.ranks=1", "pipeline.schedule=gpipe"], f"gpt1.{k}")["schedules"][0]["step_time_ms"])
            peer.append(torch_peer("gpt_train", L, C, NH, T, V, B, M, 5)["step_ms"])
            runs.append(self.execute(2, GPT, [], f"gpt2.{k}"))
        (om, orange), (pm, prange) = stats(ours), stats(peer)
        print(f"{'PyTorch step, one thread (ms)':<34} {pm:10.1f}  ({prange})")
        print(f"{'stagecraft step, one rank (ms)':<34} {om:10.1f}  ({orange})  {om / pm:.2f} x PyTorch's time")
        peer_samples = M * B * 1e3 / pm
        print(f"2 ranks, samples/s against the PyTorch step on one thread ({peer_samples:.1f} samples/s):")
        print("\n".join(report("PyTorch, one thread", peer_samples, runs)))


def main(argv):
    parser = common.ArgumentParser(prog="bench-vs-torch.sh", description=__doc__.splitlines()[0])
    parser.add_argument("repeats", nargs="?", default="3", help="runs per end-to-end number (default 3)")
    only = parser.add_mutually_exclusive_group()
    only.add_argument("--gpt", action="store_true", help="section 5 alone")
    only.add_argument("--ideal", action="store_true", help="section 4 alone (no PyTorch)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="an override of mlp-cpu.yaml (sections 2 to 4)")
    parser.add_argument("--ideal-steps", default=os.environ.get("IDEAL_STEPS", "60"), help="section 4's steps (default 60)")
    parser.add_argument("--profile-repeats", default=os.environ.get("IDEAL_PROFILE_REPEATS", "60"),
                        help="section 4's profile repeats (default 60)")
    args = parser.parse_args(argv)
    repeats = common.positive_int(args.repeats, "REPEATS")
    steps = common.positive_int(args.ideal_steps, "--ideal-steps")
    profile_repeats = common.positive_int(args.profile_repeats, "--profile-repeats")
    common.simulate(MLP, args.set)  # a bad override stops here, with its line
    torch = args.ideal or have_torch()
    with tempfile.TemporaryDirectory() as tmp:
        bench = Bench(repeats, tmp, args.set, steps, profile_repeats)
        sections = ([bench.ideal] if args.ideal else [bench.gpt] if args.gpt else
                    [bench.layers, bench.main_scenario, bench.wide, bench.ideal, bench.gpt])
        for section in sections:
            if section != bench.ideal and not torch:
                print(f"SKIPPED: {section.__name__}: needs PyTorch ({TORCH_PYTHON} cannot import torch; "
                      "apt-get install python3-torch)")
                continue
            section()
            print()
    return 0


if __name__ == "__main__":
    raise SystemExit(common.entry("bench-vs-torch", main))
