#!/usr/bin/env bash
# Where a measured run's per-op overhead goes: the gaps before each compute op of a trace, by op
# kind and by receives completed inside them (tools/stagecraft_tools/trace_gaps.py).
# Usage: scripts/trace-gaps.sh TRACE.json...
exec "$(dirname "${BASH_SOURCE[0]}")/tool.sh" trace_gaps "$@"
