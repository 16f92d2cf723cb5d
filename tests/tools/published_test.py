"""scripts/validate-published.sh, scripts/device-grid.sh and stagecraft_tools.published /
device_grid / tables: the published tables read as the papers state them, hand-worked layouts and
FLOP counts, the --explain-json reading, and the scripts' reports and bad input."""
import re

import pytest

from conftest import one_error_line, run_script
from stagecraft_tools import common, device_grid, published, tables


def test_table_1_as_the_paper_states_it():
    rows = tables.megatron_rows()
    assert [r.params_b for r in rows] == ["1.7", "3.6", "7.5", "18.4", "39.1", "76.1", "145.6", "310.1", "529.6", "1008.0"]
    # Each row's TFLOP/s over the A100's 312 is the table's percent of peak (to its rounding).
    for r, raw in zip(rows, tables.rows("megatron_sc21_table1.csv")):
        assert abs(100 * r.tflops_per_gpu / 312 - float(raw["percent_of_peak"])) < 0.6


def test_layouts_by_hand():
    rows = {r.params_b: r for r in tables.megatron_rows()}
    # 39.1B: t 8, p 2 on 512 GPUs: d = 512 / 16 = 32; batch 1536 of microbatch 4: m = 1536 / (4 * 32) = 12.
    assert rows["39.1"].layout == {"schedule": "1f1b", "ranks": 2, "data_parallel": 32, "tensor_parallel": 8,
                                   "microbatch_size": 4, "microbatches": 12, "chunks": 1}
    # 76.1B: 60 layers, p 4, 5 layers per virtual stage: 60 / (4 * 5) = 3 chunks, interleaved.
    assert rows["76.1"].layout["chunks"] == 3 and rows["76.1"].layout["schedule"] == "interleaved"


def test_flop_count_by_hand():
    # 1.7B: 96 * 512 * 2048 * 24 * 2304^2 = 1.28245e16, times (1 + 2048 / 13824 + 51200 / 884736) = 1.206019:
    # 1.546683e16 FLOPs per iteration.
    assert abs(tables.megatron_rows()[0].flops() / 1.546683e16 - 1) < 1e-6


def test_stage_split_of_the_zero_bubble_runs():
    assert tables.stage_layers(22, 8) == [2, 3, 3, 3, 3, 3, 3, 2]  # 1.5B: 22 layers, the end stages one short
    with pytest.raises(common.ToolError, match="do not split"):
        tables.stage_layers(23, 8)


def test_layer_from_explain_json():
    sections = {"block": {"pass_ms": {"F": 7.0, "I": 8.0, "W": 4.0}, "overlap_saved_ms": 0.5},
                "recompute": {"pass_ms": {"F": 0.0, "I": 1.5, "W": 0.0}}}
    assert published.layer_ms(sections) == (7.0, 13.0)  # 8 + 4 - 0.5 + 1.5
    del sections["recompute"]
    assert published.layer_ms(sections) == (7.0, 11.5)


def test_targets():
    assert published.within([0.01, 0.04, 0.09])
    assert not published.within([0.06, 0.06, 0.01])  # median 6%
    assert not published.within([0.01, 0.01, 0.11])  # largest 11%


def test_table_missing_or_ragged(tmp_path):
    with pytest.raises(common.ToolError, match="cannot read the table"):
        tables.rows(str(tmp_path / "none.csv"))
    bad = tmp_path / "bad.csv"
    bad.write_text("# source\na,b\n1,2\n3\n")
    with pytest.raises(common.ToolError, match=r"bad.csv:4: 1 cells, the header names 2"):
        tables.rows(str(bad))


def test_script_reports_every_table():
    done = run_script("validate-published.sh")
    assert done.returncode == 0, done.stdout + done.stderr
    text = done.stdout
    assert len(re.findall(r"^ +[0-9.]+B +\d+ ", text.split("\nmedian")[0], re.M)) == 10
    # The summary is the rows' own median and largest (each printed to 0.1 points).
    errors = [abs(float(e)) for e in re.findall(r"([+-][0-9.]+)%$", text.split("\nmedian")[0], re.M)]
    median, largest = map(float, re.search(r"^median \|error\| ([0-9.]+)% .* largest ([0-9.]+)%", text, re.M).groups())
    assert len(errors) == 10 and abs(median - sorted(errors)[4:6][0] / 2 - sorted(errors)[4:6][1] / 2) <= 0.1
    assert abs(largest - max(errors)) <= 0.05
    for title in ("Korthikanti et al. 2022:", "Korthikanti et al. 2022, one layer:", "Zero Bubble paper:"):
        assert re.search(re.escape(title) + r" median \|error\| [0-9.]+% \(target <= 5%\)", text)


