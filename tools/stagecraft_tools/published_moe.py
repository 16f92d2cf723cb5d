"""Part 6 of validate-published: mixture-of-experts and Llama-family runs (data/moe_llama_published.csv)
predicted with the roofline device library as shipped (nothing refitted). Per row the throughput
predicted and published, in tokens per second per GPU, and the error; the TFLOP/s beside them are
counted as the row's source counts (its `flops_convention`: Megatron-LM since 2025 halves the causal
attention scores, its earlier code and stagecraft's model_tflops_per_device count the whole
square), so a TFLOP/s published by one count is never held against a prediction made by another.
The published throughput is the row's step time or tokens/s where it states one, else its TFLOP/s
over its own count's FLOPs per token.

The rows stagecraft can state: Megatron-style pipelines (1F1B, or interleaved 1F1B with the
published virtual stages; Megatron-LM's combined 1F1B, interleaved-overlap, where the row overlaps
its all-to-alls), tensor and sequence parallelism, expert parallelism folded over the data
and tensor ranks, on H100s in bf16 or with FP8 linear layers (training.fp8). What every row assumes where the source is silent: DGX H100
nodes (scenarios/topologies/dgx-h100.yaml: NVLink 4 inside a node, a 400 Gb/s NIC per GPU),
fused causal attention (`attention: flash`: Transformer Engine's default, and what Meta's
Llama 3 runs use), Megatron-LM's all-to-all dispatcher unless the row names DeepEP (dispatcher_of),
the recompute its source states (whole layers, or Megatron-LM's modules: recompute_of), Adam with fp32 master
weights and Megatron's distributed optimizer (ZeRO-1; ZeRO-3 for FSDP without a pipeline), dropless routing taken as balanced, and a microbatch of one
sequence where none is published. A row whose predicted run would not fit in 80 GiB says so
(`OOM`): its layout's memory is not what stagecraft counts. GPT-OSS's attention sinks (a learned
logit per head in each softmax) and its clamped SwiGLU are stated as the plain kernels they
modify (their cost is the same kernels'), its experts' biases not at all. The rows left out are
listed with why (a GPU not in the device library, FSDP2 beside a pipeline, MLA without its latents,
an asymmetric layout). Context parallelism is stated as the row states it (pipeline.context_parallel:
each sequence split over CP devices, Transformer Engine's ring of key-value exchanges)."""
import collections
import re

from . import common, tables
from .published_models import BIASED, HEAD_DIM, MLA, NODE_LIMIT, VOCAB_DIVISOR, VOCAB_DIVISORS, WINDOWS

