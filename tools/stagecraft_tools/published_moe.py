"""Part 6 of validate-published: mixture-of-experts and Llama-family runs (data/moe_llama_published.csv)
predicted with the roofline device library as shipped (nothing refitted), per row the model TFLOP/s
per GPU predicted and published (Megatron-LM's convention: 6 x the parameters a token uses + the
attention's 12·L·q·s, stagecraft's model_tflops_per_device) and the error.

The rows stagecraft can state: Megatron-style pipelines (1F1B, or interleaved 1F1B with the
published virtual stages), tensor and sequence parallelism, expert parallelism folded over the data
and tensor ranks, on H100s in bf16. What every row assumes where the source is silent: DGX H100
nodes (scenarios/topologies/dgx-h100.yaml: NVLink 4 inside a node, a 400 Gb/s NIC per GPU),
fused causal attention (`attention: flash`: Transformer Engine's default, and what Meta's
Llama 3 runs use), Megatron-LM's all-to-all dispatcher unless the row names DeepEP, no recompute beyond what that kernel does (the rows' fine-grained recompute of
norms and activation functions is not stated), Adam with fp32 master weights and Megatron's
distributed optimizer (ZeRO-1), dropless routing taken as balanced, and a microbatch of one
sequence where none is published. A row whose predicted run would not fit in 80 GiB says so
(`OOM`): its layout's memory is not what stagecraft counts. The rows left out are listed with
why (FP8, FSDP instead of a pipeline, MLA attention, sliding-window attention, an asymmetric
layout)."""
from . import common, tables

TABLE = "moe_llama_published.csv"
TOPOLOGY = common.SCENARIOS / "topologies" / "dgx-h100.yaml"
# Facts a row's model needs beyond the CSV's columns, each with its source.
HEAD_DIM = {
    # Qwen3-235B-A22B: kv_channels 128 (Megatron-MoE-ModelZoo model_configs/benchmarking/Qwen3-235B-A22B.yaml;
    # Hugging Face config head_dim 128): 64 query heads of 128 in a hidden of 4096.
    "Qwen3-235B-A22B": 128,
}
# Llama 3 405B: Meta's pipeline interleaves virtual stages (Llama 3 paper §3.3.2) without saying how
# many; taken as 2 per rank, stated before any prediction was made.
LLAMA3_CHUNKS = 2


def why_not(row):
    """Why a row is not predicted, or "" when it is."""
    notes = row["notes"]
    if row["precision"] != "bf16":
        return f"{row['precision']}: the device library states no FP8 rates"
    if not row["gpu"].startswith("H100"):
        return f"{row['gpu']}: not in the device library"
    if row["kv_heads"] == "":
        return "MLA attention (DeepSeek-V3), which model.transformer does not state"
    if "sliding-window" in notes or row["model"].startswith("GPT-OSS"):
        return "sliding-window attention and attention sinks in half the layers"
    if "FSDP" in notes and row["pp"] in ("", "1"):
        return "FSDP over the data-parallel ranks instead of a pipeline"
    if "+1f1b overlap" in notes:
        return "Megatron-LM's 1F1B all-to-all overlap (interleaved 1F1B has no overlapped F&B pairs here)"
    layers, pp, vp = int(row["layers"]), int(row["pp"] or 1), int(row["vp"] or 1)
    if layers < pp * vp:
        return f"{pp} x {vp} virtual stages for {layers} layers (the embedding and loss counted as layers)"
    return ""


def chunks_of(row):
    """The virtual stages per rank a row runs: its published VP, else Llama 3's assumed 2, else 1."""
    if row["vp"] not in ("", "1"):
        return int(row["vp"])
    return LLAMA3_CHUNKS if row["model"].startswith("Llama-3-405B") else 1


