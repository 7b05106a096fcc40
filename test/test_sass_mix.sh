#!/usr/bin/env bash
# test_sass_mix.sh: dev/sass_mix.py's counts on a sample of real nvdisasm output (test/data/
# sass_sm90_sample.txt: four kernels of train_gpt2.cu, FP16, sm_90, disassembled by CUDA 11.8's
# nvdisasm; sass_sm90a_sample.txt: the wgmma flash forward at head size 32, sm_90a, the same way). No
# nvdisasm is needed: the samples stand in for it. Checked two ways:
#   - gelu_backward_kernel against counts read off its listing by hand (60 instructions to EXIT and
#     the BRA after it; two LDG.E.U16, one STG.E.U16, MUFU.EX2 and MUFU.RCP);
#   - every kernel and column against an independent count: awk over each kernel's lines, matching
#     the mnemonic's text (not the parser's tokenizer).
# And the errors: a file without kernels, a missing file.
set -u
. "$(dirname "$0")/lib.sh"
sample=test/data/sass_sm90_sample.txt

python3 dev/sass_mix.py "$sample" --json "$dir/mix.json" > "$dir/mix.md" || { echo "FAIL sass_mix: exit $?"; exit 1; }
get() {  # get KERNEL COLUMN
    python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]][sys.argv[3]])' "$dir/mix.json" "$1" "$2"
}

# 1. By hand.
want="instrs=61 HMMA=0 LDSM=0 LDS=0 STS=0 LDG=2 LDG.128=0 STG=1 MUFU=2 BAR=0 SHFL=0 LDL/STL=0"
got=""
for kv in $want; do got="$got ${kv%%=*}=$(get gelu_backward_kernel "${kv%%=*}")"; done
[ "${got# }" = "$want" ] && pass "sass_mix: gelu_backward_kernel as read by hand ($want)" ||
    fail "sass_mix_gelu_backward" "got${got}, want $want"

# 2. Independently: per kernel (a section starts at ".text.NAME:"), count the lines whose mnemonic
# (the text after the "/*addr*/" and an optional "@P" predicate) matches each column's pattern.
count() {  # count MANGLED AWK_REGEX
    awk -v k=".text.$1:" -v re="$2" '
        /^\.text\./ { on = ($0 == k); next }
        on && /^ +\/\*[0-9a-f]+\*\// {
            line = $0; sub(/^ +\/\*[0-9a-f]+\*\/ +/, "", line); sub(/^@!?U?P[T0-9]+ +/, "", line)
            split(line, w, /[ ;]/); if (w[1] ~ re) n++ }
        END { print n + 0 }' "$sample"
}
declare -A re=(
    [instrs]='^[A-Z]' [HMMA]='^HMMA(\.|$)' [HGMMA]='^HGMMA(\.|$)' [LDSM]='^LDSM(\.|$)' [LDS]='^LDS(\.|$)' [LDS.128]='^LDS\..*128'
    [STS]='^STS(\.|$)' [STS.128]='^STS\..*128' [LDG]='^LDG(\.|$)' [LDG.128]='^LDG\..*128' [STG]='^STG(\.|$)'
    [STG.128]='^STG\..*128' [LDGSTS]='^LDGSTS' [BAR]='^BAR(\.|$)' [MUFU]='^MUFU' [SHFL]='^SHFL' [LDL/STL]='^(LDL|STL)(\.|$)'
)
mismatch=""
checked=0
for mangled in $(grep -o '^\.text\.[^:]*' "$sample" | sed 's/^\.text\.//'); do
    short=$(echo "$mangled" | c++filt | sed 's/^void //; s/(.*//')
    for col in "${!re[@]}"; do
        want=$(count "$mangled" "${re[$col]}")
        [ "$col" = instrs ] && want=$((want - $(count "$mangled" '^NOP$')))
        got=$(get "$short" "$col")
        checked=$((checked + 1))
        [ "$got" = "$want" ] || mismatch="$mismatch $short:$col=$got(want $want)"
    done
done
[ -z "$mismatch" ] && [ $checked -ge 60 ] && pass "sass_mix: $checked counts (4 kernels x ${#re[@]} columns) equal an independent count" ||
    fail "sass_mix_independent" "${mismatch:-only $checked counts checked}"
grep -q '^| `attention_backward_dq_kernel<16>` | 747 | 24 |' "$dir/mix.md" &&
    pass "sass_mix: the markdown table (attention_backward_dq_kernel<16>: 747 instructions, 24 HMMA)" ||
    fail "sass_mix_table" "$(grep attention "$dir/mix.md")"

