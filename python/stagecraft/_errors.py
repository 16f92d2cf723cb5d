"""stagecraft.InputError: bad input, with the one line the command line prints for it."""

from __future__ import annotations

import re
from typing import Optional

# "FILE:LINE:COL: ..." (YAML, CSV) or "FILE:LINE: ...".
_LOCATED = re.compile(r"^(?P<file>[^:\s][^:]*?):(?P<line>\d+)(?::(?P<column>\d+))?: ")
# "FILE: ..." where FILE has no space, does not start with '-' (a flag: "--set key: ...") and looks
# like a file name: it has a '.' or a '/', or is a name in angle brackets ("<dict>").
_FILE = re.compile(r"^(?P<file>(?:<[^>\s]+>|[^-:\s][^:\s]*[./][^:\s]*)): ")


class InputError(ValueError):
    """Bad input: a scenario, a CSV, a metrics file, a trace or an argument.

    ``str(error)`` is the line ``stagecraft`` prints after ``stagecraft: error: `` for the same
    input (control characters escaped), with the Python argument in place of the command's flag
    (``plan: max_ops: ...``). ``argument`` names that argument when the error is about one
    (``"max_ops"``, ``"overrides"``); ``file``, ``line`` and ``column`` say where, when the
    message starts with ``FILE:LINE:COL:``, ``FILE:LINE:`` or ``FILE:``; each is None otherwise.
    """

    message: str
    argument: Optional[str]
    file: Optional[str]
    line: Optional[int]
    column: Optional[int]

    def __init__(self, message: str, argument: Optional[str] = None) -> None:
        super().__init__(message)
        self.message = message
        self.argument = argument
        self.file, self.line, self.column = None, None, None
        if argument is not None:  # "plan: max_ops: ..." names an argument, not a file
            return
        located = _LOCATED.match(message)
        if located:
            self.file = located["file"]
            self.line = int(located["line"])
            self.column = int(located["column"]) if located["column"] else None
        elif (named := _FILE.match(message)) is not None:
            self.file = named["file"]
