"""Schedules: a generator's order, or a PyTorch CSV, as ``stagecraft schedule`` makes it."""

from __future__ import annotations

import os
from typing import Optional, Union

from . import _core

Schedule = _core.Schedule


def schedule(name: str, ranks: int, microbatches: int, chunks: Optional[int] = None, steps: int = 1, *,
             data_parallel: int = 1, recompute: bool = False, vertical_sync: bool = False,
             max_ops: int = _core.DEFAULT_MAX_OPS) -> Schedule:
    """A generator's schedule (unlowered), as ``stagecraft schedule --schedule NAME --ranks P
    --microbatches M [--chunks V] [--steps N]`` makes it. Raises InputError when the generator
    does not take the shape (the same line the command prints) or the estimate of its size is
    over ``max_ops``. ``chunks`` None takes the schedule's own (2 for interleaved, zb-v and
    dualpipe-v, else 1). Names: :func:`generator_names`."""
    return _core.generate(name, ranks, microbatches, 0 if chunks is None else chunks, steps, data_parallel, recompute, vertical_sync,
                          max_ops)


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
    return _core.import_csv(source, 0 if chunks is None else chunks, microbatches, steps, weights, data_parallel,
                            name or "", validate)


Schedule.from_csv = staticmethod(_from_csv)
