"""stagecraft_tools.zb_fork_layer and zb_fork_load (scripts/zb-fork-layer.sh's program) without
PyTorch: the arguments and their errors, the stand-ins the fork's imports get, pkg_resources'
`packaging`, a model's JSON entry and printed line from hand-made times, the paper's ratios beside
them (recomputed from data/zero_bubble_paper.csv), the middle stage's layers, the two TorchScript
runs merged, and Apex's host arithmetic. The CPU check of the fork's stage needs PyTorch and the
release's tree (scripts/zb-fork-layer.sh --prepare): skipped, saying which is missing, where either is."""
import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import textwrap
import types

import pytest

from conftest import ROOT
from stagecraft_tools import tables, zb_fork_layer, zb_fork_load

ENTRY = ROOT / "scripts" / "zb_fork_layer.py"
KNOWN = "known: 1.5B, 6.2B, 14.6B, 28.3B"  # Table 3's models, in its order


def entry(*args, env=None):
    """scripts/zb_fork_layer.py with `args`, under this interpreter."""
    return subprocess.run([sys.executable, str(ENTRY), *map(str, args)], capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, **(env or {})))


@pytest.fixture
def fork(tmp_path):
    """A directory that passes for the release's tree (its weight-gradient store's file, empty)."""
    store = tmp_path / "fork" / "megatron" / "core" / "weight_grad_store.py"
    store.parent.mkdir(parents=True)
    store.write_text("")
    return tmp_path / "fork"


def test_imports_without_torch():
    done = subprocess.run([sys.executable, "-c", "import sys; from stagecraft_tools import zb_fork_layer, zb_fork_load; "
                           "print(sorted(m for m in sys.modules if m.split('.')[0] == 'torch'))"],
                          capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(ROOT / "tools")))
    assert done.returncode == 0 and done.stdout == "[]\n", done.stdout + done.stderr


@pytest.mark.parametrize("args, message", [
    ((), "zb_fork_layer.py: error: the following arguments are required: --fork"),
    (("--fork", "x", "--jit", "on"), "zb_fork_layer.py: error: argument --jit: invalid choice: 'on' "
                                     "(choose from 'fused', 'unfused', 'both')"),
    (("--fork", "x", "--main-grad", "bf16"), "zb_fork_layer.py: error: argument --main-grad: invalid choice: 'bf16' "
                                             "(choose from 'fp16', 'fp32')"),
    (("--fork", "x", "--iters", "many"), "zb_fork_layer.py: error: argument --iters: invalid int value: 'many'"),
])
def test_bad_flags_are_usage_errors(args, message):
    done = entry(*args)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("usage: zb_fork_layer.py ") and done.stderr.splitlines()[-1] == message, done.stderr


def test_a_fork_without_the_release(tmp_path):
    done = entry("--fork", tmp_path, "--check")
    assert done.returncode == 2 and done.stderr == (
        f"zb_fork_layer.py: --fork {tmp_path}: no megatron/core/weight_grad_store.py (the Zero Bubble release's tree, "
        "e.g. `git archive ed85b11c megatron`)\n")


@pytest.mark.parametrize("args, message", [
    (("--models", "1.5B,2B", "--check"), f"--models: unknown model '2B' ({KNOWN})"),
    (("--models", "6.2B,", "--jit", "fused"), f"--models: unknown model '' ({KNOWN})"),
    (("--ops", "9B"), f"--ops: unknown model '9B' ({KNOWN})"),
    (("--jit", "fused"), "--apex DIR: an Apex source tree with csrc/megatron/ is needed on the GPU"),
    (("--apex", "{fork}", "--jit", "unfused"), "--apex DIR: an Apex source tree with csrc/megatron/ is needed on the GPU"),
    ((), "--apex DIR: an Apex source tree with csrc/megatron/ is needed on the GPU"),
])
def test_bad_input_is_one_line_before_torch(fork, args, message):
    # Each is refused before PyTorch is imported: the same where python3 has none.
    done = entry("--fork", fork, *(a.format(fork=fork) for a in args))
    assert done.returncode == 2 and done.stdout == "" and done.stderr == f"zb_fork_layer.py: {message}\n"


