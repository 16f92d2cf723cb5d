"""The schedule search, as ``stagecraft search`` runs it."""

from __future__ import annotations

from typing import Optional, Union

from . import _checks, _core
from ._scenario import Scenario

SearchResult = _core.SearchResult


def search(scenario: Scenario, memory_limit: Union[str, int, None] = None, budget: float = 9.0,
           evaluations: Optional[int] = None, seed: int = 1, from_: Optional[str] = None) -> SearchResult:
    """An op order per rank for the scenario's job, as ``stagecraft search SCENARIO
    [--memory-limit X] [--budget S] [--evaluations N] [--seed N] [--from GEN]`` searches it:
    annealed from the best generator's order within the memory limit, the simulator judging.

    ``memory_limit``: a size ("60GiB", or an int of bytes) or k·p forwards' activations ("2p");
    None: pipeline.memory_limit, else the device's memory. ``budget``: seconds, the starts
    included; ``evaluations``: stop after this many moves instead (with ``seed``, a repeatable
    search). The result's ``best`` is the schedule (one step), ``to_csv()`` the file ``--out``
    writes and ``explanation`` what the command prints. Releases the GIL while it searches;
    Ctrl-C stops it (KeyboardInterrupt)."""
    call = _checks.Call("search")
    core = call.scenario(scenario)
    seconds = call.number("budget", budget, 0, _core.MAX_SEARCH_BUDGET_SECONDS, "a number of seconds")
    if seconds == 0:  # as --budget: a budget of 0 could not even judge the starts
        raise call.value_error("budget", f"expected a number of seconds in (0, {_core.MAX_SEARCH_BUDGET_SECONDS:g}], got 0")
    args = (call.size("memory_limit", memory_limit), seconds,
            0 if evaluations is None else call.integer("evaluations", evaluations, 1, _checks.INT64_MAX),
            call.integer("seed", seed, 0, _checks.UINT64_MAX),
            call.optional_text("from_", from_, "a generator's name") or "")
    with call.names({"--memory-limit": "memory_limit", "--from": "from_"}):
        return _core.search(core, *args)
