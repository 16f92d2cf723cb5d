"""The models of data/moe_llama_published.csv beyond the table's columns, each fact with its source:
what published_moe states of a row's model (model.transformer) and counts of its FLOPs."""

# Facts a row's model needs beyond the CSV's columns, each with its source.
HEAD_DIM = {
    # Qwen3-235B-A22B: kv_channels 128 (Megatron-MoE-ModelZoo model_configs/benchmarking/Qwen3-235B-A22B.yaml;
    # Hugging Face config head_dim 128): 64 query heads of 128 in a hidden of 4096.
    "Qwen3-235B-A22B": 128,
    # Qwen3-30B-A3B: kv_channels 128 (Megatron-MoE-ModelZoo model_configs/benchmarking/Qwen3-30B-A3B.yaml):
    # 32 query heads of 128 in a hidden of 2048.
    "Qwen3-30B-A3B": 128,
    # GPT-OSS-120B: head_dim 64 (Hugging Face config; Megatron-Bridge's GPT-OSS bridge takes it
    # from there): 64 query heads of 64 in a hidden of 2880.
    "GPT-OSS-120B": 64,
    # DeepSeek-V3: 128 heads of 128 (plus 64 rotary) in a hidden of 7168 (its report, §4.2).
    "DeepSeek-V3-671B": 128,
}
# Multi-head latent attention (model.transformer.mla): the query and key-value latents' ranks, the
# rotary part and the values' width.
MLA = {
    # DeepSeek-V3 report §4.2 (and the Hugging Face config): q_lora_rank 1536, kv_lora_rank 512,
    # qk_rope_head_dim 64, v_head_dim 128.
    "DeepSeek-V3-671B": {"q_lora_rank": 1536, "kv_lora_rank": 512, "rope_head_dim": 64, "v_head_dim": 128},
}
# Node-limited routing (model.transformer.moe.node_limit): a token's experts on at most this many
# nodes of its expert group.
NODE_LIMIT = {
    # DeepSeek-V3 report §2.1.2 (M = 4); Megatron-MoE-ModelZoo's DeepSeek-V3.yaml:
    # --moe-router-num-groups 8 --moe-router-group-topk 4.
    "DeepSeek-V3-671B": 4,
}
# Sliding-window attention (model.transformer.sliding_window): the keys a query sees, itself
# included, and every how many layers one attends to its whole past.
WINDOWS = {
    # GPT-OSS-120B: Megatron-Bridge's gpt_oss_bridge.py (@067f987d) sets window_size =
    # (sliding_window - 1, 0) from the Hugging Face config's sliding_window 128, and
    # window_attn_skip_freq 2 (Megatron-LM: layer_number % 2 == 0, from 1, attends to all).
    "GPT-OSS-120B": (128, 2),
}
# The models whose attention and dense linear layers have biases (model.transformer.bias); the
# others have none: Qwen3's config sets --disable-bias-linear (the ModelZoo's Qwen3-235B-A22B.yaml),
# Mixtral's and Llama 3's have none.
BIASED = {
    "GPT-OSS-120B",  # Megatron-Bridge's gpt_oss_bridge.py: add_bias_linear True, add_qkv_bias True
}
# Megatron-LM pads the vocabulary to a multiple of (--make-vocab-size-divisible-by) x T: 128 unless
# the model's configuration says otherwise.
VOCAB_DIVISOR = 128
VOCAB_DIVISORS = {
    # Megatron-MoE-ModelZoo model_configs/benchmarking/Qwen3-235B-A22B.yaml: 1187 (x 128 = 151936).
    "Qwen3-235B-A22B": 1187,
    "Qwen3-30B-A3B": 1187,  # the ModelZoo's Qwen3-30B-A3B.yaml
}
