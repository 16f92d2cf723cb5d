"""The Zero Bubble paper's facts (Qi et al., ICLR 2024) that several scripts share, read from
tests/data, one place each; no PyTorch needed:

  models()        its Table 3 models, from data/zero_bubble_table4.csv: layers, heads,
                  hidden, microbatch size and GPUs (= pipeline stages), seq SEQ;
  stage_layers()  how its runs split the layers over the stages (§5.1: the first and the last
                  stage hold one layer fewer than the others);
  profile()       its Appendix D profile, from data/zero_bubble_paper.csv: per model, the
                  pipeline size p and the median over its rows of each pass's F, B and W (us);
  pass_times()    the same medians as (F, B, W) per model.
"""
import os
import statistics
from collections import namedtuple

import data_table

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SEQ = 1024  # every Table 3 model's sequence length
Model = namedtuple("Model", "name layers heads hidden microbatch gpus")


def _rows(name):
    return data_table.rows(os.path.join(ROOT, "data", name))


def models():
    """{name: Model} in the table's order (1.5B, 6.2B, 14.6B, 28.3B)."""
    out = {}
    for r in _rows("zero_bubble_table4.csv"):
        out.setdefault(r["model"], Model(r["model"], int(r["layers"]), int(r["heads"]), int(r["hidden"]),
                                         int(r["microbatch"]), int(r["gpus"])))
    return out


def stage_layers(layers, p):
    """The layers of each of `p` stages: the end stages one fewer than the middle ones."""
    middle = (layers + 2) // p
    split = [middle - 1] + [middle] * (p - 2) + [middle - 1]
    if p < 2 or sum(split) != layers:
        raise ValueError(f"{layers} layers do not split over {p} stages as the paper's runs split them")
    return split


def middle_layers(model):
    """The layers of a middle stage of `model` (a Model), the stage the profile times."""
    return stage_layers(model.layers, model.gpus)[model.gpus // 2]


def profile():
    """{model: {p, f, b, w}}: the profile's pipeline size and median F, B and W (us)."""
    rows = {}
    for r in _rows("zero_bubble_paper.csv"):
        rows.setdefault(r["model"], []).append(r)
    return {m: dict(p=int(v[0]["p"]), **{k: statistics.median(float(r[f"{k}_us"]) for r in v) for k in "fbw"})
            for m, v in rows.items()}


def pass_times():
    """{model: (F, B, W)}: the profile's median of each pass (us)."""
    return {m: (v["f"], v["b"], v["w"]) for m, v in profile().items()}
