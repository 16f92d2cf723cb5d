"""Runs: what simulate predicts, metrics files and traces as simulate and execute write them,
and compare. A run's metrics come from the metrics codec's JSON (schedules/metrics_json.h, the
one place their fields are defined), so every key of ``simulate --json`` is an attribute here,
with the same value."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any, Optional, Union

from . import _checks, _core
from ._scenario import Scenario

PathLike = Union[str, os.PathLike]


def _pandas(what: str) -> Any:
    try:
        import pandas
    except ImportError as e:
        raise ImportError(f"{what} needs pandas, which is not installed (Debian: apt install python3-pandas; "
                          "or pip install pandas)") from e
    return pandas


class _Record:
    """A JSON object of the metrics codec with its keys as attributes."""

    def __init__(self, data: dict[str, Any]) -> None:
        self._data = data
        for key, value in data.items():
            setattr(self, key, value)

    def to_dict(self) -> dict[str, Any]:
        """The object as the metrics JSON holds it (a copy)."""
        return json.loads(json.dumps(self._data))

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in self._data.items() if not isinstance(v, (list, dict)))
        return f"{type(self).__name__}({fields})"


class RankResult(_Record):
    """One rank's results (``per_rank`` of the metrics JSON). The parts compute, wait,
    transfer, collective, offload wait, overhead and idle sum to the run's makespan (the bubble
    split)."""

    rank: int
    busy_ms: float
    span_ms: float
    compute_ms: float
    wait_ms: float
    transfer_ms: float
    collective_ms: float = 0.0  # written only with replicas; absent means 0 (metrics_json.h)
    offload_wait_ms: float = 0.0  # written only for a rank with copies to host memory
    peak_host_memory_bytes: int = -1  # written only for a rank with copies to host memory
    overhead_ms: float
    idle_ms: float
    peak_memory_bytes: int
    peak_inflight_microbatches: int
    peak_weight_versions: int
    oom: bool


class StageCosts(_Record):
    """One microbatch's passes on one stage (``stages``): predicted, what the simulator charged;
    measured, the run's medians (0 for a pass the schedule does not run); and how many updates
    the weights its forward and backward read are behind synchronous SGD's (0 for a synchronous
    schedule), and whether a microbatch's backward reads another version than its forward."""

    stage: int
    forward_ms: float
    backward_ms: float
    backward_input_ms: float
    backward_weight_ms: float
    step_ms: float
    weight_delay_forward: int
    weight_delay_backward: int
    weight_versions_differ: bool


class RunResult(_Record):
    """One schedule's metrics (DESIGN.md §4), predicted or measured: every key of the metrics
    JSON's schedule object as an attribute, ``per_rank`` as :class:`RankResult`, ``stages`` as
    :class:`StageCosts`. Measured runs also have ``losses``, ``step_ms`` and
    ``overhead_ns_per_op``."""

    schedule: str
    ranks: int
    chunks: int
    microbatches: int
    microbatch_size: int
    steps: int
    data_parallel: int = 1  # written only with replicas; absent means 1 (metrics_json.h)
    makespan_ms: float
    step_time_ms: float
    throughput_samples_per_s: float
    bubble_fraction: float
    oom: bool
    per_rank: list[RankResult]
    stages: list[StageCosts] = []
    losses: Optional[list[float]] = None  # measured only
    step_ms: Optional[list[float]] = None  # measured only
    overhead_ns_per_op: Optional[float] = None  # measured only

    def __init__(self, data: dict[str, Any]) -> None:
        super().__init__(data)
        self.per_rank = [RankResult(r) for r in data.get("per_rank", [])]
        self.stages = [StageCosts(s) for s in data.get("stages", [])]

    @property
    def peak_memory_bytes(self) -> int:
        """The largest peak over the ranks (the worst rank's, as simulate's table shows it)."""
        return max((r.peak_memory_bytes for r in self.per_rank), default=0)

    @property
    def worst_memory_rank(self) -> int:
        """The rank with the largest peak (the lowest such rank)."""
        peaks = [r.peak_memory_bytes for r in self.per_rank]
        return peaks.index(max(peaks)) if peaks else 0

    def to_pandas(self) -> Any:
        """The ranks as a pandas DataFrame, one row per rank (needs pandas)."""
        pandas = _pandas("RunResult.to_pandas()")
        rows = [dict(r._data, schedule=self.schedule) for r in self.per_rank]
        return pandas.DataFrame(rows)


