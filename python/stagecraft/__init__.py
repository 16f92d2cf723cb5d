"""stagecraft from Python: scenarios, schedules, the simulator, the search and compare.

The functions call stagecraft's C++ libraries directly (the extension ``stagecraft._core``),
with the command line's checks and answers::

    import stagecraft
    scenario = stagecraft.Scenario.load("scenarios/uniform-costs.yaml", {"pipeline.microbatches": 16})
    for run in stagecraft.simulate(scenario):
        print(run.schedule, run.step_time_ms, run.bubble_fraction, run.peak_memory_bytes)
    stagecraft.schedule("zb-h1", ranks=4, microbatches=8).to_csv()

Bad input raises :class:`InputError` with the line ``stagecraft`` prints. See docs/python.md.
"""

from ._errors import InputError
from . import _core
from ._core import (DEFAULT_MAX_OPS, MAX_MAX_OPS, MAX_PLAN_THREADS, MAX_SEARCH_BUDGET_SECONDS, BubbleSplit,
                    Diagnostic, Gap, Op, SearchRankChange, TraceOp)
from ._scenario import Scenario
from ._schedules import Schedule, generator_names, schedule
from ._runs import (Comparison, RankResult, Run, RunResult, SimulatedRun, StageCosts, Trace, compare, metrics_json,
                    read_run, read_trace, simulate, simulate_workload, to_pandas)
from ._search import SearchResult, search
from ._plan import Plan, PlanConfiguration, plan

__version__ = "0.1.0"

__all__ = [
    "BubbleSplit", "Comparison", "DEFAULT_MAX_OPS", "Diagnostic", "Gap", "InputError", "MAX_MAX_OPS",
    "MAX_PLAN_THREADS", "MAX_SEARCH_BUDGET_SECONDS", "Op", "RankResult", "Run",
    "Plan", "PlanConfiguration", "RunResult", "Scenario", "Schedule", "SearchRankChange", "SearchResult", "SimulatedRun", "StageCosts", "Trace",
    "TraceOp", "compare", "generator_names", "metrics_json", "plan", "read_run", "read_trace", "schedule", "search",
    "simulate", "simulate_workload", "to_pandas",
]