TABLE = "moe_llama_published.csv"
TOPOLOGY = common.SCENARIOS / "topologies" / "dgx-h100.yaml"
# The GPUs a row may name and the topology of their nodes (each GPU's compute is the device file's).
TOPOLOGIES = {
    "H100": common.SCENARIOS / "topologies" / "dgx-h100.yaml",
    # The H800 is the H100 SXM's compute with NVLink cut to 400 GB/s (200 GB/s each way); DeepSeek's
    # nodes have a 400 Gb/s InfiniBand NIC per GPU (report §3.1).
    "H800": common.SCENARIOS / "topologies" / "h800-node.yaml",
}
# The FLOP count a row whose source does not state one is taken to use: PaLM's 6N + 12·L·H·Q·T,
# the count MFU figures are usually given in (Meta's Llama 3 paper quotes "BF16 MFU" without one).
UNSTATED_CONVENTION = "megatron"
# Megatron-MoE-ModelZoo sbatch_benchmarking.sh with A2A_OVERLAP=1: NVTE_FWD_LAYERNORM_SM_MARGIN and
# NVTE_BWD_LAYERNORM_SM_MARGIN 24, the SMs left to the all-to-alls, of the H100's 132.
OVERLAP_SM_SHARE = round(24 / 132, 3)
# Rows whose recipe, not their notes, says what they run (Megatron-Bridge @067f987d, each the HEAD
# perf recipe its notes name; not proven identical to the published container's run).
RECIPES = {
    # perf_recipes/qwen/h100/qwen3_moe.py qwen3_235b_a22b_pretrain_256gpu_h100_fp8cs_config:
    # CommOverlapConfig(overlap_moe_expert_parallel_comm=True, delay_wgrad_compute=True), the
    # all-to-all dispatcher, NVTE_FWD/BWD_LAYERNORM_SM_MARGIN 16.
    "mbridge_2604_01_qwen3_235b_h100_fp8": {"a2a_overlap_sms": 16},
    # perf_recipes/qwen/h100/qwen3_moe.py qwen3_30b_a3b_pretrain_16gpu_h100_fp8cs_config: the flex
    # dispatcher with the HybridEP backend (a token sent once over InfiniBand to each node that holds
    # its experts and on over NVLink, as DeepEP's), no all-to-all overlap, no recompute; its base
    # (recipes/qwen/h100/qwen3_moe.py) starts from recipes/common.py _pretrain_common
    # (overlap_grad_reduce=True). Its CUDA Graphs over the attention and the router are not stated.
    "mbridge_2604_01_qwen3_30b_a3b_h100_fp8": {"dispatcher": "deepep", "grad_reduce_overlap": True},
    # Megatron-MoE-ModelZoo sbatch_benchmarking.sh: PR=bf16 (its default) adds --tp-comm-overlap;
    # the Mixtral 8x22B script's runs and the Qwen3 long-context table's (PR=bf16 in its command).
    "mzoo_mixtral_8x22b_h100_bf16_forced": {"tp_overlap": True},
    "mzoo_mixtral_8x22b_h100_bf16_dropless": {"tp_overlap": True},
    **{f"mzoo_qwen3_235b_h100_bf16_tp4_cp{cp}_{k}k_{kind}": {"tp_overlap": True}
       for cp, k in ((1, 16), (2, 32), (4, 64), (8, 128)) for kind in ("forced", "dropless")},
    # perf_recipes/llama/h100/llama3.py llama3_70b_pretrain_64gpu_h100_fp8cs_config: pipeline layout
    # "Et*2|(t*2|)*34,t*3|(t*2|)*3,tL" (40 virtual stages: the embedding and 2 layers, 34 of 2, one
    # of 3, 3 of 2, 1 layer and the loss) and tensor-parallel communication overlap (userbuffers); its
    # base (recipes/llama/h100/llama3.py) starts from recipes/common.py _pretrain_common, whose
    # distributed data parallelism overlaps the gradients' reduce (overlap_grad_reduce=True).
    "mbridge_2604_01_llama3_70b_h100_fp8": {"partition": [2] * 35 + [3] + [2] * 3 + [1], "tp_overlap": True,
                                            "grad_reduce_overlap": True},
    # perf_recipes/llama/h100/llama31.py llama31_405b_pretrain_1024gpu_h100_fp8cs_config: TP 8, PP 8,
    # CP 2, VP 8, sequence parallelism, userbuffers' tensor-parallel overlap
    # (userbuffers_fp8_h100_h16384_tp8_cp2_mbs1_seqlen8192); its base (recipes/llama/h100/llama3.py
    # llama31_405b_pretrain_256gpu_h100_bf16_config) accounts for the embedding and the loss in the
    # pipeline split and has no layout: (126 + 2) / 64 = 2 slots a virtual stage, the first and the
    # last one layer each; _pretrain_common's overlap_grad_reduce as the 70B's.
    "mbridge_2604_01_llama31_405b_h100_fp8": {"partition": [1] + [2] * 62 + [1], "tp_overlap": True,
                                              "grad_reduce_overlap": True},
    # DeepSeek-V3's report (§3.2): DualPipe over 16 ranks, run here as DualPipe-V (the V-shaped
    # variant of DeepSeek's DualPipe repository: the same overlapped pairs over two chunks a rank,
    # one copy of the weights where DualPipe keeps two); 20 of the 132 SMs to communication
    # (§3.2.2); a token sent once over InfiniBand to each node that holds its experts and on over
    # NVLink (§3.2.2): DeepEP's dispatch; its tokens and the combine's gradients sent in FP8 (§3.3.2).
    "dsv3_paper_h800_fp8_2048gpu": {"schedule": "dualpipe-v", "chunks": 2, "a2a_overlap_sms": 20,
                                    "dispatcher": "deepep", "fp8_dispatch": True},
}
# The models whose pipeline split counts the embedding and the loss as a layer each, so the first
# stage holds the embedding and one layer fewer, the last the head and loss and one layer fewer
# (Megatron-LM's --account-for-embedding-in-pipeline-split and --account-for-loss-in-pipeline-split).
ACCOUNTS_EMBEDDING_AND_LOSS = {
    # Megatron-MoE-ModelZoo model_configs/benchmarking/Qwen3-235B-A22B.yaml sets both (and
    # runtime_configs/benchmarking/runtime.conf splits 96 "layers": "Account loss and embedding").
    "Qwen3-235B-A22B",
    # Llama 3 paper §3.3.2: "we reduce one Transformer layer each from the first and the last
    # stages, respectively. This means that the first model chunk on the first stage has only the
    # embedding, and the last model chunk on the last stage has only output projection and loss".
    "Llama-3-405B",
}
# The models whose configuration overlaps the gradients' reduce with the backward (Megatron-LM's
# --overlap-grad-reduce: pipeline.grad_reduce_overlap) and, the same configs, the weights'
# all-gather with the next step (--overlap-param-gather: pipeline.param_gather_overlap).
OVERLAPS_GRAD_REDUCE = {
    "Qwen3-235B-A22B",  # Megatron-MoE-ModelZoo model_configs/benchmarking/Qwen3-235B-A22B.yaml
    "GPT-OSS-120B",  # Megatron-Bridge recipes/common.py _pretrain_common: ddp.overlap_grad_reduce True
    "Mixtral-8x22B",  # Megatron-MoE-ModelZoo model_configs/benchmarking/Mixtral-8x22B.yaml
}
# Llama 3 405B: Meta's pipeline interleaves V virtual stages per rank (Llama 3 paper §3.3.2). The
# paper gives no number, but its split pins it: with one layer fewer on the first and last stages,
# "the first model chunk on the first stage has only the embedding", so a chunk is one slot of the
# (126 + 2) / 16 = 8 a rank holds: V = 8. (Until 2026-12-01 this was an assumed 2, which predicted
# the 8,192- and 16,384-GPU runs +12.7% and -1.2% but their ratio 0.83 against the published 0.93;
# V = 8 gives 0.92.)
LLAMA3_CHUNKS = 8