def test_stand_ins_only_where_nothing_real_is(tmp_path):
    # As tests/cli/zb_fork_layer_cli.sh: an installed package keeps the misses it expects while it
    # loads (regex's `from regex import X`, tried as the submodule regex.X) and gets a stand-in only
    # for a submodule it lacks; a package not installed is one.
    (tmp_path / "regex").mkdir()
    (tmp_path / "regex" / "__init__.py").write_text(textwrap.dedent("""\
        try:
            from regex import NOT_YET
            RESULT = 'a stand-in'
        except ImportError:
            RESULT = 'missed'
        """))
    (tmp_path / "einops").mkdir()
    (tmp_path / "einops" / "__init__.py").write_text("VALUE = 1\n")
    program = textwrap.dedent("""\
        import json, sys
        from stagecraft_tools import zb_fork_load
        finder = zb_fork_load._StubFinder()
        sys.meta_path.append(finder)
        import regex, einops.layers.torch, tiktoken.load
        stand_in = {m: isinstance(sys.modules[m], zb_fork_load._StubModule) for m in
                    ('regex', 'einops', 'einops.layers', 'tiktoken', 'tiktoken.load')}
        print(json.dumps([regex.RESULT, einops.VALUE, stand_in, finder.stubbed]))
        """)
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, cwd=tmp_path,
                          env=dict(os.environ, PYTHONPATH=f"{tmp_path}{os.pathsep}{ROOT / 'tools'}"))
    assert done.returncode == 0, done.stderr
    result, value, stand_in, stubbed = json.loads(done.stdout)
    assert result == "missed" and value == 1
    assert stand_in == {"regex": False, "einops": False, "einops.layers": True, "tiktoken": True, "tiktoken.load": True}
    assert stubbed == ["einops.layers", "einops.layers.torch", "tiktoken", "tiktoken.load"]


def test_a_stand_in_raises_only_when_used():
    finder = zb_fork_load._StubFinder()
    assert finder.find_spec("json_tools", None) is None  # not a root the fork may miss
    spec = finder.find_spec("tiktoken", None)
    assert spec.loader is finder and spec.submodule_search_locations == []
    import importlib.util
    module = importlib.util.module_from_spec(spec)
    assert isinstance(module, zb_fork_load._StubModule) and finder.stubbed == ["tiktoken"]
    with pytest.raises(AttributeError):
        module.__wrapped__  # noqa: B018  Python's own probes see nothing
    cls = module.core.Encoding  # a class of a class: named by its whole path
    assert cls.__qualname__ == "tiktoken.core.Encoding"
    with pytest.raises(RuntimeError, match=r"^tiktoken\.core\.Encoding is not installed \(zb_fork_layer\.py stands in "
                                           r"for it at import only\)$"):
        cls("gpt2")


def test_pkg_resources_packaging_given_once(monkeypatch, tmp_path):
    # pkg_resources missing (Python 3.12 without setuptools): the name is given from `packaging`
    # (here a made-up one, found first), once.
    (tmp_path / "packaging").mkdir()
    (tmp_path / "packaging" / "__init__.py").write_text("")
    (tmp_path / "packaging" / "version.py").write_text("")
    for name in ("packaging", "packaging.version"):  # taken away, and what was there put back after
        monkeypatch.setitem(sys.modules, name, None)
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(sys.modules, "pkg_resources", None)  # import pkg_resources fails
    assert zb_fork_load.pkg_resources_packaging() is True
    from pkg_resources import packaging
    assert packaging.__file__ == str(tmp_path / "packaging" / "__init__.py")
    assert zb_fork_load.pkg_resources_packaging() is False


def test_pkg_resources_packaging_without_packaging(monkeypatch):
    monkeypatch.setitem(sys.modules, "pkg_resources", None)
    monkeypatch.setitem(sys.modules, "packaging", None)  # import packaging fails too
    assert zb_fork_load.pkg_resources_packaging() is True
    stand_in = sys.modules["pkg_resources"].packaging
    assert isinstance(stand_in, zb_fork_load._StubModule) and stand_in.__name__ == "packaging"