def test_bad_input_is_one_line():
    done = run_script("validate-published.sh", "--set", "pipeline.nosuch=1")
    line = one_error_line(done, "validate-published")
    assert "nosuch" in line
    assert one_error_line(run_script("device-grid.sh", "0"), "device-grid") == \
        "device-grid: JOBS: expected a positive integer, got '0'"


def test_grid_axis_keeps_flow_maps():
    assert device_grid.parse_axis("a=1,{x: 1, y: 2},3") == ("a", ["1", "{x: 1, y: 2}", "3"])


def test_grid_point_is_validate_published():
    point, errors, ratios = device_grid.evaluate({"gemm.max_efficiency": "0.75"})
    assert [round(e, 9) for _, _, e in published.megatron_predictions(["topology.device.gemm.max_efficiency=0.75"])] == \
        [round(e, 9) for e in errors]
    assert len(ratios) == 4  # the profile's four models
    lines = device_grid.report([(point, errors, ratios)], 1)
    assert lines[0].startswith("1 points; ")


def test_moe_and_llama_rows_as_their_sources_state_them():
    from stagecraft_tools import published_moe
    rows = {r["id"]: r for r in tables.rows(published_moe.TABLE)}
    mixtral = rows["mlm_moe_readme_mixtral_8x7b_h100_bf16"]
    # 64 H100s, TP 1, PP 4: D = 16; a batch of 256 sequences of one: 16 microbatches; VP 8; E 8.
    text = published_moe.scenario_text(mixtral)
    for part in ("ranks: 4", "data_parallel: 16", "tensor_parallel: 1", "microbatches: 16", "microbatch_size: 1",
                 "chunks: 8", "expert_parallel: 8", "moe: {experts: 8, top_k: 2, expert_hidden: 14336",
                 "schedule: interleaved", "attention: flash", "bias: false"):
        assert part in text, part
    # Qwen3-235B's 64 heads of 128 in a hidden of 4096; TP 2 turns sequence parallelism on.
    qwen = published_moe.scenario_text(rows["mzoo_qwen3_235b_h100_bf16_tp2_pp8_vpp4_ep32"])
    assert "head_dim: 128" in qwen and "sequence_parallel: true" in qwen and "data_parallel: 16" in qwen
    # The dispatcher as each row's notes name it: DeepEP, or Megatron-LM's all-to-all where they
    # say "A2A (all-to-all, not DeepEP)".
    assert "moe_dispatcher: deepep" in qwen
    a2a = rows["mzoo_qwen3_235b_h100_bf16_tp2_pp32_vpp3_ep8_a2a"]
    assert "not DeepEP" in a2a["notes"] and published_moe.dispatcher_of(a2a) == "alltoall"
    assert "moe_dispatcher" not in published_moe.scenario_text(a2a)
    assert published_moe.dispatcher_of(rows["mzoo_qwen3_235b_h100_bf16_tp4_pp8_vpp4_ep8"]) == "deepep"
    # What cannot be stated is left out, each with why.
    # DeepSeek-V3's report: H800 nodes (the H100's compute, NVLink at 200 GB/s each way), MLA,
    # DualPipe-V's overlapped pairs with 20 SMs to communication, DeepEP's dispatch, FP8.
    report = rows["dsv3_paper_h800_fp8_2048gpu"]
    assert published_moe.why_not(report) == ""
    report_text = published_moe.scenario_text(report)
    for part in ("topologies/h800-node.yaml", "mla: {q_lora_rank: 1536, kv_lora_rank: 512, rope_head_dim: 64, "
                 "v_head_dim: 128}", "schedule: dualpipe-v", "chunks: 2", "sm_share: 0.152", "moe_dispatcher: deepep",
                 "fp8: true, fp8_scaling: blockwise", "data_parallel: 128", "microbatches: 120", "first_dense: 3",
                 "node_limit: 4"):
        assert part in report_text, part
    assert "kv_heads" not in report_text
    # 180K H800 hours per trillion tokens: 10^12 / (180000 x 3600) tokens/s per GPU.
    assert published_moe.published_tokens_per_s(report) == pytest.approx(1e12 / (180000 * 3600))
    assert "not in the device library" in published_moe.why_not({**report, "gpu": "MI300X"})
    # FP8 rows run their linear GEMMs in FP8 over bf16 tensors; their recipes say the rest.
    llama70 = published_moe.scenario_text(rows["mbridge_2604_01_llama3_70b_h100_fp8"])
    for part in ("dtype: bf16, fp8: true, fp8_scaling: current", "tensor_parallel_overlap: true", "chunks: 5",
                 "partition: [" + ", ".join(["2"] * 35 + ["3"] + ["2"] * 3 + ["1"]) + "]"):
        assert part in llama70, part
    qwen_fp8 = published_moe.scenario_text(rows["mbridge_2604_01_qwen3_235b_h100_fp8"])
    assert "schedule: interleaved-overlap" in qwen_fp8 and "sm_share: 0.121" in qwen_fp8  # 16 of 132 SMs
    assert "fp8: true" in qwen_fp8 and "fp8" not in qwen
    dsv3 = rows["automodel_dsv3_h100_bf16_256gpu"]  # MLA is stated; AutoModel's FSDP2 beside the pipeline is not
    assert "NeMo AutoModel" in published_moe.why_not(dsv3)
    assert published_moe.why_not({**dsv3, "notes": "no sharding"}) == ""  # its latents from MLA
    assert "MLA" in published_moe.why_not({**dsv3, "notes": "no sharding", "model": "DeepSeek-V4"})
    # Context parallelism as the rows state it: AutoModel's FSDP2 shards over its 32 x 2 devices
    # (ZeRO-3) and checkpoints every block; Megatron-Bridge's 405B splits 126 layers + 2 over 64 stages.
    automodel = rows["automodel_llama31_70b_h100_bf16_64gpu"]
    assert published_moe.why_not(automodel) == ""
    automodel_text = published_moe.scenario_text(automodel)
    for part in ("context_parallel: 2, context_parallel_comm: all_gather", "data_parallel: 32", "zero: 3",
                 "recompute: full", "microbatches: 4"):
        assert part in automodel_text, part
    llama405 = published_moe.scenario_text(rows["mbridge_2604_01_llama31_405b_h100_fp8"])
    for part in ("context_parallel: 2, context_parallel_comm: p2p", "data_parallel: 8", "tensor_parallel: 8", "chunks: 8",
                 "partition: [1, " + ", ".join(["2"] * 62) + ", 1]", "grad_reduce_overlap: true", "microbatches: 192"):
        assert part in llama405, part
    long_context = published_moe.scenario_text(rows["llama3_paper_405b_h100_bf16_16384gpu_131k"])
    for part in ("context_parallel: 16, context_parallel_comm: all_gather", "data_parallel: 8", "microbatches: 16"):
        assert part in long_context, part
    # The ModelZoo's FSDP row (Megatron-FSDP, no pipeline, full recompute): ZeRO-3, whole layers recomputed.
    fsdp = rows["mzoo_qwen3_235b_h100_bf16_tp2_ep8_fsdp"]
    assert published_moe.why_not(fsdp) == ""
    fsdp_text = published_moe.scenario_text(fsdp)
    for part in ("zero: 3", "recompute: full", "ranks: 1", "data_parallel: 128", "microbatches: 4",
                 "microbatch_size: 4"):
        assert part in fsdp_text, part
    # The ModelZoo's "norm, act": Megatron-LM's --recompute-modules layernorm moe_act.
    assert "zero: 1" in qwen and "recompute: selective, recompute_modules: [layernorm, moe_act]" in qwen
    assert "recompute: none" in published_moe.scenario_text(rows["mzoo_qwen3_235b_h100_bf16_tp4_pp8_vpp4_ep8"])
    # The ModelZoo's long-context table: its command's PP 8 x VP 4, TP 4, EP 8 and --recompute-modules
    # layernorm moe, CP 8 at 128K tokens: D = 256 / (4 x 8 x 8) = 1, 256 microbatches; PR=bf16's --tp-comm-overlap.
    long_qwen = published_moe.scenario_text(rows["mzoo_qwen3_235b_h100_bf16_tp4_cp8_128k_forced"])
    for part in ("seq: 131072", "recompute: selective, recompute_modules: [layernorm, moe]", "context_parallel: 8",
                 "context_parallel_comm: p2p", "data_parallel: 1", "microbatches: 256", "expert_parallel: 8",
                 "moe_dispatcher: deepep", "tensor_parallel_overlap: true", "chunks: 4"):
        assert part in long_qwen, part
    # The Megatron Core MoE paper's "up_proj, mlp" and the DeepSeek-V3 report's RMSNorm and MLA up-projection.
    assert "recompute_modules: [mla_up_proj, mlp]" in published_moe.scenario_text(
        rows["mcore_moe_paper_dsv3_h100_fp8_1024gpu"])
    assert "recompute_modules: [layernorm, mla_up_proj]" in published_moe.scenario_text(
        rows["dsv3_paper_h800_fp8_2048gpu"])
    # GPT-OSS: its sliding window in every other layer (from the first), heads of 64, biases.
    oss = rows["mbridge_2604_01_gptoss_120b_h100_bf16"]
    assert published_moe.why_not(oss) == ""
    oss_text = published_moe.scenario_text(oss)
    for part in ("sliding_window: {size: 128, full_every: 2}", "head_dim: 64", "bias: true", "data_parallel: 16",
                 "microbatches: 80", "grad_reduce_overlap: true"):
        assert part in oss_text, part
    assert "moe_dispatcher" not in oss_text  # Megatron-Bridge's GPT-OSS recipe: the all-to-all dispatcher
    assert published_moe.why_not(mixtral) == ""
    assert published_moe.chunks_of(rows["llama3_paper_405b_h100_bf16_8192gpu"]) == published_moe.LLAMA3_CHUNKS
    # The ModelZoo's "+1f1b overlap" row runs Megatron-LM's combined 1F1B.
    overlap = published_moe.scenario_text(rows["mzoo_qwen3_235b_h100_bf16_tp2_pp8_vpp4_ep32_a2aoverlap"])
    assert "schedule: interleaved-overlap" in overlap and "schedule: interleaved," in qwen
    assert "a2a_overlap: {enabled: true, sm_share: 0.182}" in overlap  # 24 of the H100's 132 SMs
    # The Megatron Core MoE paper's H100 row (forced balance) says so in its own words.
    paper = rows["mcore_moe_paper_qwen3_235b_h100_bf16_tp2_pp8_vpp4_ep32"]
    assert published_moe.overlaps_a2a(paper) and not published_moe.overlaps_a2a(rows["mzoo_qwen3_235b_h100_bf16_tp2_pp8_vpp4_ep32"])
    assert "schedule: interleaved-overlap" in published_moe.scenario_text(paper)
    assert published_moe.dispatcher_of(paper) == "deepep"
    # The ModelZoo's Mixtral 8x22B: TP 2, PP 8, VPP 7 (one layer a virtual stage), EP 8 on 128 GPUs:
    # D = 8, 32 microbatches; bf16 with --tp-comm-overlap, FP8 blockwise without it.
    m22 = published_moe.scenario_text(rows["mzoo_mixtral_8x22b_h100_bf16_forced"])
    for part in ("ranks: 8", "data_parallel: 8", "tensor_parallel: 2", "chunks: 7", "microbatches: 32",
                 "expert_parallel: 8", "tensor_parallel_overlap: true", "grad_reduce_overlap: true",
                 "moe: {experts: 8, top_k: 2, expert_hidden: 16384", "vocab: 32000"):
        assert part in m22, part
    assert "moe_dispatcher" not in m22 and "fp8" not in m22
    m22_fp8 = published_moe.scenario_text(rows["mzoo_mixtral_8x22b_h100_fp8_forced"])
    assert "fp8: true, fp8_scaling: blockwise" in m22_fp8 and "tensor_parallel_overlap" not in m22_fp8
    # Megatron-Bridge's Qwen3-30B-A3B on 16 H100s: EP 16 over two nodes, 64 microbatches a replica,
    # the HybridEP backend stated as DeepEP's dispatch, 32 heads of 128 in a hidden of 2048.
    small = published_moe.scenario_text(rows["mbridge_2604_01_qwen3_30b_a3b_h100_fp8"])
    for part in ("ranks: 1", "data_parallel: 16", "expert_parallel: 16", "microbatches: 64", "moe_dispatcher: deepep",
                 "head_dim: 128", "kv_heads: 4", "moe: {experts: 128, top_k: 8, expert_hidden: 768",
                 "fp8: true, fp8_scaling: current", "grad_reduce_overlap: true", "recompute: none",
                 "schedule: 1f1b"):
        assert part in small, part