def why_not(row):
    """Why a row is not predicted, or "" when it is."""
    notes = row["notes"]
    if row["precision"] not in ("bf16", "fp8"):
        return f"{row['precision']}: not a precision this tool states"
    if not any(row["gpu"].startswith(gpu) for gpu in TOPOLOGIES):
        return f"{row['gpu']}: not in the device library"
    if "FSDP2" in notes and row["pp"] not in ("", "1"):
        # PyTorch's pipelining under FSDP2 gathers a stage's weights at its first microbatch and
        # reshards them after its last (torch.distributed.pipelining): ZeRO-1's traffic and memory,
        # but the run's stage split and schedule are an example's at HEAD, not the measured run's.
        return ("NeMo AutoModel (FSDP2 beside PyTorch's pipelining): its split of the layers into chunks and its "
                "schedule are an example's at HEAD, not the measured run's")
    if row["kv_heads"] == "" and row["model"] not in MLA:
        return "MLA attention: the row's columns do not state its latents (model.transformer.mla)"
    layers, stages = int(row["layers"]), int(row["pp"] or 1) * chunks_of(row)
    slots = layers + 2 if row["model"] in ACCOUNTS_EMBEDDING_AND_LOSS else layers
    if slots < stages or (slots != layers and slots % stages):
        return f"{stages} stages for {layers} layers{' and the embedding and loss' if slots != layers else ''}"
    return ""


