"""Megatron-LM's weak-scaling table (Narayanan et al., SC'21, Table 1:
data/megatron_sc21_table1.csv) as the scripts read it: each row's model as --set overrides
of scenarios/published/megatron-sc21.yaml, the paper's own parallel layout, and the paper's FLOP
count per iteration. Shared by scripts/validate-published.sh and scripts/plan-megatron.sh."""
import data_table

SEQ, VOCAB = 2048, 51200


class Row:
    """One row: its sizes, and the layout the paper ran it with (D and m derived from the GPUs and
    the batch; interleaved 1F1B where the row states layers per virtual stage)."""

    def __init__(self, r):
        self.params_b = r["params_b"]
        self.tflops_per_gpu = float(r["tflops_per_gpu"])
        lpvs = r["layers_per_virtual_stage"]
        chunks = int(r["layers"]) // (int(r["pipeline_parallel"]) * int(lpvs)) if lpvs else 1
        self._read(r, self.params_b + "B", f"megatron-sc21-{self.params_b}b", chunks)

    def _read(self, r, label, name, chunks):
        """What both tables state alike: the model's sizes, the GPUs and batch, and the layout
        (D from the GPUs, m from the batch)."""
        self.label, self.name = label, name
        self.layers, self.hidden, self.heads = int(r["layers"]), int(r["hidden"]), int(r["heads"])
        self.gpus, self.global_batch = int(r["gpus"]), int(r["global_batch"])
        t, p, b = int(r["tensor_parallel"]), int(r["pipeline_parallel"]), int(r["microbatch"])
        d = self.gpus // (t * p)
        self.layout = {"schedule": "interleaved" if chunks > 1 else "1f1b", "ranks": p, "data_parallel": d,
                       "tensor_parallel": t, "microbatch_size": b, "microbatches": self.global_batch // (b * d),
                       "chunks": chunks}

    def model_sets(self):
        """The row's name, nodes and transformer as --set arguments."""
        return ["--set", f"name={self.name}", "--set", f"topology.nodes={max(1, self.gpus // 8)}",
                "--set", f"model.transformer={{layers: {self.layers}, hidden: {self.hidden}, heads: {self.heads}, "
                f"seq: {SEQ}, vocab: {VOCAB}}}"]

    def layout_sets(self, layout=None):
        """A layout (default the paper's) as pipeline.* --set arguments."""
        return sum((["--set", f"pipeline.{k}={v}"] for k, v in (layout or self.layout).items()), [])

    def flops(self):
        """The paper's FLOPs per iteration, 96·B·s·l·h²·(1 + s/6h + V/16lh), recompute included."""
        l, h = self.layers, self.hidden
        return 96 * self.global_batch * SEQ * l * h * h * (1 + SEQ / (6 * h) + VOCAB / (16 * l * h))


def rows(table, kind=None):
    """Every row of a table file, as `kind` (default Row: SC'21's)."""
    return [(kind or Row)(r) for r in data_table.rows(table)]


class Row2022(Row):
    """One row of Korthikanti et al.'s Table 5 (data/korthikanti_2022_table5.csv): a model of
    its Table 3 with one recompute setting, on the same Selene A100s as SC'21, no data
    parallelism; compared by iteration time."""

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


class RowMtNlg(Row):
    """One row of Megatron-Turing NLG 530B's system performance (Smith et al. 2022, §2.4;
    data/mt_nlg_2022_system.csv): the same model on more replicas, plain 1F1B; its microbatch
    size is not published, so the caller states it."""

    def __init__(self, r, microbatch):
        r = dict(r, microbatch=str(microbatch))
        self._read(r, f"{r['servers']} x 8", f"mt-nlg-530b-{r['servers']}-servers", 1)
        self.tflops_per_gpu = float(r["tflops_per_gpu"])
