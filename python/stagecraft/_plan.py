"""The plan, as ``stagecraft plan`` runs it."""

from __future__ import annotations

import json
import os
from typing import Any, Optional, Sequence, Union

from . import _checks, _core
from ._runs import RunResult, _Record
from ._scenario import Scenario


class PlanConfiguration(_Record):
    """One simulated configuration of the plan, as ``plan --json`` writes it: ``rank`` (its place,
    1 = best), ``fits``, ``pareto``, ``layout`` (the pipeline keys: schedule, ranks,
    data_parallel, tensor_parallel, context_parallel, expert_parallel, chunks, microbatches,
    microbatch_size, recompute, recompute_modules with selective, zero, partition, ...), ``tflops_per_gpu``, ``peak_memory_bytes`` and its rank, ``memory_terms``, and
    ``metrics``: the :class:`RunResult` ``simulate`` gives for the same scenario."""

    rank: int
    fits: bool
    pareto: bool
    layout: dict[str, Any]
    tflops_per_gpu: float
    peak_memory_bytes: int
    metrics: RunResult

    def __init__(self, data: dict[str, Any]) -> None:
        super().__init__(data)
        self.metrics = RunResult(data["metrics"])

    def overrides(self) -> dict[str, Any]:
        """The layout as ``pipeline.*`` overrides for :meth:`Scenario.load`."""
        return {f"pipeline.{k}": v for k, v in self.layout.items()}


class Plan:
    """What ``stagecraft plan`` found: ``configurations`` (every simulated one, fastest fitting
    first), ``best`` (None when nothing fits), ``pareto`` (the front of throughput against peak
    memory, memory ascending), the counts (``enumerated``, ``simulated``, ``rejected`` by reason,
    ``layouts_rejected``), ``context_parallel`` (the C tried), ``notes`` (the refinement's), :meth:`report` (the text the command
    prints), :meth:`to_json` (``--json``), :meth:`best_scenario_text` / :meth:`write_best`
    (``--write-best``) and :meth:`write_plot` (``--plot``)."""

    def __init__(self, core: _core.PlanRun, top: int) -> None:
        self._core = core
        self._top = top
        self._data = json.loads(core.json)
        self.configurations = [PlanConfiguration(c) for c in self._data["configurations"]]
        self.enumerated: int = self._data["enumerated"]
        self.simulated: int = self._data["simulated"]
        self.layouts: int = self._data["layouts"]
        self.rejected: dict[str, int] = self._data["rejected"]
        self.layouts_rejected: dict[str, int] = self._data["layouts_rejected"]
        self.notes: list[str] = self._data["notes"]
        self.context_parallel: list[int] = self._data["context_parallel"]
        self.seconds: float = self._data["seconds"]

    @property
    def best(self) -> Optional[PlanConfiguration]:
        """The fastest configuration that fits, or None."""
        first = self.configurations[0] if self.configurations else None
        return first if first is not None and first.fits else None

    @property
    def pareto(self) -> list[PlanConfiguration]:
        """The Pareto front, peak memory ascending."""
        front = [c for c in self.configurations if c.pareto]
        return sorted(front, key=lambda c: c.peak_memory_bytes)

    def report(self, top: Optional[int] = None) -> str:
        """The text ``stagecraft plan`` prints (its ``--top``: ``top``, default the plan's)."""
        return self._core.report(self._top if top is None else _checks.Call("report").integer("top", top, 1))

    def to_json(self) -> str:
        """The file ``plan --json`` writes."""
        return self._core.json

    def pareto_ascii(self) -> str:
        """The Pareto front as the terminal plot the command prints."""
        return self._core.pareto_ascii()

    def write_plot(self, path: Union[str, os.PathLike[str]]) -> None:
        """Writes the Pareto front as the PNG ``plan --plot`` writes, as the command writes its
        outputs: ``path`` checked before the image is made, a regular file replaced atomically
        (a temporary beside it, renamed over it), ``"-"`` standard output, a directory refused
        with :class:`InputError`."""
        self._core.write_plot(_checks.Call("write_plot").path("path", path))

    def best_scenario_text(self) -> str:
        """The winner as the scenario ``plan --write-best`` writes (``simulate`` and ``execute``
        take it as it is); raises :class:`InputError` when nothing fits."""
        return self._core.best_scenario_text()

    def write_best(self, path: Union[str, os.PathLike[str]]) -> None:
        """Writes :meth:`best_scenario_text` to ``path`` as the command writes its outputs (see
        :meth:`write_plot`)."""
        self._core.write_best(_checks.Call("write_best").path("path", path))

    def to_pandas(self) -> Any:
        """One row per configuration: the layout's keys and the metrics' scalars."""
        from ._runs import _pandas
        pandas = _pandas("Plan.to_pandas")
        rows = []
        for c in self.configurations:
            row = {"rank": c.rank, "fits": c.fits, "pareto": c.pareto, "tflops_per_gpu": c.tflops_per_gpu,
                   "peak_memory_bytes": c.peak_memory_bytes}
            row.update(c.layout)
            row.update({k: v for k, v in c.metrics.to_dict().items() if not isinstance(v, (list, dict))
                        and k not in c.layout})
            rows.append(row)
        return pandas.DataFrame(rows)