def recipe_of(row):
    """What the row's recipe states (RECIPES), {} where nothing."""
    return RECIPES.get(row["id"], {})


def partition_of(row):
    """The layers of each stage a row's split gives, or None for Megatron-LM's even one: with the
    embedding and the loss counted as a layer each, (layers + 2) / stages a stage, the first and
    the last one fewer."""
    if "partition" in recipe_of(row):
        return recipe_of(row)["partition"]
    if row["model"] not in ACCOUNTS_EMBEDDING_AND_LOSS:
        return None
    stages = int(row["pp"] or 1) * chunks_of(row)
    per = (int(row["layers"]) + 2) // stages
    return [per - 1] + [per] * (stages - 2) + [per - 1] if stages > 1 else [int(row["layers"])]


def overlaps_a2a(row):
    """Whether the row runs Megatron-LM's combined 1F1B, its all-to-alls overlapped with another
    microbatch's compute (--overlap-moe-expert-parallel-comm): the ModelZoo's notes call it
    "+1f1b overlap", the Megatron Core MoE paper's settings "1F1B a2a overlap ON", Megatron-Bridge's
    recipes overlap_moe_expert_parallel_comm (RECIPES)."""
    return ("a2a_overlap_sms" in recipe_of(row) or
            re.search(r"\+1f1b overlap|1F1B a2a overlap ON", row["notes"]) is not None)


def dispatcher_of(row):
    """The row's token dispatcher as its source names it in the notes: "deepep" where they name
    DeepEP (not where they say "not DeepEP"), else Megatron-LM's "alltoall"."""
    if "dispatcher" in recipe_of(row):
        return recipe_of(row)["dispatcher"]
    return "deepep" if re.search(r"(?<!not )DeepEP", row["notes"]) else "alltoall"


def zero_of(row):
    """The row's data-parallel sharding: ZeRO-3 where FSDP shards its weights over the replicas
    without a pipeline (the ModelZoo's notes "FSDP 'On'": Megatron-FSDP, whose optim_grads_params
    gathers a layer's weights in each forward and backward and reduce-scatters its gradients; NeMo
    AutoModel's FSDP2, which shards over the data- and context-parallel devices together), else
    Megatron-LM's distributed optimizer, ZeRO-1."""
    fsdp = "FSDP 'On'" in row["notes"] or "FSDP2" in row["notes"]
    return 3 if fsdp and row["pp"] in ("", "1") else 1


# Megatron-LM's --recompute-modules names for what the rows' sources call them (the ModelZoo's "norm,
# act", the Megatron Core MoE paper's "up_proj", the DeepSeek-V3 report's RMSNorm and MLA up-projection).
RECOMPUTE_MODULES = {"norm": "layernorm", "RMSNorm": "layernorm", "act": "moe_act", "up_proj": "mla_up_proj",
                     "MLA_up_proj": "mla_up_proj"}


def recompute_of(row):
    """The row's recompute as pipeline keys: full for full recompute (NeMo AutoModel's
    activation_checkpointing checkpoints every block), selective with the modules its source names."""
    cell = row["recompute"]
    if cell in ("full", "activation_checkpointing"):
        return "recompute: full"
    if not cell.startswith("selective:"):
        return "recompute: none"
    modules = ", ".join(RECOMPUTE_MODULES.get(m, m) for m in cell.split(":", 1)[1].split("+"))
    return f"recompute: selective, recompute_modules: [{modules}]"


def context_comm_of(row):
    """How a context-parallel row passes the keys and values: "all_gather" for the Llama 3 paper's
    runs (§3.3.2: "an all-gather based method where we first all-gather the key (K) and value (V)
    tensors") and NeMo AutoModel's (PyTorch's context parallelism, its sharder's
    cp_rotate_method "allgather"), else Megatron-Core's default ring, "p2p" (cp_comm_type)."""
    return "all_gather" if "Llama 3 Herd" in row["source"] or "Automodel" in row["source"] else "p2p"