class SimulatedRun(RunResult):
    """A schedule as :func:`simulate` predicted it: its metrics, and the run behind them."""

    def __init__(self, data: dict[str, Any], simulation: _core.Simulation, index: int, scenario: Scenario) -> None:
        super().__init__(data)
        self._simulation = simulation
        self._index = index
        self.scenario = scenario

    @property
    def cost_source(self) -> str:
        """The cost model the simulation charged ("explicit", "profile:PATH", ...)."""
        return self._simulation.cost_source

    def ir(self) -> _core.Schedule:
        """The schedule that ran (lowered, validated)."""
        return self._simulation.schedule(self._index)

    def trace_json(self) -> str:
        """The predicted trace, as ``simulate --trace`` writes it."""
        return self._simulation.trace_json(self._index)

    def bubble_split(self) -> list[_core.BubbleSplit]:
        """Per rank, the makespan by cause with each gap's interval and cause."""
        return self._simulation.bubble_split(self._index)

    def memory_terms(self, rank: int) -> dict[str, Any]:
        """A rank's memory by term (weights, gradients, optimizer, activations, other, in
        bytes; inflight; dominant), as simulate's table shows its busiest rank."""
        return self._simulation.memory_terms(self._index,
                                             _checks.Call("memory_terms").integer("rank", rank, 0, self.ranks - 1))


def simulate(scenario: Scenario, max_ops: int = _core.DEFAULT_MAX_OPS) -> list[SimulatedRun]:
    """Predicts each of the scenario's schedules (one per schedule under ``schedule: all``), as
    ``stagecraft simulate`` does. Releases the GIL while it simulates; Ctrl-C stops it between
    schedules (KeyboardInterrupt), though not inside one schedule's simulation."""
    call = _checks.Call("simulate")
    core = call.scenario(scenario)
    limit = call.integer("max_ops", max_ops, 1, _core.MAX_MAX_OPS)
    with call.names({"--max-ops": "max_ops"}):
        simulation = _core.simulate(core, limit)
    data = json.loads(simulation.metrics_json())
    return [SimulatedRun(d, simulation, i, scenario) for i, d in enumerate(data["schedules"])]


def simulate_workload(scenario: Scenario) -> dict[str, Any]:
    """A multi-model workload (the scenario's ``tasks``) as ``stagecraft simulate`` places it:
    the metrics file ``simulate --json`` writes, parsed: each task's own run in ``schedules``
    (named ``TASK/SCHEDULE``) and the placement in ``workload`` (``makespan_ms`` under the
    scenario's ``task_scheduler``, ``lrtf_makespan_ms``, ``sequential_makespan_ms``,
    ``device_busy_fraction``, ``tasks``)."""
    call = _checks.Call("simulate_workload")
    core = call.scenario(scenario)
    return dict(json.loads(_core.simulate_workload(core)))


def metrics_json(results: Sequence[SimulatedRun]) -> str:
    """The metrics file of ``results`` (from one :func:`simulate` call), byte for byte as
    ``simulate --json`` writes it for those schedules."""
    call = _checks.Call("metrics_json")
    runs = call.instances("results", results, SimulatedRun, "a list of simulate()'s results")
    if not runs:
        raise call.value_error("results", "expected at least one result of simulate()")
    simulation = runs[0]._simulation
    if any(r._simulation is not simulation for r in runs):
        raise call.value_error("results", "the results come from different simulate() calls")
    return simulation.metrics_json([r._index for r in runs])



def to_pandas(results: Sequence[RunResult]) -> Any:
    """One row per schedule: its scalar metrics and its worst rank's peak memory (needs pandas)."""
    call = _checks.Call("to_pandas")
    runs = call.instances("results", results, RunResult, "a list of RunResult")
    pandas = _pandas("stagecraft.to_pandas()")
    rows = []
    for r in runs:
        row = {k: v for k, v in r._data.items() if not isinstance(v, (list, dict))}
        row["peak_memory_bytes"] = r.peak_memory_bytes
        rows.append(row)
    return pandas.DataFrame(rows)


class Run:
    """A metrics file as ``simulate --json`` or ``execute --json`` wrote it, read strictly."""

    scenario: str
    source: str
    costs: Optional[str]
    backend: Optional[str]
    scenario_file: Optional[str]
    overrides: list[str]
    schedules: list[RunResult]
    partial: Optional[dict[str, Any]]

    def __init__(self, core: _core.RunFile) -> None:
        self._core = core
        self._data = json.loads(core.metrics_json())
        self.path: str = core.path
        self.scenario = self._data.get("scenario", "")
        self.source = self._data.get("source", "")
        self.costs = self._data.get("costs")
        self.backend = self._data.get("backend")
        self.scenario_file = self._data.get("scenario_file")
        self.overrides = self._data.get("overrides", [])
        self.schedules = [RunResult(s) for s in self._data["schedules"]]
        self.partial = self._data.get("partial")

    def find(self, schedule: str) -> Optional[RunResult]:
        """The schedule of that name, or None."""
        name = _checks.Call("find").text("schedule", schedule, "a schedule's name")
        return next((s for s in self.schedules if s.schedule == name), None)

    def metrics_json(self) -> str:
        """The file as the metrics codec writes it back."""
        return self._core.metrics_json()

    def to_dict(self) -> dict[str, Any]:
        return json.loads(json.dumps(self._data))