def test_the_embedding_and_loss_take_a_layers_place_where_the_source_says_so():
    from stagecraft_tools import published_moe
    rows = {r["id"]: r for r in tables.rows(published_moe.TABLE)}
    # Qwen3's 94 layers + the embedding + the loss = 96 slots: 3 a stage over PP 8 x VP 4, the first
    # and last stage 2 layers; 1 a stage over 32 x 3, the first and last none.
    assert published_moe.partition_of(rows["mzoo_qwen3_235b_h100_bf16_tp2_pp8_vpp4_ep32"]) == [2] + [3] * 30 + [2]
    assert published_moe.partition_of(rows["mzoo_qwen3_235b_h100_bf16_tp2_pp32_vpp3_ep8_a2a"]) == [0] + [1] * 94 + [0]
    # Llama 3 405B: 126 + 2 = 128 slots over 16 ranks of 8 chunks, the first chunk the embedding alone.
    llama = rows["llama3_paper_405b_h100_bf16_8192gpu"]
    assert published_moe.chunks_of(llama) == 8
    assert published_moe.partition_of(llama) == [0] + [1] * 126 + [0]
    assert "partition: [0, 1, 1," in published_moe.scenario_text(llama)
    # Mixtral's split is Megatron-LM's even one.
    mixtral = rows["mlm_moe_readme_mixtral_8x7b_h100_bf16"]
    assert published_moe.partition_of(mixtral) is None and "partition" not in published_moe.scenario_text(mixtral)
    # Slots that do not fill the stages evenly, or fewer slots than stages, are not predicted.
    assert "stages for 94 layers and the embedding and loss" in published_moe.why_not({**rows[
        "mzoo_qwen3_235b_h100_bf16_tp2_pp32_vpp3_ep8_a2a"], "vp": "4"})