def chunks_of(row):
    """The virtual stages per rank a row runs: its published VP, else Llama 3's 8 (LLAMA3_CHUNKS), else 1."""
    if "chunks" in recipe_of(row):
        return recipe_of(row)["chunks"]
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
    kv_heads = f"kv_heads: {row['kv_heads']}, " if row["kv_heads"] else ""
    model = (f"layers: {row['layers']}, hidden: {row['hidden']}, heads: {row['heads']}, {kv_heads}"
             f"ffn_hidden: {row['ffn_hidden']}, activation: swiglu, seq: {row['seq']}, vocab: {row['vocab']}, "
             f"dtype: bf16, dropout: false, attention: flash, tied_embeddings: {row['tied_embeddings'] or 'false'}, "
             f"bias: {str(row['model'] in BIASED).lower()}")
    if row["model"] in HEAD_DIM:
        model += f", head_dim: {HEAD_DIM[row['model']]}"
    if row["model"] in MLA:
        model += ", mla: {" + ", ".join(f"{k}: {v}" for k, v in MLA[row["model"]].items()) + "}"
    if row["model"] in WINDOWS:
        size, full_every = WINDOWS[row["model"]]
        model += f", sliding_window: {{size: {size}, full_every: {full_every}}}"
    if row["experts"]:
        model += (f", moe: {{experts: {row['experts']}, top_k: {row['top_k']}, expert_hidden: {row['expert_hidden']}, "
                  f"shared_experts: {row['shared_experts'] or 0}, first_dense: {row['moe_first_dense_layers'] or 0}"
                  + (f", node_limit: {NODE_LIMIT[row['model']]}" if row["model"] in NODE_LIMIT else "") + "}")
    layout = (f"ranks: {pp}, data_parallel: {dp}, tensor_parallel: {tp}, sequence_parallel: {str(tp > 1).lower()}, "
              f"zero: {zero_of(row)}, microbatches: {microbatches}, microbatch_size: {mbs}, steps: 1, "
              f"{recompute_of(row)}")
    if cp > 1:
        layout += f", context_parallel: {cp}, context_parallel_comm: {context_comm_of(row)}"
    if row["ep"] not in ("", "1"):
        layout += f", expert_parallel: {row['ep']}"
        if dispatcher_of(row) == "deepep":
            layout += ", moe_dispatcher: deepep"
    schedule = "interleaved" if chunks > 1 else "1f1b"
    if row["model"] in OVERLAPS_GRAD_REDUCE or recipe_of(row).get("grad_reduce_overlap"):
        layout += ", grad_reduce_overlap: true" + (", param_gather_overlap: true" if zero_of(row) == 1 else "")
    partition = partition_of(row)
    if partition:
        layout += f", partition: [{', '.join(map(str, partition))}]"
    if overlaps_a2a(row):
        schedule = recipe_of(row).get("schedule", "interleaved-overlap")
        sms = recipe_of(row).get("a2a_overlap_sms")
        layout += f", a2a_overlap: {{enabled: true, sm_share: {round(sms / 132, 3) if sms else OVERLAP_SM_SHARE}}}"
    if recipe_of(row).get("tp_overlap"):
        layout += ", tensor_parallel_overlap: true"
    if chunks > 1:
        layout += f", chunks: {chunks}"
    topology = next(path for gpu, path in TOPOLOGIES.items() if row["gpu"].startswith(gpu))
    return (f"name: {row['id']}\ntopology: {topology}\nmodel:\n  transformer: {{{model}}}\n"
            f"pipeline: {{schedule: {schedule}, {layout}}}\ntraining: {{optimizer: adam, lr: 0.0001, dtype: bf16"
            f"{fp8_of(row)}}}\n")


def fp8_of(row):
    """The training keys of an FP8 row (training.fp8 and its scaling), "" for a bf16 one: per-tensor
    current scaling where the row's recipe is Megatron-Bridge's fp8cs ("current scaling" in its
    notes), blockwise where it scales by blocks (DeepSeek-V3's tiles, "FP8-BLK"), else delayed;
    fp8_dispatch where RECIPES says so."""
    if row["precision"] != "fp8":
        return ""
    notes = row["notes"]
    scaling = ("current" if "current scaling" in notes else
               "blockwise" if re.search(r"blockwise|FP8-BLK|tile/block", notes) else "delayed")
    dispatch = ", fp8_dispatch: true" if recipe_of(row).get("fp8_dispatch") else ""
    return f", fp8: true, fp8_scaling: {scaling}{dispatch}"