def read_run(path: PathLike) -> Run:
    """Reads a metrics file (``simulate --json``, ``execute --json``, a partial run's
    ``.partial``); raises InputError naming the file and the key on anything malformed."""
    return Run(_core.read_run(_checks.Call("read_run").path("path", path)))


class Trace:
    """A trace as ``simulate --trace`` or ``execute --trace`` wrote it (DESIGN.md §6)."""

    def __init__(self, core: _core.TraceFile) -> None:
        self._core = core

    @property
    def path(self) -> str:
        """The file it was read from."""
        return self._core.path

    @property
    def source(self) -> str:
        """``predicted`` or ``measured``."""
        return self._core.source

    @property
    def costs(self) -> str:
        """A predicted trace's cost model (empty when not stated)."""
        return self._core.costs

    @property
    def scenario(self) -> str:
        """The scenario's name."""
        return self._core.scenario

    @property
    def schedule(self) -> str:
        """The schedule's name."""
        return self._core.schedule

    @property
    def microbatches(self) -> int:
        """Microbatches per step."""
        return self._core.microbatches

    @property
    def ranks(self) -> Optional[int]:
        """Ranks, from the header, else read off the ops; None when unknown."""
        return self._core.ranks

    @property
    def skipped(self) -> int:
        """Events the reader could not use (a foreign trace's own)."""
        return self._core.skipped

    @property
    def first_skipped(self) -> str:
        """Why the first skipped event was: ``event N: WHY``."""
        return self._core.first_skipped

    @property
    def op_count(self) -> int:
        """How many ops."""
        return self._core.op_count

    @property
    def ops(self) -> list[_core.TraceOp]:
        """Every op (rank, stream, op, op_index, start_ms, duration_ms)."""
        return self._core.ops

    @property
    def summary(self) -> Optional[RunResult]:
        """The schedule's metrics the trace carries, or None."""
        text = self._core.summary_json()
        return RunResult(json.loads(text)["schedules"][0]) if text else None

    def bubble_split(self) -> list[_core.BubbleSplit]:
        """Per rank, the makespan by cause, as the viewer splits it."""
        return self._core.bubble_split()

    def to_pandas(self) -> Any:
        """The ops as a pandas DataFrame, one row per op (needs pandas)."""
        return _pandas("Trace.to_pandas()").DataFrame(self._core.columns())


def read_trace(path: PathLike) -> Trace:
    """Reads a trace; releases the GIL while it parses."""
    return Trace(_core.read_trace(_checks.Call("read_trace").path("path", path)))


class Comparison:
    """What ``stagecraft compare`` computes: ``text`` is what it prints, ``json`` what
    ``compare --json`` writes (``to_dict()`` parses it)."""

    def __init__(self, core: _core.Comparison) -> None:
        self.text: str = core.text
        self.json: str = core.json
        self.worst: str = core.worst
        self.worst_error_pct: float = core.worst_error_pct
        self.exceeded: list[str] = list(core.exceeded)
        self.warnings: list[str] = list(core.warnings)

    def to_dict(self) -> dict[str, Any]:
        return json.loads(self.json)

    @property
    def schedules(self) -> list[dict[str, Any]]:
        """Per schedule in both files, its errors as ``compare --json`` gives them."""
        return self.to_dict()["schedules"]


RunSource = Union[PathLike, Run, Sequence[SimulatedRun]]


def _run_file(call: _checks.Call, name: str, run: RunSource) -> _core.RunFile:
    if isinstance(run, Run):
        return run._core
    if isinstance(run, (str, os.PathLike)):
        return _core.read_run_file(call.path(name, run))
    if isinstance(run, (list, tuple)) and run and all(isinstance(r, SimulatedRun) for r in run):
        return _core.run_from_json(metrics_json(run), "<simulate>")
    raise call.type_error(name, "a metrics file's path, a Run or simulate()'s results", run)


def compare(predicted: RunSource, measured: RunSource, max_error: Optional[float] = None,
            trace: Optional[PathLike] = None) -> Comparison:
    """Holds a prediction against a measurement, schedule by schedule, as ``stagecraft compare
    PREDICTED MEASURED [--max-error PCT] [--trace TRACE]`` does. Each may be a metrics file's
    path, a :class:`Run`, or (predicted) the results of :func:`simulate`. ``exceeded`` lists
    the schedules whose step-time error is over ``max_error`` percent. Releases the GIL."""
    call = _checks.Call("compare")
    limit = -1.0 if max_error is None else call.number("max_error", max_error, 0, unit="a percentage")
    trace_path = "" if trace is None else call.path("trace", trace)
    p = _run_file(call, "predicted", predicted)
    m = _run_file(call, "measured", measured)
    with call.names({"--trace": "trace", "--max-error": "max_error"}):
        return Comparison(_core.compare(p, m, limit, trace_path))
