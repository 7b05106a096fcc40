#!/usr/bin/env bash
# test_export_hf.sh: build/export_hf writes a model file as a Hugging Face GPT-2 directory
# (config.json, model.safetensors). An independent reader here parses the safetensors bytes itself
# and runs GPT-2 the way Hugging Face's code does (Conv1D weights in x out, tied LM head, tanh GELU,
# the config's LayerNorm epsilon): its val loss on the trainer's val batches equals the one the C
# engine printed for the same weights, and its logits equal those of test/torch_gpt2.py's model on
# the original file (which test_parity.sh holds to the C engine). Also an llm.c bf16 file (version
# 5), and bad input.
set -u
export OMP_NUM_THREADS=1
. "$(dirname "$0")/lib.sh"
exp=build/export_hf
require "$exp"
# README's `build/export_hf model.bin OUTDIR` follows its `make train`: make train builds it (make's
# dry run into a scratch build dir lists its link).
make -n train BUILD="$dir/b" 2> /dev/null | grep -qE -- "-o $dir/b/export_hf( |$)" \
    && pass "make train builds build/export_hf" || fail "make train" "its dry run does not link export_hf"
tiny_data 2 4000
# Trained a little (biases and LayerNorms move off 0 and 1), then the val loss of step 20's weights.
./train_gpt2 -e "$dir/m.bin" -i "$dir/train.bin" -j "$dir/val.bin" -b 4 -t 32 -x 20 -v 20 -m 4 -s 0 -l 3e-3 -u 2 -n 20 \
    -o "$dir/run" > "$dir/run.out" 2>&1 || fail "training" "$(tail -2 "$dir/run.out")"
c_val=$(grep '^val loss' "$dir/run.out" | tail -1 | sed 's/val loss //')
$exp "$dir/run/model_00000020.bin" "$dir/hf" > "$dir/exp.out" 2>&1 || fail "export" "$(cat "$dir/exp.out")"
"$PY" - "$dir" "$c_val" <<'PYEOF'
import json, math, struct, sys
import numpy as np
import torch
import torch.nn.functional as F
d, c_val = sys.argv[1], float(sys.argv[2])
sys.path.insert(0, "test")
from torch_gpt2 import GPT2, load_model