def flops_per_token(row, convention):
    """The model FLOPs of one token (forward and backward) as Megatron-LM counts them
    (`num_floating_point_operations`): 6 per weight of every GEMM a token passes through (the
    attention's projections, the dense or routed and shared experts' MLPs, the logits over the
    padded vocabulary; not the router) plus the attention scores and their product with V,
    12·L·q·s per token over the whole square ("megatron", PaLM's count), half that over the causal
    triangle ("megatron-causal"). `convention` "unstated" reads as UNSTATED_CONVENTION."""
    convention = UNSTATED_CONVENTION if convention == "unstated" else convention
    if convention not in ("megatron", "megatron-causal"):
        raise common.ToolError(f"{TABLE}: row {row['id']}: flops_convention '{convention}' is not one this tool counts")
    h, layers, seq, heads = int(row["hidden"]), int(row["layers"]), int(row["seq"]), int(row["heads"])
    head_dim = HEAD_DIM.get(row["model"], h // heads)
    q = heads * head_dim
    kv = int(row["kv_heads"] or heads) * head_dim
    gated = 3  # every row's MLP is SwiGLU, as scenario_text states it: gate, up and down
    dense_layers = int(row["moe_first_dense_layers"] or 0) if row["experts"] else layers
    moe_layers = layers - dense_layers
    mlp = dense_layers * gated * h * int(row["ffn_hidden"])
    if moe_layers:
        routed = int(row["top_k"]) + int(row["shared_experts"] or 0)
        mlp += moe_layers * gated * h * int(row["expert_hidden"]) * routed
    projections = layers * (h * (q + 2 * kv) + q * h)
    scored = q  # the scores' and the context's width a layer: (q + o) / 2
    if row["model"] in MLA:  # its downs, ups and projection; queries and keys head_dim + rope wide
        m = MLA[row["model"]]
        qk, o = heads * (head_dim + m["rope_head_dim"]), heads * m["v_head_dim"]
        rq, rkv = m["q_lora_rank"], m["kv_lora_rank"]
        projections = layers * (h * rq + rq * qk + h * (rkv + m["rope_head_dim"]) +
                                rkv * heads * (head_dim + m["v_head_dim"]) + o * h)
        scored = (qk + o) / 2
    step = VOCAB_DIVISORS.get(row["model"], VOCAB_DIVISOR) * int(row["tp"] or 1)
    vocab = -(-int(row["vocab"]) // step) * step
    return 6 * (mlp + projections + h * vocab) + 12 * scored * sum(scored_keys(row, convention))


def scored_keys(row, convention):
    """The keys each layer's queries are scored against by `convention`: the sequence (the whole
    square), its causal half, or in a layer with a sliding window (WINDOWS) of w < s the window
    (the whole-square count) or its causal mean w - w(w - 1)/(2s) (as Megatron-Bridge's FLOP count,
    flop_utils.py calculate_swa_context)."""
    seq, layers = int(row["seq"]), int(row["layers"])
    causal = convention == "megatron-causal"
    size, full_every = WINDOWS.get(row["model"], (0, 0))
    keys = []
    for layer in range(1, layers + 1):
        windowed = 0 < size < seq and (full_every == 0 or layer % full_every != 0)
        if windowed:
            keys.append(size - size * (size - 1) / (2 * seq) if causal else size)
        else:
            keys.append(seq / 2 if causal else seq)
    return keys


def published_tokens_per_s(row):
    """The row's throughput in tokens per second per GPU: its step time's or tokens/s, else its
    TFLOP/s over its own count's FLOPs per token."""
    tokens = int(row["gbs"]) * int(row["seq"])
    if row["step_time_s"]:
        return tokens / (float(row["step_time_s"]) * int(row["gpus"]))
    if row["tokens_per_s_per_gpu"]:
        return float(row["tokens_per_s_per_gpu"])
    if row["gpu_hours_per_trillion_tokens"]:
        return 1e12 / (float(row["gpu_hours_per_trillion_tokens"]) * 3600)
    return float(row["model_tflops_per_gpu"]) * 1e12 / flops_per_token(row, row["flops_convention"])


Prediction = collections.namedtuple(
    "Prediction", "row tokens_per_s published_tokens_per_s tflops error why_not oom run",
    defaults=(None, None, None, None, "", False, None))


def simulate_on_nodes(text, gpus, sets=()):
    """The first schedule's metrics of a scenario `text` on DGX H100 nodes holding `gpus` GPUs."""
    return common.simulate(None, [f"topology.nodes={max(1, int(gpus) // 8)}", *sets], text=text)[0]


def predictions(sets=()):
    """A Prediction per row of the table: the predicted and published tokens/s per GPU, the
    predicted TFLOP/s per GPU by the row's own FLOP count, the error of the throughput, or why
    the row is not predicted."""
    out = []
    for row in tables.rows(TABLE):
        reason = why_not(row)
        published = ("model_tflops_per_gpu", "step_time_s", "tokens_per_s_per_gpu", "gpu_hours_per_trillion_tokens")
        if reason or not any(row[key] for key in published):
            out.append(Prediction(row, why_not=reason or "no throughput published"))
            continue
        run = simulate_on_nodes(scenario_text(row), row["gpus"], sets)
        # The samples are the data-parallel replicas' (the metrics' data_parallel counts each
        # context-parallel device as a replica of the pipeline, as the gradients' reduce does).
        predicted = run["throughput_samples_per_s"] * int(row["seq"]) / int(row["gpus"])
        published = published_tokens_per_s(row)
        tflops = predicted * flops_per_token(row, row["flops_convention"] or UNSTATED_CONVENTION) / 1e12
        out.append(Prediction(row, predicted, published, tflops, predicted / published - 1, "", run["oom"], run))
    return out


def report(validation, verdict):
    """Appends the part's table and `verdict` line (published.verdict) to a published.Validation;
    its errors under "moe_llama"."""
    out = validation.out
    out()
    out("Mixture-of-experts and Llama-family runs (data/moe_llama_published.csv; not fitted to): tokens/s per GPU,")
    out("and model TFLOP/s per GPU by the FLOP count of the row's source (flops_convention)")
    out(f"{'row':>54} {'gpus':>5} {'tp':>2} {'cp':>2} {'pp':>2} {'vp':>2} {'ep':>3}  {'tokens/s predicted':>18} "
        f"{'published':>9} "
        f"{'error':>7}  {'TFLOP/s predicted':>17} {'published':>9}  count")
    errors = validation.errors.setdefault("moe_llama", [])
    skipped = []
    for p in predictions(validation.sets):
        row = p.row
        if p.tokens_per_s is None:
            skipped.append(f"  {row['id']}: {p.why_not}")
            continue
        errors.append(abs(p.error))
        count = row["flops_convention"] or "-"
        if count == "unstated":
            count = f"unstated, as {UNSTATED_CONVENTION}"
        published_tflops = f"{float(row['model_tflops_per_gpu']):>9.1f}" if row["model_tflops_per_gpu"] else f"{'-':>9}"
        out(f"{row['id']:>54} {row['gpus']:>5} {row['tp'] or 1:>2} {row['cp'] or 1:>2} {row['pp'] or 1:>2} {chunks_of(row):>2} "
            f"{row['ep'] or '-':>3}  {p.tokens_per_s:>18.1f} {p.published_tokens_per_s:>9.1f} {100 * p.error:>+6.1f}%  "
            f"{p.tflops:>17.1f} {published_tflops}  {count}" + ("  OOM" if p.oom else ""))
    if errors:
        out(verdict("Mixture-of-experts and Llama-family runs", errors))
    out("not predicted:")
    for line in skipped:
        out(line)
