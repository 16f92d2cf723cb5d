"""The published tables in data/ (CSV with a header row; '#' lines hold their sources) and the
facts the tools derive from them, one place each:

  rows(name)          a table's rows, dicts from the header's names to the row's strings;
  MegatronRow & co.   Megatron-LM's SC'21 Table 1 (and Korthikanti et al.'s Table 5, MT-NLG's
                      system table) as --set overrides, the paper's layout and FLOP counts;
  zb_models(), stage_layers(), zb_profile(), zb_pass_times()
                      the Zero Bubble paper's Table 3 models, its stage split and its profile.
"""
import csv
import statistics
from collections import namedtuple

from .common import DATA, ToolError


def rows(name):
    """The rows of data/`name` (or of a path), each a dict; a ToolError naming the file when it
    is missing or a row does not match the header."""
    path = DATA / name if "/" not in str(name) else name
    try:
        with open(path) as fh:
            lines = [(n, line) for n, line in enumerate(fh, 1) if line.strip() and not line.startswith("#")]
    except OSError as e:
        raise ToolError(f"{path}: cannot read the table ({e.strerror})")
    if not lines:
        raise ToolError(f"{path}: no header row")
    header = next(csv.reader([lines[0][1]]))
    out = []
    for n, line in lines[1:]:
        cells = next(csv.reader([line]))
        if len(cells) != len(header):
            raise ToolError(f"{path}:{n}: {len(cells)} cells, the header names {len(header)}")
        out.append(dict(zip(header, cells)))
    return out


# --- Megatron-LM (Narayanan et al., SC'21, Table 1) and the tables on the same Selene A100s.
SEQ, VOCAB = 2048, 51200


class MegatronRow:
    """One row of SC'21 Table 1: its sizes, and the layout the paper ran it with (D and m derived
    from the GPUs and the batch; interleaved 1F1B where the row states layers per virtual stage)."""

    def __init__(self, r):
        self.params_b = r["params_b"]
        self.tflops_per_gpu = float(r["tflops_per_gpu"])
        lpvs = r["layers_per_virtual_stage"]
        chunks = int(r["layers"]) // (int(r["pipeline_parallel"]) * int(lpvs)) if lpvs else 1
        self._read(r, self.params_b + "B", f"megatron-sc21-{self.params_b}b", chunks)

    def _read(self, r, label, name, chunks):
        """What the tables state alike: the sizes, the GPUs and batch, and the layout."""
        self.label, self.name = label, name
        self.layers, self.hidden, self.heads = int(r["layers"]), int(r["hidden"]), int(r["heads"])
        self.gpus, self.global_batch = int(r["gpus"]), int(r["global_batch"])
        t, p, b = int(r["tensor_parallel"]), int(r["pipeline_parallel"]), int(r["microbatch"])
        d = self.gpus // (t * p)
        self.layout = {"schedule": "interleaved" if chunks > 1 else "1f1b", "ranks": p, "data_parallel": d,
                       "tensor_parallel": t, "microbatch_size": b, "microbatches": self.global_batch // (b * d),
                       "chunks": chunks}

    def model_sets(self):
        """The row's name, nodes and transformer as "k=v" overrides."""
        return [f"name={self.name}", f"topology.nodes={max(1, self.gpus // 8)}",
                f"model.transformer={{layers: {self.layers}, hidden: {self.hidden}, heads: {self.heads}, "
                f"seq: {SEQ}, vocab: {VOCAB}}}"]

    def layout_sets(self, layout=None):
        """A layout (default the paper's) as pipeline.* "k=v" overrides."""
        return [f"pipeline.{k}={v}" for k, v in (layout or self.layout).items()]

    def flops(self):
        """The paper's FLOPs per iteration, 96·B·s·l·h²·(1 + s/6h + V/16lh), recompute included."""
        l, h = self.layers, self.hidden
        return 96 * self.global_batch * SEQ * l * h * h * (1 + SEQ / (6 * h) + VOCAB / (16 * l * h))


class KorthikantiRow(MegatronRow):
    """One row of Korthikanti et al.'s Table 5: a model of its Table 3 with one recompute
    setting, on the same Selene A100s, no data parallelism; compared by iteration time."""

    def __init__(self, r):
        self._read(r, r["params"], f"korthikanti-2022-{r['params'].lower()}", int(r["chunks"]))
        self.iteration_s = float(r["iteration_s"])
        self.mfu_pct = float(r["mfu_pct"]) if r["mfu_pct"] else None
        self.layout.update({"recompute": r["recompute"], "sequence_parallel": r["sequence_parallel"],
                            # §6.2: "we overlap all-reduce communication with the linear weight's
                            # gradient computation" in the backward pass.
                            "tensor_parallel_overlap": "true"})

    def model_flops(self):
        """The paper's model FLOPs per iteration (its Equation 7), for its MFU."""
        l, h = self.layers, self.hidden
        return 72 * self.global_batch * l * SEQ * h * h * (1 + SEQ / (6 * h) + VOCAB / (12 * h * l))


class MtNlgRow(MegatronRow):
    """One row of Megatron-Turing NLG 530B's system performance (Smith et al. 2022, §2.4): plain
    1F1B; its microbatch size is not published, so the caller states it."""

    def __init__(self, r, microbatch):
        r = dict(r, microbatch=str(microbatch))
        self._read(r, f"{r['servers']} x 8", f"mt-nlg-530b-{r['servers']}-servers", 1)
        self.tflops_per_gpu = float(r["tflops_per_gpu"])


def megatron_rows(name="megatron_sc21_table1.csv", kind=MegatronRow):
    """Every row of a Megatron-family table as `kind`."""
    return [kind(r) for r in rows(name)]


# --- The Zero Bubble paper (Qi et al., ICLR 2024).
ZB_SEQ = 1024  # every Table 3 model's sequence length
ZbModel = namedtuple("ZbModel", "name layers heads hidden microbatch gpus")


def zb_models():
    """{name: ZbModel} of Table 3 (from zero_bubble_table4.csv), in the table's order."""
    out = {}
    for r in rows("zero_bubble_table4.csv"):
        out.setdefault(r["model"], ZbModel(r["model"], int(r["layers"]), int(r["heads"]), int(r["hidden"]),
                                           int(r["microbatch"]), int(r["gpus"])))
    return out


def stage_layers(layers, p):
    """The layers of each of `p` stages as the paper's runs split them (§5.1: the first and the
    last stage hold one layer fewer than the others)."""
    middle = (layers + 2) // p
    split = [middle - 1] + [middle] * (p - 2) + [middle - 1]
    if p < 2 or sum(split) != layers:
        raise ToolError(f"{layers} layers do not split over {p} stages as the paper's runs split them")
    return split


def middle_layers(model):
    """The layers of a middle stage of `model` (a ZbModel), the stage the profile times."""
    return stage_layers(model.layers, model.gpus)[model.gpus // 2]


def zb_profile():
    """{model: {p, f, b, w}}: Appendix D's pipeline size and median F, B and W (us) per model."""
    grouped = {}
    for r in rows("zero_bubble_paper.csv"):
        grouped.setdefault(r["model"], []).append(r)
    return {m: dict(p=int(v[0]["p"]), **{k: statistics.median(float(r[f"{k}_us"]) for r in v) for k in "fbw"})
            for m, v in grouped.items()}


def zb_pass_times():
    """{model: (F, B, W)}: the profile's median of each pass (us)."""
    return {m: (v["f"], v["b"], v["w"]) for m, v in zb_profile().items()}
