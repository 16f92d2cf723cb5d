"""Schedules: a generator's order, or a PyTorch CSV, as ``stagecraft schedule`` makes it."""

from __future__ import annotations

import os
from typing import Optional, Union

from . import _checks, _core

Schedule = _core.Schedule
Op = _core.Op

_MAX_OPS_FLAG = {"--max-ops": "max_ops"}


def schedule(name: str, ranks: int, microbatches: int, chunks: Optional[int] = None, steps: int = 1, *,
             data_parallel: int = 1, recompute: bool = False, vertical_sync: bool = False,
             max_ops: int = _core.DEFAULT_MAX_OPS) -> Schedule:
    """A generator's schedule (unlowered), as ``stagecraft schedule --schedule NAME --ranks P
    --microbatches M [--chunks V] [--steps N]`` makes it. Raises InputError when the generator
    does not take the shape (the same line the command prints) or the estimate of its size is
    over ``max_ops``. ``chunks`` None takes the schedule's own (2 for interleaved, zb-v and
    dualpipe-v, else 1). Names: :func:`generator_names`."""
    call = _checks.Call("schedule")
    args = (call.text("name", name, "a generator's name"), call.integer("ranks", ranks, 1),
            call.integer("microbatches", microbatches, 1),
            0 if chunks is None else call.integer("chunks", chunks, 1),
            call.integer("steps", steps, 1), call.integer("data_parallel", data_parallel, 1),
            call.flag("recompute", recompute), call.flag("vertical_sync", vertical_sync),
            call.integer("max_ops", max_ops, 1, _core.MAX_MAX_OPS))
    with call.names(_MAX_OPS_FLAG):
        return _core.generate(*args)


def generator_names() -> list[str]:
    """Every generator, in the table's order."""
    return _core.generator_names()


def _from_csv(source: Union[str, os.PathLike], *, chunks: Optional[int] = None, microbatches: int = 0,
              steps: int = 1, weights: str = "flush", data_parallel: int = 1, name: Optional[str] = None,
              validate: bool = True) -> Schedule:
    """A PyTorch ``torch.distributed.pipelining`` CSV, as ``stagecraft schedule --import`` reads
    it. ``source`` is a path (an ``os.PathLike``, or a str with no newline or comma) or the CSV
    text. ``chunks`` None infers stages per rank and the placement; ``microbatches`` 0 takes
    every microbatch of the file as one step. With ``validate``, an invalid order raises
    InputError with the command's line."""
    call = _checks.Call("Schedule.from_csv")
    if isinstance(source, str) and any(c in source for c in "\n,"):
        text: Union[str, os.PathLike] = source
    else:
        text = call.path("source", source)
    args = (0 if chunks is None else call.integer("chunks", chunks, 1),
            call.integer("microbatches", microbatches, 0, meaning="0: every microbatch of the file"),
            call.integer("steps", steps, 1), call.text("weights", weights, "flush, stash, 2bw or nostash"),
            call.integer("data_parallel", data_parallel, 1),
            call.optional_text("name", name, "a name for the schedule") or "", call.flag("validate", validate))
    with call.names({}, ["weights"]):
        return _core.import_csv(text, *args)


# The compiled methods that take arguments, behind the package's checks.
_core_lower, _core_to_csv, _core_to_json = Schedule.lower, Schedule.to_csv, Schedule.to_json
_core_rank_of, _core_action = Schedule.rank_of, Op.action


def _lower(self: Schedule, p2p: str = "ahead", buffers: int = 2) -> Schedule:
    """The schedule with SEND/RECV inserted (lower.h); p2p 'ahead' or 'lockstep'."""
    call = _checks.Call("lower")
    args = call.text("p2p", p2p, "ahead or lockstep"), call.integer("buffers", buffers, 1)
    with call.names({}, ["p2p"]):
        return _core_lower(self, *args)


def _to_csv(self: Schedule, comms: bool = False, p2p: str = "ahead") -> str:
    """PyTorch torch.distributed.pipelining CSV, as ``stagecraft schedule --format csv [--comms]`` prints it."""
    call = _checks.Call("to_csv")
    args = call.flag("comms", comms), call.text("p2p", p2p, "ahead or lockstep")
    with call.names({}, ["p2p"]):
        return _core_to_csv(self, *args)


def _to_json(self: Schedule, p2p: str = "ahead") -> str:
    """The lowered IR as JSON, as ``stagecraft schedule --format json`` prints it."""
    call = _checks.Call("to_json")
    p2p = call.text("p2p", p2p, "ahead or lockstep")
    with call.names({}, ["p2p"]):
        return _core_to_json(self, p2p)


def _rank_of(self: Schedule, stage: int) -> int:
    """The rank that runs ``stage``."""
    return _core_rank_of(self, _checks.Call("rank_of").integer("stage", stage, 0, self.stages - 1))


def _action(self: Op, microbatches_per_step: int) -> str:
    """PyTorch's action string, e.g. '0F0', '1SEND_F3' (the microbatch numbered across steps)."""
    return _core_action(self, _checks.Call("action").integer("microbatches_per_step", microbatches_per_step, 1))


_core_grid = Schedule.grid


def _grid(self: Schedule) -> str:
    """The unit-time grid, as ``stagecraft schedule`` prints it."""
    with _checks.Call("grid").names({"--format csv": "to_csv()", "--format json": "to_json()"}):
        return _core_grid(self)


Schedule.from_csv = staticmethod(_from_csv)
Schedule.lower, Schedule.to_csv, Schedule.to_json, Schedule.grid = _lower, _to_csv, _to_json, _grid
Schedule.rank_of, Op.action = _rank_of, _action
