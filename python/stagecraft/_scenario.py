"""Scenarios: loaded from a YAML file or a dict by the command line's own loader, with --set
style overrides, so they are checked and refused with the same messages."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from typing import Any, Optional, Union

from . import _checks, _core

Overrides = Union[Mapping[str, Any], Iterable[str], None]


def _yaml_value(value: Any) -> str:
    """A Python value as the YAML text --set takes: strings as written (parsed as YAML, as
    --set parses them), booleans and numbers in YAML's spelling, lists and maps as flow YAML."""
    if isinstance(value, str):
        return value
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    return json.dumps(value, default=_json_default)  # JSON is flow YAML


def _json_default(value: Any) -> Any:
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    raise TypeError(f"{type(value).__name__} is not a scenario value (use str, int, float, bool, list or dict)")


# --set as the scenario calls' argument: "--set pipeline.ranks: ..." is "overrides: pipeline.ranks: ...".
_SET_FLAG = {"--set": "overrides: "}


def override_texts(overrides: Overrides, call: Optional[_checks.Call] = None) -> list[str]:
    """``{"pipeline.microbatches": 32}`` or ``["pipeline.microbatches=32"]`` as --set texts."""
    call = call or _checks.Call("overrides")
    if overrides is None:
        return []
    expected = "a dict {'key.path': value} or a list of 'key.path=value' strings"
    if isinstance(overrides, Mapping):
        for key in overrides:
            if not isinstance(key, str):
                raise call.type_error("overrides", f"{expected} (a key is not a str)", key)
        try:
            return [f"{key}={_yaml_value(value)}" for key, value in overrides.items()]
        except TypeError as e:
            raise TypeError(f"{call.function}: overrides: {e}") from None
    if isinstance(overrides, (str, bytes)) or not isinstance(overrides, Iterable):
        raise call.type_error("overrides", expected, overrides)
    return [call.text("overrides", text, "'key.path=value' strings") for text in overrides]