# The command's flags as stagecraft.plan's arguments, for the messages of the code they share.
_PLAN_FLAGS = {
    "--gpus": "gpus", "--global-batch": "global_batch", "--memory-limit": "memory_limit",
    "--tensor-parallel": "tensor_parallel", "--context-parallel": "context_parallel", "--schedules": "schedules",
    "--recompute": "recompute",
    "--partition": "partitions", "--zero": "zero", "--max-microbatch-size": "max_microbatch_size",
    "--max-chunks": "max_chunks", "--top": "top", "--threads": "threads", "--refine": "refine",
    "--search-evaluations": "search_evaluations", "--refine-seconds": "refine_seconds", "--max-ops": "max_ops",
}


def plan(scenario: Scenario, gpus: int, global_batch: int, memory_limit: Union[str, int, None] = None,
         tensor_parallel: Optional[Sequence[int]] = None, schedules: Optional[Sequence[str]] = None,
         recompute: Optional[Sequence[str]] = None, partitions: Optional[Sequence[str]] = None,
         zero: Optional[Sequence[int]] = None, max_microbatch_size: int = 0, max_chunks: int = 8, top: int = 10,
         threads: int = 0, refine: int = 3, search_evaluations: int = 0, refine_seconds: float = 20.0,
         max_ops: int = 0, context_parallel: Optional[Sequence[int]] = None) -> Plan:
    """How to run the scenario's model on ``gpus`` devices for a global batch of
    ``global_batch`` samples, as ``stagecraft plan SCENARIO --gpus N --global-batch B`` plans it:
    every layout P x D x T x C, microbatch split, schedule with its chunks, recompute, ZeRO and
    partition the topology and model allow, pruned by lower bounds and simulated on every core
    (docs/plan.md). The optional arguments are the command's flags (None: all): ``memory_limit``
    a size ("60GiB" or an int of bytes; None: pipeline.memory_limit, else the device's),
    ``tensor_parallel`` the T to try, ``context_parallel`` the C (None: 1, the scenario's and each
    that leaves a device 4,096 tokens of a sequence or more), ``schedules`` the generators (``"auto"`` for the searched
    order), ``recompute`` of none/selective/full, ``partitions`` of even/balanced, ``zero`` of
    0-3 (None: 0 and 1 where D > 1). ``context_parallel`` comes last, so that the arguments before
    it keep their places. Releases the GIL while it plans; Ctrl-C stops it (KeyboardInterrupt)."""
    call = _checks.Call("plan")
    core = call.scenario(scenario, for_plan=True)
    args = dict(
        gpus=call.integer("gpus", gpus, 1),
        global_batch=call.integer("global_batch", global_batch, 1, _checks.INT64_MAX),
        memory_limit=call.size("memory_limit", memory_limit) or "",
        tensor_parallel=call.items("tensor_parallel", tensor_parallel, lambda name, t: call.integer(name, t, 1)),
        context_parallel=call.items("context_parallel", context_parallel, lambda name, c: call.integer(name, c, 1)),
        schedules=call.items("schedules", schedules, call.text),
        recompute=call.items("recompute", recompute, call.text),
        partitions=call.items("partitions", partitions, call.text),
        zero=call.items("zero", zero, lambda name, z: call.integer(name, z, 0, 3)),
        max_microbatch_size=call.integer("max_microbatch_size", max_microbatch_size, 0, meaning="0: no bound"),
        max_chunks=call.integer("max_chunks", max_chunks, 1),
        top=call.integer("top", top, 1),
        threads=call.integer("threads", threads, 0, _core.MAX_PLAN_THREADS, "0: every core"),
        refine=call.integer("refine", refine, 0, meaning="0: none"),
        search_evaluations=call.integer("search_evaluations", search_evaluations, 0, _checks.INT64_MAX,
                                        "0: the scenario's"),
        refine_seconds=call.number("refine_seconds", refine_seconds, 0, unit="a number of seconds"),
        max_ops=call.integer("max_ops", max_ops, 0, _core.MAX_MAX_OPS, "0: the default"),
    )
    with call.names(_PLAN_FLAGS):
        return Plan(_core.plan(core, **args), args["top"])