def scenario_text(row):
    """The scenario of a row: its model, layout and batch on DGX H100 nodes."""
    gpus, tp, pp = int(row["gpus"]), int(row["tp"] or 1), int(row["pp"] or 1)
    cp = int(row["cp"] or 1)
    dp = gpus // (tp * pp * cp)
    mbs = int(row["mbs"] or 1)
    microbatches = int(row["gbs"]) // (dp * mbs)
    chunks = chunks_of(row)
    model = (f"layers: {row['layers']}, hidden: {row['hidden']}, heads: {row['heads']}, kv_heads: {row['kv_heads']}, "
             f"ffn_hidden: {row['ffn_hidden']}, activation: swiglu, seq: {row['seq']}, vocab: {row['vocab']}, "
             f"dtype: bf16, dropout: false, attention: flash, tied_embeddings: {row['tied_embeddings'] or 'false'}")
    if row["model"] in HEAD_DIM:
        model += f", head_dim: {HEAD_DIM[row['model']]}"
    if row["experts"]:
        model += (f", moe: {{experts: {row['experts']}, top_k: {row['top_k']}, expert_hidden: {row['expert_hidden']}, "
                  f"shared_experts: {row['shared_experts'] or 0}, first_dense: {row['moe_first_dense_layers'] or 0}}}")
    layout = (f"ranks: {pp}, data_parallel: {dp}, tensor_parallel: {tp}, sequence_parallel: {str(tp > 1).lower()}, "
              f"zero: 1, microbatches: {microbatches}, microbatch_size: {mbs}, steps: 1")
    if row["ep"] not in ("", "1"):
        layout += f", expert_parallel: {row['ep']}"
        if "DeepEP" in row["notes"]:  # the row's dispatcher, as its source names it
            layout += ", moe_dispatcher: deepep"
    schedule = "interleaved" if chunks > 1 else "1f1b"
    if chunks > 1:
        layout += f", chunks: {chunks}"
    return (f"name: {row['id']}\ntopology: {TOPOLOGY}\nmodel:\n  transformer: {{{model}}}\n"
            f"pipeline: {{schedule: {schedule}, {layout}}}\ntraining: {{optimizer: adam, lr: 0.0001, dtype: bf16}}\n")


def predictions(sets=()):
    """(row, predicted TFLOP/s per GPU or None, error or None, why not, OOM) per row of the table."""
    out = []
    for row in tables.rows(TABLE):
        reason = why_not(row)
        if reason or not row["model_tflops_per_gpu"]:
            out.append((row, None, None, reason or "no TFLOP/s published", False))
            continue
        nodes = max(1, int(row["gpus"]) // 8)
        run = common.simulate(None, [f"topology.nodes={nodes}", *sets], text=scenario_text(row))[0]
        predicted = run["model_tflops_per_device"]
        out.append((row, predicted, predicted / float(row["model_tflops_per_gpu"]) - 1, "", run["oom"]))
    return out


def report(validation, verdict):
    """Appends the part's table and `verdict` line (published.verdict) to a published.Validation;
    its errors under "moe_llama"."""
    out = validation.out
    out()
    out("Mixture-of-experts and Llama-family runs (data/moe_llama_published.csv; not fitted to): model TFLOP/s per GPU")
    out(f"{'row':>48} {'gpus':>5} {'tp':>2} {'pp':>2} {'vp':>2} {'ep':>3}  {'predicted':>9} {'published':>9} {'error':>7}")
    errors = validation.errors.setdefault("moe_llama", [])
    skipped = []
    for row, predicted, error, reason, oom in predictions(validation.sets):
        if predicted is None:
            skipped.append(f"  {row['id']}: {reason}")
            continue
        errors.append(abs(error))
        out(f"{row['id']:>48} {row['gpus']:>5} {row['tp'] or 1:>2} {row['pp'] or 1:>2} {chunks_of(row):>2} "
            f"{row['ep'] or '-':>3}  {predicted:>9.1f} {float(row['model_tflops_per_gpu']):>9.1f} {100 * error:>+6.1f}%"
            + ("  OOM" if oom else ""))
    if errors:
        out(verdict("Mixture-of-experts and Llama-family runs", errors))
    out("not predicted:")
    for line in skipped:
        out(line)
