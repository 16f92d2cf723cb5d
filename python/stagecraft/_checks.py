"""The arguments of the package's public calls, checked before any reaches the C++ code: a value
of the wrong type is a TypeError, a bad value an InputError, each naming the call and the
argument as Python spells them (``plan: max_ops: expected an integer in [0, ...], got -1``).
The C++ code checks what only it knows (a shape a generator takes, a size's units); its
messages name the command's flags, which :meth:`Call.names` puts in Python's words."""

from __future__ import annotations

import contextlib
import math
import operator
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Callable, Optional

from ._errors import InputError

INT32_MAX = 2**31 - 1  # an argument the C++ code takes as int
INT64_MAX = 2**63 - 1  # ... as int64_t
UINT64_MAX = 2**64 - 1  # ... as uint64_t


def describe(value: Any) -> str:
    """A value as a message shows what was given: ``None``, ``str '1'``, ``float nan``."""
    if value is None:
        return "None"
    shown = repr(value)
    if len(shown) > 40:
        shown = shown[:37] + "..."
    return f"{type(value).__name__} {shown}"


class Call:
    """The checks of one public call's arguments; every message starts with ``function: name:``."""

    def __init__(self, function: str) -> None:
        self.function = function

    def type_error(self, name: str, expected: str, value: Any) -> TypeError:
        return TypeError(f"{self.function}: {name}: expected {expected}, got {describe(value)}")

    def value_error(self, name: str, what: str) -> InputError:
        return InputError(f"{self.function}: {name}: {what}", argument=name)

    def integer(self, name: str, value: Any, low: int, high: int = INT32_MAX, meaning: str = "") -> int:
        """An int (not a bool) in [low, high]; `meaning` explains a special value ("0: every core")."""
        if isinstance(value, bool) or not hasattr(value, "__index__"):
            raise self.type_error(name, "an integer", value)
        number = operator.index(value)
        if not low <= number <= high:
            note = f" ({meaning})" if meaning else ""
            raise self.value_error(name, f"expected an integer in [{low}, {high}]{note}, got {number}")
        return number

    def optional_integer(self, name: str, value: Any, low: int, high: int = INT32_MAX) -> Optional[int]:
        return None if value is None else self.integer(name, value, low, high)

    def number(self, name: str, value: Any, low: float, high: float = math.inf, unit: str = "a number") -> float:
        """A finite int or float (not a bool) in [low, high]."""
        if isinstance(value, bool) or not isinstance(value, (int, float)) and not hasattr(value, "__float__"):
            raise self.type_error(name, unit, value)
        number = float(value)
        if not (math.isfinite(number) and low <= number <= high):
            bounds = f"at least {low:g}" if high == math.inf else f"in [{low:g}, {high:g}]"
            raise self.value_error(name, f"expected {unit} {bounds}, got {number:g}")
        return number

    def flag(self, name: str, value: Any) -> bool:
        if not isinstance(value, bool):
            raise self.type_error(name, "True or False", value)
        return value

    def text(self, name: str, value: Any, what: str = "a non-empty string") -> str:
        if not isinstance(value, str):
            raise self.type_error(name, what, value)
        if not value:
            raise self.value_error(name, f"expected {what}, got ''")
        return value

    def optional_text(self, name: str, value: Any, what: str = "a non-empty string") -> Optional[str]:
        return None if value is None else self.text(name, value, what)

    def path(self, name: str, value: Any) -> str:
        """A str or os.PathLike naming a file, as text."""
        if not isinstance(value, (str, os.PathLike)):
            raise self.type_error(name, "a path (str or os.PathLike)", value)
        text = os.fspath(value)
        if isinstance(text, bytes):
            raise self.type_error(name, "a path (str or os.PathLike)", value)
        if not text:
            raise self.value_error(name, "expected a path, got an empty file name")
        return text

    def size(self, name: str, value: Any) -> Optional[str]:
        """A memory size: None, a text with units ("60GiB"), or an int of bytes above 0."""
        if value is None:
            return None
        if isinstance(value, str):
            return self.text(name, value, "a size")
        return str(self.integer(name, value, 1, INT64_MAX))

    def items(self, name: str, value: Any, item: Callable[[str, Any], Any]) -> list[Any]:
        """None (every one) or a list or tuple; `item(name, element)` checks each element."""
        if value is None:
            return []
        if isinstance(value, (str, bytes)) or not isinstance(value, Iterable) or isinstance(value, Mapping):
            raise self.type_error(name, "a list", value)
        return [item(name, element) for element in value]

    def instances(self, name: str, value: Any, kind: type, expected: str) -> list[Any]:
        """A list or tuple of `kind` (None is not one)."""
        if value is None:
            raise self.type_error(name, expected, value)

        def one(name: str, element: Any) -> Any:
            if not isinstance(element, kind):
                raise self.type_error(name, expected, element)
            return element
        return self.items(name, value, one)

    def scenario(self, value: Any, name: str = "scenario", for_plan: bool = False) -> Any:
        """A stagecraft.Scenario's compiled part; one loaded by Scenario.load_for_plan (its layout
        unchecked) only where ``for_plan``."""
        from ._scenario import Scenario
        if not isinstance(value, Scenario):
            hint = " (Scenario.load(path) reads a file)" if isinstance(value, (str, os.PathLike)) else ""
            raise self.type_error(name, f"a stagecraft.Scenario{hint}", value)
        if value._for_plan and not for_plan:
            raise self.value_error(name, "loaded by Scenario.load_for_plan, whose pipeline layout is unchecked: only "
                                         "plan takes it (Scenario.load checks the whole scenario)")
        return value._core

    @contextlib.contextmanager
    def names(self, flags: Mapping[str, str], arguments: Iterable[str] = ()) -> Iterator[None]:
        """Errors of the C++ code under the block in Python's words (:meth:`renamed`)."""
        try:
            yield
        except InputError as error:
            raise self.renamed(error, flags, arguments) from None

    def renamed(self, error: InputError, flags: Mapping[str, str], arguments: Iterable[str] = ()) -> InputError:
        """`error` with each of the command's `flags` put as Python spells it:
        ``{"--gpus": "gpus"}`` makes "--gpus 5: ..." "gpus=5: ..." and "--gpus: ..." "gpus: ...";
        an argument ending in ": " takes what follows the flag as a key (``{"--set": "overrides: "}``:
        "--set pipeline.ranks: ..." is "overrides: pipeline.ranks: ..."); a flag with a space is
        replaced as it is (``{"--format csv": "to_csv()"}``). A message that starts with a flag,
        with one of `arguments` and a colon ("p2p: ..."), or with this call's name and an argument
        (the C++ parsers are told "plan: recompute"), is about that argument and starts with the
        call's name."""
        message = error.message
        named: Optional[str] = None
        for flag, argument in flags.items():
            name = argument.rstrip(": ")
            if " " in flag:
                message = message.replace(flag, argument)
                continue
            pattern = re.compile(re.escape(flag) + r"(?: (?!-)([^\s:,()]+))?(?=[\s:,()]|$)")
            if pattern.match(message):
                named = name

            def python(found: re.Match[str], argument: str = argument, name: str = name) -> str:
                if not found[1]:
                    return name
                return f"{argument}{found[1]}" if argument.endswith(": ") else f"{argument}={found[1]}"

            message = pattern.sub(python, message)
        if named is not None:
            return InputError(f"{self.function}: {message}", argument=named)
        for name in arguments:
            if message.startswith(f"{name}:"):
                return InputError(f"{self.function}: {message}", argument=name)
        for name in [argument.rstrip(": ") for argument in flags.values()]:
            if message.startswith(f"{self.function}: {name}"):
                return InputError(message, argument=name)
        return error if message == error.message else InputError(message)
