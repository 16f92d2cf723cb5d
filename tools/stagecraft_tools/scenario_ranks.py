"""A scenario file's pipeline ranks (its pipeline.ranks, read as YAML): one number on stdout, for
scripts/gpu-check.sh, which sizes each scenario's runs by it, a plan (--dry-run) included, before
anything is built.

Usage: scripts/tool.sh scenario_ranks SCENARIO
Exits 1 with one line naming the file when it is not YAML or holds no positive pipeline.ranks.
"""
from .common import ToolError, entry, read_yaml, usage_error


def ranks(path):
    """`path`'s pipeline.ranks; a ToolError naming the file and the key when it holds none."""
    scenario = read_yaml(path)
    pipeline = scenario.get("pipeline") if isinstance(scenario, dict) else None
    value = pipeline.get("ranks") if isinstance(pipeline, dict) else None
    if value is None:
        raise ToolError(f"{path}: no pipeline.ranks")
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ToolError(f"{path}: pipeline.ranks: expected a positive integer, got '{value}'")
    return value


def main(argv):
    if len(argv) != 1:
        raise usage_error("usage: scripts/tool.sh scenario_ranks SCENARIO")
    print(ranks(argv[0]))
    return 0


if __name__ == "__main__":
    raise SystemExit(entry("scenario_ranks", main))