# The hot loop: attention_backward_dq_kernel<16>'s loop over key tiles runs from .L_x_1030 (0x0b20)
# to the branch back to it (0x2a10); its instructions and HMMA counted in that range by awk.
range_count() {  # range_count AWK_REGEX: the kernel's instructions in [0x0b20, 0x2a10] matching it
    awk -v re="$1" 'function hex(s,  v, i) { v = 0; for (i = 1; i <= length(s); i++) v = v * 16 + index("0123456789abcdef", substr(s, i, 1)) - 1; return v }
        /^\.text\./ { on = ($0 ~ /attention_backward_dq_kernelILi16/); next }
        on && /^ +\/\*[0-9a-f]+\*\// {
            a = $0; sub(/^ +\/\*/, "", a); sub(/\*\/.*/, "", a); a = hex(a)
            line = $0; sub(/^ +\/\*[0-9a-f]+\*\/ +/, "", line); sub(/^@!?U?P[T0-9]+ +/, "", line)
            split(line, w, /[ ;]/); if (a >= 2848 && a <= 10768 && w[1] ~ re && w[1] != "NOP") n++ }
        END { print n + 0 }' "$sample"
}
loop=$(python3 -c 'import json, sys; l = json.load(open(sys.argv[1]))["attention_backward_dq_kernel<16>"]["hot_loop"]
print(l["start"], l["end"], l["instrs"], l["HMMA"])' "$dir/mix.json")
want="2848 10768 $(range_count '^[A-Z]') $(range_count '^HMMA(\.|$)')"
[ "$loop" = "$want" ] && pass "sass_mix: attention_backward_dq_kernel<16>'s hot loop (0x0b20-0x2a10: $loop)" ||
    fail "sass_mix_hot_loop" "got '$loop', want '$want'"

# wgmma's SASS (sm_90a): HGMMA counted in its own column and in the hot loop, which is the range with
# the most tensor instructions. attention_forward_flash_wgmma_kernel<__half, 32>'s loop over key tiles
# runs from .L_x_1275 (0x0e70) to the branch back to it (0x20d0): 6 HGMMA (2 for S = Q K^T, 4 for
# O += P V) and 32 + 2 MUFU (a lane's 32 exponentials of a 16 x 64 tile and the rescales).
sample90a=test/data/sass_sm90a_sample.txt
python3 dev/sass_mix.py "$sample90a" --json "$dir/mix90a.json" > "$dir/mix90a.md" || fail "sass_mix_sm90a" "exit $?"
hgmma_count() {  # hgmma_count AWK_REGEX LO HI: the sample's instructions in [LO, HI] matching it
    awk -v re="$1" -v lo="$2" -v hi="$3" 'function hex(s,  v, i) { v = 0; for (i = 1; i <= length(s); i++) v = v * 16 + index("0123456789abcdef", substr(s, i, 1)) - 1; return v }
        /^ +\/\*[0-9a-f]+\*\// {
            a = $0; sub(/^ +\/\*/, "", a); sub(/\*\/.*/, "", a); a = hex(a)
            line = $0; sub(/^ +\/\*[0-9a-f]+\*\/ +/, "", line); sub(/^@!?U?P[T0-9]+ +/, "", line)
            split(line, w, /[ ;]/); if (a >= lo && a <= hi && w[1] ~ re && w[1] != "NOP") n++ }
        END { print n + 0 }' "$sample90a"
}
got=$(python3 -c 'import json, sys; k = json.load(open(sys.argv[1]))["attention_forward_flash_wgmma_kernel<__half, 32>"]; l = k["hot_loop"]
print(k["instrs"], k["HMMA"], k["HGMMA"], l["start"], l["end"], l["instrs"], l["HMMA"], l["HGMMA"], l["MUFU"])' "$dir/mix90a.json")
want="$(hgmma_count '^[A-Z]' 0 1000000) 0 $(hgmma_count '^HGMMA(\.|$)' 0 1000000) 3696 8400 $(hgmma_count '^[A-Z]' 3696 8400) 0 $(hgmma_count '^HGMMA(\.|$)' 3696 8400) $(hgmma_count '^MUFU' 3696 8400)"
[ "$got" = "$want" ] && [ "$(echo "$got" | cut -d' ' -f8,9)" = "6 34" ] &&
    pass "sass_mix: wgmma's HGMMA (sm_90a): the kernel's and its hot loop's (0x0e70-0x20d0) instructions, HMMA, HGMMA, MUFU: $got" ||
    fail "sass_mix_hgmma" "got '$got', want '$want' (the loop's HGMMA and MUFU 6 34)"
grep -q '^| `attention_forward_flash_wgmma_kernel<__half, 32>` | [0-9]* | 0 | 12 |.* | 295, 0, 6, 34 |$' "$dir/mix90a.md" &&
    pass "sass_mix: the markdown table's HGMMA column and hot loop (instructions, HMMA, HGMMA, MUFU)" ||
    fail "sass_mix_hgmma_table" "$(grep wgmma "$dir/mix90a.md")"

# 3. Errors.
echo "not a listing" > "$dir/empty.txt"
out=$(python3 dev/sass_mix.py "$dir/empty.txt" 2>&1)
[ $? -eq 1 ] && [ "$(echo "$out" | wc -l)" -eq 1 ] && echo "$out" | grep -q "empty.txt holds no kernel" &&
    pass "sass_mix: a file without kernels: one line naming it, exit 1" || fail "sass_mix_no_kernels" "$out"
out=$(python3 dev/sass_mix.py "$dir/missing.txt" 2>&1)
[ $? -eq 1 ] && echo "$out" | grep -q "cannot read .*missing.txt" &&
    pass "sass_mix: a missing file: one line naming it, exit 1" || fail "sass_mix_missing" "$out"
exit $failed