def test_pkg_resources_packaging_left_alone_where_present(monkeypatch):
    mine = types.ModuleType("pkg_resources")
    mine.packaging = object()
    monkeypatch.setitem(sys.modules, "pkg_resources", mine)
    assert zb_fork_load.pkg_resources_packaging() is False
    assert sys.modules["pkg_resources"] is mine


FIELDS = dict(layers=2, heads=24, hidden=2304, microbatch=6, seq=1024, jit="fused", fuser="TorchScript's fuser (NNC) on",
              main_grad="fp16", softmax_fused=True, iters=3)
# Each pass of the whole 2-layer stage, three iterations, ms.
TIMES = {"F": [6.0, 2.0, 4.0], "B": [9.0, 3.0, 7.5], "W": [1.0, 2.0, 6.0]}


def test_stage_entry_from_hand_made_times():
    e = zb_fork_layer.stage_entry(TIMES, {"f": 10.0, "b": 9.0, "w": 5.0}, **FIELDS)
    assert list(e) == [*FIELDS, "mean_ms", "median_ms", "b_over_f", "w_over_f", "paper_b_over_f", "paper_w_over_f"]
    assert {k: e[k] for k in FIELDS} == FIELDS
    # Per layer: F 3, 1, 2; B 4.5, 1.5, 3.75; W 0.5, 1, 3.
    assert e["mean_ms"] == {"F": 2.0, "B": 3.25, "W": 1.5}
    assert e["median_ms"] == {"F": 2.0, "B": 3.75, "W": 1.0}
    assert e["b_over_f"] == pytest.approx(1.625) and e["w_over_f"] == pytest.approx(0.75)
    assert e["paper_b_over_f"] == pytest.approx(0.9) and e["paper_w_over_f"] == pytest.approx(0.5)
    assert json.loads(json.dumps(e)) == e  # what --out writes


def test_stage_line_from_hand_made_entry():
    e = zb_fork_layer.stage_entry(TIMES, {"f": 10.0, "b": 9.0, "w": 5.0}, **FIELDS)
    assert zb_fork_layer.stage_line("1.5B", e) == (
        "  1.5B    fused  F 2.000  B 3.250  W 1.500 ms per layer  B/F 1.625 (paper 0.900)  W/F 0.750 (paper 0.500)  "
        "softmax Apex fused")
    e.update(jit="unfused", softmax_fused=False)
    assert zb_fork_layer.stage_line("28.3B", e).startswith(" 28.3B  unfused  F 2.000 ")
    assert zb_fork_layer.stage_line("28.3B", e).endswith("  softmax unfused")


def test_paper_ratios_are_the_profiles_medians():
    with open(ROOT / "data" / "zero_bubble_paper.csv") as fh:
        rows = list(csv.DictReader(line for line in fh if line.strip() and not line.startswith("#")))
    profile = tables.zb_profile()
    assert sorted(profile) == sorted(zb_fork_layer.MODELS)
    for model in zb_fork_layer.MODELS:
        mine = [r for r in rows if r["model"] == model]
        f, b, w = (statistics.median(float(r[k]) for r in mine) for k in ("f_us", "b_us", "w_us"))
        e = zb_fork_layer.stage_entry(TIMES, profile[model], **FIELDS)
        assert len(mine) >= 3
        assert e["paper_b_over_f"] == pytest.approx(b / f, abs=1e-12)
        assert e["paper_w_over_f"] == pytest.approx(w / f, abs=1e-12)
        assert f"(paper {b / f:.3f})" in zb_fork_layer.stage_line(model, e)


def test_middle_stage_layers():
    # (layers + 2) // p of Table 3: 24/8, 32/8, 48/16, 64/32 (the end stages hold one fewer).
    assert list(zb_fork_layer.MODELS) == ["1.5B", "6.2B", "14.6B", "28.3B"]
    assert {m: tables.middle_layers(v) for m, v in zb_fork_layer.MODELS.items()} == \
        {"1.5B": 3, "6.2B": 4, "14.6B": 3, "28.3B": 2}
    assert zb_fork_layer.SEQ == 1024


def variants_opts(tmp_path, rehearse=False):
    return argparse.Namespace(fork="F", apex=None, build_dir=str(tmp_path / "ext"), models="1.5B,28.3B", iters=2,
                              warmup=1, out=str(tmp_path / "run.json"), main_grad="fp32", rehearse=rehearse)


