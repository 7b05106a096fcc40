#!/usr/bin/env bash
# test_parity.sh: the C engine against PyTorch (Debian's python3-torch): logits, loss, every
# gradient, and 10 AdamW steps on a 2-layer, 64-channel GPT-2 with the full vocabulary.
set -u
. "$(dirname "$0")/lib.sh"
if ! "$PY" -c "import torch" 2>/dev/null; then
    echo "FAIL parity: PyTorch is not importable by $PY (Debian: apt-get install python3-torch)"
    exit 1
fi
build/test/parity_dump "$dir" > /dev/null || { echo "FAIL parity: parity_dump failed"; exit 1; }
"$PY" test/torch_gpt2.py "$dir"
