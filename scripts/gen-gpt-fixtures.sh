#!/usr/bin/env bash
# Regenerates the GPT-2 reference fixtures tests/data/gpt/{block,model}.txt with PyTorch (Debian's
# python3-torch; deterministic); the C++ tests read them without torch (tools/stagecraft_tools/gpt_fixtures.py).
# Usage: scripts/gen-gpt-fixtures.sh [OUTPUT_DIR]
STAGECRAFT_PYTHON=/usr/bin/python3 exec "$(dirname "${BASH_SOURCE[0]}")/tool.sh" gpt_fixtures "$@"