def read_safetensors(path):
    raw = open(path, "rb").read()
    n = struct.unpack_from("<Q", raw)[0]
    header = json.loads(raw[8:8 + n])
    base, out, end = 8 + n, {}, 0
    for name, info in header.items():
        if name == "__metadata__":
            continue
        assert info["dtype"] == "F32", info
        a, b = info["data_offsets"]
        out[name] = torch.tensor(np.frombuffer(raw, dtype="<f4", count=(b - a) // 4, offset=base + a).reshape(info["shape"]))
        end = max(end, b)
    assert base + end == len(raw), "bytes after the last tensor"
    return out

cfg = json.load(open(d + "/hf/config.json"))
w = read_safetensors(d + "/hf/model.safetensors")

def hf_forward(idx):
    """GPT-2 as Hugging Face's modeling code computes it, from its own names and layouts."""
    C, H, eps = cfg["n_embd"], cfg["n_head"], cfg["layer_norm_epsilon"]
    assert cfg["activation_function"] == "gelu_new" and cfg["tie_word_embeddings"]
    B, T = idx.shape
    x = w["transformer.wte.weight"][idx] + w["transformer.wpe.weight"][:T]
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
    conv1d = lambda x, p: x @ w[p + ".weight"] + w[p + ".bias"]  # Conv1D: weight is (in, out)
    ln = lambda x, p: F.layer_norm(x, (C,), w[p + ".weight"], w[p + ".bias"], eps)
    for l in range(cfg["n_layer"]):
        h = "transformer.h.%d." % l
        q, k, v = conv1d(ln(x, h + "ln_1"), h + "attn.c_attn").split(C, dim=2)
        q, k, v = (z.view(B, T, H, C // H).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(C // H)
        y = (F.softmax(att.masked_fill(~mask, float("-inf")), dim=-1) @ v).transpose(1, 2).reshape(B, T, C)
        x = x + conv1d(y, h + "attn.c_proj")
        x = x + conv1d(F.gelu(conv1d(ln(x, h + "ln_2"), h + "mlp.c_fc"), approximate="tanh"), h + "mlp.c_proj")
    return ln(x, "transformer.ln_f") @ w["transformer.wte.weight"].t()

fails = 0
def report(ok, msg):
    global fails
    print(("PASS " if ok else "FAIL ") + msg)
    fails += not ok

h = np.fromfile(d + "/run/model_00000020.bin", dtype=np.int32, count=8)
ok = (cfg["model_type"] == "gpt2" and cfg["n_layer"] == h[4] and cfg["n_embd"] == h[6] and cfg["n_head"] == h[5] and
      cfg["vocab_size"] == h[3] and cfg["n_positions"] == h[2] and len(w) == 4 + 12 * int(h[4]))
report(ok, "config.json and the safetensors header: GPT-2's names and shapes (L=%d C=%d NH=%d V=%d, %d tensors)"
       % (cfg["n_layer"], cfg["n_embd"], cfg["n_head"], cfg["vocab_size"], len(w)))
# The val batches the trainer evaluated: the first 4 windows of B*T tokens, targets shifted by one.
toks = np.fromfile(d + "/val.bin", dtype=np.uint16, offset=1024).astype(np.int64)
B, T, losses = 4, 32, []
with torch.no_grad():
    for i in range(4):
        chunk = torch.tensor(toks[i * B * T:(i + 1) * B * T + 1])
        x, y = chunk[:-1].view(B, T), chunk[1:].view(B, T)
        losses.append(F.cross_entropy(hf_forward(x).view(-1, cfg["vocab_size"]), y.reshape(-1)).item())
    hf_val = sum(losses) / len(losses)
    report(abs(hf_val - c_val) <= 1e-5 * abs(c_val),
           "Hugging Face's layout, read independently: val loss %.6f, the C engine's %.6f" % (hf_val, c_val))
    mcfg, _, t = load_model(d + "/run/model_00000020.bin")
    ref = GPT2(mcfg, t)(x)
    got = hf_forward(x)
    diff = (got - ref).abs().max().item()
    report(diff <= 1e-5, "logits from the export equal torch_gpt2.py's from the model file (max difference %.2g)" % diff)
sys.exit(1 if fails else 0)
PYEOF
[ $? -eq 0 ] || failed=1

# llm.c's bf16 model file (version 5): exported widened to fp32, value for value.
"$PY" - "$dir/run/model_00000020.bin" "$dir/m_bf16.bin" <<'PYEOF'
import sys
import numpy as np
h = np.fromfile(sys.argv[1], dtype=np.int32, count=256).copy()
p = np.fromfile(sys.argv[1], dtype=np.float32, offset=1024)
h[1] = 5
h[8:] = 0  # no checksum, no run id: an llm.c file
bf = (p.view(np.uint32) >> 16).astype(np.uint16)  # truncated to bf16
with open(sys.argv[2], "wb") as f:
    f.write(h.tobytes()); f.write(bf.tobytes())
PYEOF
if $exp "$dir/m_bf16.bin" "$dir/hf16" > "$dir/exp16.out" 2>&1; then
    "$PY" - "$dir/m_bf16.bin" "$dir/hf16/model.safetensors" <<'PYEOF'
import json, struct, sys
import numpy as np
h = np.fromfile(sys.argv[1], dtype=np.int32, count=8)
V, C = int(h[3]), int(h[6])
bf = np.fromfile(sys.argv[1], dtype=np.uint16, offset=1024)
wte = (bf[:V * C].astype(np.uint32) << 16).view(np.float32)
raw = open(sys.argv[2], "rb").read()
n = struct.unpack_from("<Q", raw)[0]
info = json.loads(raw[8:8 + n])["transformer.wte.weight"]
a, b = info["data_offsets"]
got = np.frombuffer(raw, dtype="<f4", count=(b - a) // 4, offset=8 + n + a)
ok = np.array_equal(got, wte)
print("%s an llm.c bf16 file (version 5) exports widened to fp32, value for value" % ("PASS" if ok else "FAIL"))
sys.exit(0 if ok else 1)
PYEOF
    [ $? -eq 0 ] || failed=1
else
    fail "bf16 export" "$(cat "$dir/exp16.out")"
fi

# Bad input: one line naming the file, exit 1, nothing written.
$exp "$dir/nope.bin" "$dir/hf_bad" > /dev/null 2> "$dir/bad.err"
[ $? -eq 1 ] && [ "$(wc -l < "$dir/bad.err")" -eq 1 ] && grep -q "nope.bin" "$dir/bad.err" && [ ! -e "$dir/hf_bad/model.safetensors" ] &&
    pass "export_hf: a missing model file is one line naming it" || fail "missing file" "$(cat "$dir/bad.err")"
head -c 3000 "$dir/run/model_00000020.bin" > "$dir/cut.bin"
$exp "$dir/cut.bin" "$dir/hf_cut" > /dev/null 2> "$dir/cut.err"
[ $? -eq 1 ] && [ "$(wc -l < "$dir/cut.err")" -eq 1 ] && grep -q "cut.bin" "$dir/cut.err" && [ ! -e "$dir/hf_cut/model.safetensors" ] &&
    pass "export_hf: a truncated model file is one line naming it, nothing written" || fail "truncated file" "$(cat "$dir/cut.err")"
exit $failed
