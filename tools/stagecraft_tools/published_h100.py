"""Part 7 of validate-published: Megatron-LM's weak scaling of GPT models on H100s
(data/megatron_lm_h100_2024.csv, the README's table of 2024-07), predicted with the roofline device
library as shipped (the H100's constants come from one GPU's kernel probes, never from a training
run), per row the model TFLOP/s per GPU predicted and published and the error. Both count FLOPs as
Megatron-LM did before 2025 (the whole square of attention scores): stagecraft's
model_tflops_per_device.

What the source states is stated: a vocabulary of 131,072, sequences of 4096, tensor-parallel
communication overlapped (--tp-comm-overlap, which needs sequence parallelism), the gradient
reduce overlapped with the backward (--overlap-grad-reduce: `grad_reduce_overlap`), the distributed
optimizer (ZeRO-1) with its weights' all-gather beside the next step (--overlap-param-gather:
`param_gather_overlap`), bf16 with fp32 gradients (Megatron-LM's default), H100s (DGX H100 nodes:
NVLink 4 inside a node, a 400 Gb/s NIC per GPU). What it does not state is taken as Megatron-LM's defaults and the shapes its
benchmarks use: Megatron's GPT block (GELU, a 4h feed-forward, dropout, tied embeddings), bf16 with
Transformer Engine's fused attention (`attention: flash`), Adam, a microbatch of one sequence, no
recompute, 1F1B without virtual stages."""
from . import published_moe, tables

TABLE = "megatron_lm_h100_2024.csv"
TOPOLOGY = published_moe.TOPOLOGY
SEQ, VOCAB = 4096, 131072


def scenario_text(row):
    """The scenario of a row: its GPT model and layout on DGX H100 nodes."""
    tp, pp, dp = int(row["tp"]), int(row["pp"]), int(row["dp"])
    microbatches = int(row["batch"]) // dp
    model = (f"layers: {row['layers']}, hidden: {row['hidden']}, heads: {row['heads']}, seq: {SEQ}, vocab: {VOCAB}, "
             "dtype: bf16, attention: flash")
    layout = (f"schedule: {'1f1b' if pp > 1 else 'gpipe'}, ranks: {pp}, data_parallel: {dp}, tensor_parallel: {tp}, "
              f"sequence_parallel: {str(tp > 1).lower()}, tensor_parallel_overlap: {str(tp > 1).lower()}, "
              "grad_reduce_overlap: true, param_gather_overlap: true, zero: 1, "
              f"microbatches: {microbatches}, microbatch_size: 1, steps: 1")
    return (f"name: megatron-lm-h100-{row['params_b']}b\ntopology: {TOPOLOGY}\nmodel:\n  transformer: {{{model}}}\n"
            f"pipeline: {{{layout}}}\ntraining: {{optimizer: adam, lr: 0.0001, dtype: bf16}}\n")


def predictions(sets=()):
    """(row, predicted TFLOP/s per GPU, error, the run's metrics) per row of the table."""
    out = []
    for row in tables.rows(TABLE):
        run = published_moe.simulate_on_nodes(scenario_text(row), row["gpus"], sets)
        predicted = run["model_tflops_per_device"]
        out.append((row, predicted, predicted / float(row["tflops_per_gpu"]) - 1, run))
    return out


def report(validation, verdict):
    """Appends the part's table and `verdict` line (published.verdict) to a published.Validation;
    its errors under "megatron_h100"."""
    out = validation.out
    out()
    out("Megatron-LM's weak scaling on H100s (data/megatron_lm_h100_2024.csv; not fitted to): TFLOP/s per GPU")
    out(f"{'model':>6} {'gpus':>5} {'t':>2} {'p':>3} {'d':>3} {'m':>4}  {'predicted':>9} {'published':>9} {'error':>7}  "
        f"{'bubble':>6}")
    errors = validation.errors.setdefault("megatron_h100", [])
    for row, predicted, error, run in predictions(validation.sets):
        errors.append(abs(error))
        out(f"{row['params_b'] + 'B':>6} {row['gpus']:>5} {row['tp']:>2} {row['pp']:>3} {row['dp']:>3} "
            f"{run['microbatches']:>4}  {predicted:>9.1f} {float(row['tflops_per_gpu']):>9.1f} {100 * error:>+6.1f}%  "
            f"{100 * run['bubble_fraction']:>5.1f}%" + ("  OOM" if run["oom"] else ""))
    out(verdict("Megatron-LM on H100s", errors))