class Scenario:
    """A loaded, validated scenario (DESIGN.md §3).

    Build one with :meth:`load` (a YAML file) or :meth:`from_dict` (the same keys as the YAML).
    Both go through the command line's loader: the same checks, the same messages, raised as
    :class:`stagecraft.InputError`.
    """

    def __init__(self, core: _core.Scenario, text: Optional[str] = None, for_plan: bool = False) -> None:
        self._core = core
        self._text = text  # the YAML text of a scenario not loaded from a file
        self._for_plan = for_plan  # loaded by load_for_plan: its layout unchecked, for plan only

    @classmethod
    def load(cls, path: Union[str, os.PathLike], overrides: Overrides = None) -> "Scenario":
        """Loads a scenario file; ``overrides`` as ``--set`` takes them: a dict
        ``{"pipeline.microbatches": 32}`` or a list of ``"key.path=value"`` strings."""
        call = _checks.Call("Scenario.load")
        file, texts = call.path("path", path), override_texts(overrides, call)
        with call.names(_SET_FLAG):
            return cls(_core.load_scenario(file, texts))

    @classmethod
    def load_for_plan(cls, path: Union[str, os.PathLike], overrides: Overrides = None) -> "Scenario":
        """Loads a scenario file for :func:`plan`, as ``stagecraft plan`` does: the pipeline
        layout that plan replaces (schedule, ranks, chunks, microbatches, parallel degrees) is
        read but not checked, so a scenario whose layout does not fit its model or machine can
        still be planned. Only plan takes such a scenario."""
        call = _checks.Call("Scenario.load_for_plan")
        file, texts = call.path("path", path), override_texts(overrides, call)
        with call.names(_SET_FLAG):
            return cls(_core.load_scenario_for_plan(file, texts), for_plan=True)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], overrides: Overrides = None, path: str = "<dict>") -> "Scenario":
        """A scenario from a dict with the YAML's keys. It is written as YAML text (JSON, which
        YAML reads) and loaded as a file would be: errors name ``path`` (default ``<dict>``) with
        a line and column in that text and the key, and relative file names in it (topology,
        model.profile, schedule CSVs) resolve against ``path``'s directory."""
        call = _checks.Call("Scenario.from_dict")
        if not isinstance(data, Mapping):
            raise call.type_error("data", "a dict", data)
        try:
            text = json.dumps(data, indent=2, default=_json_default) + "\n"
        except TypeError as e:
            raise TypeError(f"{call.function}: data: {e}") from None
        except ValueError as e:  # a circular reference
            raise call.value_error("data", str(e)) from None
        return cls._from_text(call, text, overrides, path)

    @classmethod
    def from_yaml(cls, text: str, overrides: Overrides = None, path: str = "<yaml>") -> "Scenario":
        """A scenario from YAML text; ``path`` as for :meth:`from_dict`."""
        call = _checks.Call("Scenario.from_yaml")
        if not isinstance(text, str):
            raise call.type_error("text", "a str", text)
        return cls._from_text(call, text, overrides, path)

    @classmethod
    def _from_text(cls, call: _checks.Call, text: str, overrides: Overrides, path: Any) -> "Scenario":
        name, texts = call.text("path", path, "a name for the text"), override_texts(overrides, call)
        with call.names(_SET_FLAG):
            return cls(_core.scenario_from_text(text, name, texts), text)

    def with_overrides(self, overrides: Overrides) -> "Scenario":
        """The same scenario loaded again with more overrides after its own (a sweep:
        ``s.with_overrides({"pipeline.microbatches": m})``)."""
        call = _checks.Call("Scenario.with_overrides")
        texts = list(self._core.overrides) + override_texts(overrides, call)
        with call.names(_SET_FLAG):
            if self._for_plan:
                return Scenario(_core.load_scenario_for_plan(self._core.path, texts), for_plan=True)
            if self._text is None:
                return Scenario(_core.load_scenario(self._core.path, texts))
            return Scenario(_core.scenario_from_text(self._text, self._core.path, texts), self._text)

    @property
    def name(self) -> str:
        """The scenario's name (its ``name`` key)."""
        return self._core.name

    @property
    def path(self) -> str:
        """Its file, or the name given to its text."""
        return self._core.path

    @property
    def ranks(self) -> int:
        """``pipeline.ranks`` of the scenario."""
        return self._core.ranks

    @property
    def chunks(self) -> int:
        """``pipeline.chunks`` of the scenario."""
        return self._core.chunks

    @property
    def microbatches(self) -> int:
        """``pipeline.microbatches`` of the scenario."""
        return self._core.microbatches

    @property
    def microbatch_size(self) -> int:
        """``pipeline.microbatch_size`` of the scenario."""
        return self._core.microbatch_size

    @property
    def steps(self) -> int:
        """``pipeline.steps`` of the scenario."""
        return self._core.steps

    @property
    def data_parallel(self) -> int:
        """``pipeline.data_parallel`` of the scenario."""
        return self._core.data_parallel

    @property
    def tensor_parallel(self) -> int:
        """``pipeline.tensor_parallel`` of the scenario."""
        return self._core.tensor_parallel

    @property
    def context_parallel(self) -> int:
        """``pipeline.context_parallel`` of the scenario (1 without context parallelism)."""
        return self._core.context_parallel

    @property
    def devices(self) -> int:
        """Devices of the job: ranks x data_parallel x context_parallel x tensor_parallel."""
        return self._core.devices

    @property
    def device(self) -> str:
        """The device's name (``topology.device``; with ``topology.groups``, pipeline rank 0's)."""
        return self._core.device

    @property
    def device_memory_bytes(self) -> int:
        """The device's memory, what a rank's peak is held against (OOM); rank 0's with groups."""
        return self._core.device_memory_bytes

    @property
    def rank_devices(self) -> list[str]:
        """Each pipeline rank's device name (with ``topology.groups``, its replicas' and tensor
        ranks' devices joined by '+' when they differ), rank 0 first."""
        return list(self._core.rank_devices)

    @property
    def rank_memory_bytes(self) -> list[int]:
        """Each pipeline rank's device memory (the smallest of its devices'), rank 0 first."""
        return list(self._core.rank_memory_bytes)

    @property
    def overrides(self) -> list[str]:
        """The --set texts it was loaded with, in order."""
        return list(self._core.overrides)

    @property
    def schedules(self) -> list[str]:
        """pipeline.schedule as written: names, CSV files, or ``["all"]``."""
        return list(self._core.schedules)

    def schedule_names(self) -> list[str]:
        """The schedules :func:`stagecraft.simulate` runs: the listed ones, or under ``all``
        every generator the shape allows."""
        return self._core.schedule_names()

    def __repr__(self) -> str:
        return repr(self._core)