def test_moe_rows_are_compared_by_their_sources_flop_count():
    from stagecraft_tools import published_moe
    rows = {r["id"]: r for r in tables.rows(published_moe.TABLE)}
    qwen = rows["mzoo_qwen3_235b_h100_bf16_tp2_pp8_vpp4_ep32"]
    # Qwen3-235B by hand, per token: projections 94·(4096·(8192 + 2·512) + 8192·4096) = 6.70e9
    # weights, experts 94·8·3·4096·1536 = 14.19e9, logits 4096·151936 (a multiple of the model's
    # 1187·2 already) = 0.62e9; 6 x 21.51e9 = 129.07e9; the scores 12·94·8192·4096 = 37.85e9
    # whole, half of it causal.
    weights = 94 * (4096 * (8192 + 2 * 512) + 8192 * 4096) + 94 * 8 * 3 * 4096 * 1536 + 4096 * 151936
    scores = 12 * 94 * 8192 * 4096
    assert published_moe.flops_per_token(qwen, "megatron") == pytest.approx(6 * weights + scores)
    assert published_moe.flops_per_token(qwen, "megatron-causal") == pytest.approx(6 * weights + scores / 2)
    # The source's own numbers agree with its count: 245 TFLOP/s at 19.7 s a step of 2048 x 4096
    # tokens on 256 GPUs is 147.3 GFLOP a token; the causal count gives 148.0 (0.5%, the rounding
    # of the published cells), the whole square 167.0.
    implied = 245e12 * 19.7 * 256 / (2048 * 4096)
    assert published_moe.flops_per_token(qwen, "megatron-causal") == pytest.approx(implied, rel=0.01)
    # GPT-OSS-120B's 36 layers, 18 of them windowed (128 keys): causal, a windowed layer's queries
    # see 128 - 128·127/8192 = 126.016 keys on average, a full one's 2048; the whole square counts
    # 128 and 4096. Scores: 12·(64·64)·keys a layer.
    oss = rows["mbridge_2604_01_gptoss_120b_h100_bf16"]
    q = 64 * 64
    windowed, full = 12 * q * 18 * (128 - 128 * 127 / 8192), 12 * q * 18 * 2048
    weights = 36 * (2880 * (q + 2 * 8 * 64) + q * 2880) + 36 * 4 * 3 * 2880 * 2880 + 2880 * 201088
    assert published_moe.flops_per_token(oss, "megatron-causal") == pytest.approx(6 * weights + windowed + full)
    assert published_moe.flops_per_token(oss, "megatron") == pytest.approx(
        6 * weights + 12 * q * 18 * 128 + 12 * q * 18 * 4096)
    # DeepSeek-V3 (MLA): a layer's projections are its MLA weights less the two RMSNorms,
    # 187,107,328 - 1536 - 512 (mla_test.cpp works the total from the report); the scores over
    # queries and keys of 128 x 192 and the context over values of 128 x 128: 12·(24576 + 16384)/2·s.
    dsv3 = rows["dsv3_paper_h800_fp8_2048gpu"]
    mlp = 3 * 3 * 7168 * 18432 + 58 * 3 * 7168 * 2048 * (8 + 1)
    weights = 61 * (187_107_328 - 1536 - 512) + mlp + 7168 * 129280
    assert published_moe.flops_per_token(dsv3, "megatron") == pytest.approx(
        6 * weights + 12 * (24576 + 16384) / 2 * 4096 * 61)
    assert published_moe.flops_per_token(qwen, "megatron") > 1.1 * implied
    # Qwen3-30B-A3B by hand: projections 48·(2048·(4096 + 2·512) + 4096·2048), experts
    # 48·8·3·2048·768, logits 2048·151936; causal scores 6·48·4096·4096. The page's 206 TFLOP/s at
    # 8,960 tokens/s is 22.99 GFLOP a token: its count is the causal one (to the cells' rounding).
    small = rows["mbridge_2604_01_qwen3_30b_a3b_h100_fp8"]
    weights = 48 * (2048 * (4096 + 2 * 512) + 4096 * 2048) + 48 * 8 * 3 * 2048 * 768 + 2048 * 151936
    causal = 6 * weights + 6 * 48 * 4096 * 4096
    assert published_moe.flops_per_token(small, "megatron-causal") == pytest.approx(causal)
    assert causal == pytest.approx(206e12 / 8960, rel=0.005)
    # A row that publishes a step time is compared by it; one with TFLOP/s alone by its count.
    assert published_moe.published_tokens_per_s(qwen) == pytest.approx(2048 * 4096 / (19.7 * 256))
    mixtral = rows["mlm_moe_readme_mixtral_8x7b_h100_bf16"]
    assert mixtral["flops_convention"] == "megatron"
    assert published_moe.published_tokens_per_s(mixtral) == pytest.approx(
        468e12 / published_moe.flops_per_token(mixtral, "megatron"))
    with pytest.raises(common.ToolError, match="flops_convention 'hfu'"):
        published_moe.flops_per_token(qwen, "hfu")


