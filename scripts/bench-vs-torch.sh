#!/usr/bin/env bash
# stagecraft's CPU executor against PyTorch side by side: per-layer times, the main scenario, a
# GPipe over gloo, every schedule against its ideal, the transformer (tools/stagecraft_tools/
# peer_bench.py; the PyTorch side is torch_peer.py). Without PyTorch (python3-torch) the sections
# that need it are skipped, saying so; --ideal needs none.
# Usage: scripts/bench-vs-torch.sh [REPEATS] [--gpt | --ideal] [--set KEY=VALUE]... [--ideal-steps N] [--profile-repeats N]
exec "$(dirname "${BASH_SOURCE[0]}")/tool.sh" peer_bench "$@"