def test_both_settings_merged(tmp_path, monkeypatch):
    calls = []

    def run(cmd):
        calls.append(cmd)
        jit, out = cmd[cmd.index("--jit") + 1], cmd[cmd.index("--out") + 1]
        with open(out, "w") as fh:
            json.dump({"device": f"D {jit}", "models": {f"{m}/{jit}": {"jit": jit} for m in ("1.5B", "28.3B")}}, fh)
        return subprocess.CompletedProcess(cmd, 0)
    monkeypatch.setattr(subprocess, "run", run)
    assert zb_fork_layer.run_variants(variants_opts(tmp_path, rehearse=True)) == 0
    assert [c[c.index("--jit") + 1] for c in calls] == ["fused", "unfused"]
    for c in calls:  # each setting a process of the same entry point, the options passed on
        assert c[:2] == [sys.executable, str(ENTRY)] and c[-1] == "--rehearse"
        assert c[c.index("--apex") + 1] == "" and c[c.index("--main-grad") + 1] == "fp32"
        assert c[c.index("--models") + 1] == "1.5B,28.3B" and c[c.index("--iters") + 1] == "2"
    merged = json.loads((tmp_path / "run.json").read_text())
    assert merged["device"] == "D fused"
    assert sorted(merged["models"]) == ["1.5B/fused", "1.5B/unfused", "28.3B/fused", "28.3B/unfused"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ext", "run.json"]  # the parts removed


def test_a_failed_setting_stops(tmp_path, monkeypatch, capsys):
    def run(cmd):
        return subprocess.CompletedProcess(cmd, 1 if cmd[cmd.index("--jit") + 1] == "fused" else 0)
    monkeypatch.setattr(subprocess, "run", run)
    assert zb_fork_layer.run_variants(variants_opts(tmp_path)) == 1
    assert capsys.readouterr().err == "zb_fork_layer.py: the --jit fused run failed\n"
    assert not (tmp_path / "run.json").exists()


def test_write_json(tmp_path):
    value = {"models": {"1.5B/fused": {"mean_ms": {"F": 1.5}}}}
    zb_fork_layer.write_json(str(tmp_path / "r.json"), value)
    assert (tmp_path / "r.json").read_text() == json.dumps(value, indent=1)
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]


def test_apex_host_arithmetic_and_commit(tmp_path):
    # Apex's get_batch_per_block: (128 / min(next power of two of sk, 32)) * (2 if that <= 128 else 1).
    assert [zb_fork_load.batch_per_block(1024, sk, 6, 24) for sk in (1024, 200, 128, 16, 1)] == [4, 4, 8, 16, 256]
    assert zb_fork_load.apex_commit(str(tmp_path)) == "unknown"
    (tmp_path / "COMMIT").write_text("\n")
    assert zb_fork_load.apex_commit(str(tmp_path)) == "unknown"
    (tmp_path / "COMMIT").write_text("0123abcd\n")
    assert zb_fork_load.apex_commit(str(tmp_path)) == "0123abcd"
    fork = types.SimpleNamespace(stubbed=["tiktoken", "tiktoken.load", "apex.optimizers", "einops.layers"])
    assert zb_fork_load.stood_in_roots(fork) == ["apex", "einops", "tiktoken"]


def test_cpu_check_of_the_release():
    pytest.importorskip("torch", reason="PyTorch is not installed (apt-get install python3-torch): the fork's CPU check "
                                        "is not run")
    tree = os.environ.get("ZB_FORK_DIR", str(ROOT / "build" / "zb-fork"))
    if not os.path.isfile(os.path.join(tree, "fork", "megatron", "core", "weight_grad_store.py")):
        pytest.skip(f"no release tree in {tree} (scripts/zb-fork-layer.sh --prepare ZB_GIT APEX_GIT): "
                    "the fork's CPU check is not run")
    done = entry("--fork", os.path.join(tree, "fork"), "--check")
    assert done.returncode == 0 and done.stdout.startswith("ok: the fork's stage (3 layers, hidden 64) "), done.stdout