def test_the_megatron_count_is_stagecrafts_model_flops():
    # stagecraft's model_tflops_per_device counts as Megatron-LM did up to core_v0.9 (DESIGN.md
    # §10); Mixtral's run, predicted, by both counts (the router, which stagecraft counts and
    # Megatron-LM does not, is 0.03% of it).
    from stagecraft_tools import published_moe
    rows = {r["id"]: r for r in tables.rows(published_moe.TABLE)}
    (p,) = [p for p in published_moe.predictions() if p.row["id"] == "mlm_moe_readme_mixtral_8x7b_h100_bf16"]
    assert p.tflops == pytest.approx(p.run["model_tflops_per_device"], rel=1e-3)
    assert p.error == pytest.approx(p.tokens_per_s / published_moe.published_tokens_per_s(rows[p.row["id"]]) - 1)


def test_megatron_lm_h100_table_as_its_source_states_it():
    from stagecraft_tools import published_h100
    rows = tables.rows(published_h100.TABLE)
    assert len(rows) == 9
    for r in rows:
        # The image's own columns agree: T x P x D GPUs, TFLOP/s x GPUs = the aggregate PFLOP/s, and
        # the MFU over the H100 SXM's dense BF16 peak of 989.4 TFLOP/s.
        assert int(r["tp"]) * int(r["pp"]) * int(r["dp"]) == int(r["gpus"])
        assert float(r["tflops_per_gpu"]) * int(r["gpus"]) / 1000 == pytest.approx(float(r["aggregate_pflops"]), abs=0.1)
        assert 100 * float(r["tflops_per_gpu"]) / 989.4 == pytest.approx(int(r["mfu_pct"]), abs=0.6)
    # 462B: 16 stages of 8-way tensor parallelism, 3072 sequences over 48 replicas: 64 microbatches of one.
    text = published_h100.scenario_text(rows[-1])
    for part in ("layers: 112, hidden: 18432, heads: 144, seq: 4096, vocab: 131072", "schedule: 1f1b", "ranks: 16",
                 "tensor_parallel: 8", "sequence_parallel: true", "tensor_parallel_overlap: true",
                 "grad_reduce_overlap: true", "microbatches: 64",
                 "microbatch_size: 1", "zero: 1"):
        assert part in text, part
    # 1.7B: one stage, no tensor parallelism, 4 microbatches.
    first = published_h100.scenario_text(rows[0])
    assert "schedule: gpipe, ranks: 1" in first and "tensor_parallel_overlap: false" in first and "microbatches: 4" in first
