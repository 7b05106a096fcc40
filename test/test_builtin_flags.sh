#!/usr/bin/env bash
# test_builtin_flags.sh: the built-in run with the flags a newcomer tries next (`./train_gpt2 -x 3`,
# a bigger -b, another -v, a -e descriptor, samples every step): each trains, because the built-in
# run's preset (-o out -t 64 -l 2e-3 ...) fills every flag not given, and one start-up line names
# those (and the start-up lines name the data and the engine, the step line shows elapsed time and
# an estimate of what is left); llm.c's defaults would ask for B*T+1 = 4097 tokens a batch, more
# than the built-in corpus's val split holds once BPE-encoded (3693) and, at -b 16, byte-level too
# (14244). In a scratch working dir: the byte-level corpus, the preset's out/ there. Also: llm.c's
# command lines (-i data, a model file) keep llm.c's defaults; --plan too; a run on the built-in
# corpus checkpointed with llm.c's values (as one was before the preset filled them) resumes with
# its own command line, the recorded values adopted (-t among them), bit for bit. (The emulated GPU
# trainer, README's `make emu && ./train_gpt2_emu -x 3`, with the same preset: test_run_dirs.sh.)
set -u
# d2 at T = 64: one OpenMP thread (spinning threads on a shared machine cost far more than the step);
# -m 2 (two val batches, not llm.c's 20) on every row but the first, README's `./train_gpt2 -x 3` as
# typed: -m is not among the preset's flags, and it halves a row's time (4.9 s to 2.5 s of wall time
# for -x 3 on one thread).
export OMP_NUM_THREADS=1
. "$(dirname "$0")/lib.sh"
require ./train_gpt2
root=$PWD
mkdir -p "$dir/cwd"
NOTOK=$dir/no_tokenizer.bin  # a -K that does not exist: the byte-level corpus, whatever data/vocab holds
preset="-o out -t 64 -l 2e-3 -u 50 -q 0.1 -v 100 -s 100 -sf 0 -r 0"

# builtin NAME STEPS TOKENS TRAINER ARGS...: the trainer in the scratch dir exits 0, says which values
# came from the preset (those of $preset not in ARGS), trains STEPS steps of TOKENS tokens and logs
# them into the preset's out/ (or the -o given).
builtin() {
    local name=$1 steps=$2 tokens=$3 trainer=$4
    shift 4
    local args="$*" want="" flag value out=out
    [[ " $args " =~ " -o "([^ ]+)" " ]] && out=${BASH_REMATCH[1]}
    set -- $preset
    while [ $# -gt 0 ]; do
        flag=$1 value=$2
        shift 2
        case " $args " in *" $flag "*) ;; *) want="$want${want:+ }$flag $value" ;; esac
    done
    rm -rf "$dir/cwd/$out"
    (cd "$dir/cwd" && "$trainer" $args -K "$NOTOK" > "$dir/run.out" 2>&1)
    local rc=$?
    if [ $rc -eq 0 ] && grep -q "^flags: the built-in run's preset for the flags not given: $want (" "$dir/run.out" &&
        grep -q "^steps: $steps | total batch $tokens tokens " "$dir/run.out" && grep -qE "^step +$steps/$steps " "$dir/run.out" &&
        [ "$(grep -c '"train_loss"' "$dir/cwd/$out/log.jsonl" 2> /dev/null)" = "$steps" ]; then
        pass "$name: exit 0, step $steps/$steps of $tokens tokens logged in $out/, the preset filling $want"
    else
        fail "$name" "exit $rc: $(grep -aE '^(flags|steps|error)' "$dir/run.out" | head -n 3 | tr '\n' ' ')"
    fi
}
builtin "./train_gpt2 -x 3" 3 256 "$root/train_gpt2" -x 3
# What a newcomer reads at start-up and on every step line (the run just made).
grep -q '^data: the built-in corpus (generated stories, [0-9]* documents; byte-level' "$dir/run.out" &&
    grep -qE '^engine: (no usable GPU|GPU engine|C reference)' "$dir/run.out" &&
    pass "the built-in run says which data (the byte-level corpus, no tokenizer file) and which engine it uses" ||
    fail "data and engine lines" "$(grep -aE '^(data|engine)' "$dir/run.out" | tr '\n' ' ')"
grep -qE "^step +3/3 .*[0-9]+ tok/s \| [0-9]+:[0-9]{2} elapsed, eta [0-9]+:[0-9]{2}" "$dir/run.out" &&
    pass "the step line shows elapsed time and an estimate of what is left ($(grep -m1 -E '^step +3/' "$dir/run.out" | sed 's/.*tok\/s | //'))" ||
    fail "elapsed and eta" "$(grep -m1 -E '^step +3/' "$dir/run.out")"
builtin "./train_gpt2 -x 2 -b 8 -m 2" 2 512 "$root/train_gpt2" -x 2 -b 8 -m 2
builtin "./train_gpt2 -x 1 -b 16 -m 2 (llm.c's T: 16385 tokens, more than even the byte-level val split)" 1 1024 "$root/train_gpt2" -x 1 -b 16 -m 2
builtin "./train_gpt2 -x 2 -v 1 -m 2" 2 256 "$root/train_gpt2" -x 2 -v 1 -m 2
builtin "./train_gpt2 -x 1 -e d4 -m 2 (a descriptor is a fresh model: the preset stays)" 1 256 "$root/train_gpt2" -x 1 -e d4 -m 2
builtin "./train_gpt2 -x 2 -s 1 -g 32 -m 2" 2 256 "$root/train_gpt2" -x 2 -s 1 -g 32 -m 2
# A barely trained byte-level model samples near-random bytes: they print as valid UTF-8 (U+FFFD for
# bytes that make no character), with control characters as their pictures (no ESC, NUL or CR reaches
# the terminal).
r=$("$PY" - "$dir/run.out" <<'PYEOF'
import re, sys
raw = open(sys.argv[1], "rb").read()
samples = re.findall(rb"generating:\n---\n(.*?)\n---\n", raw, re.S)
try:
    text = [s.decode("utf-8") for s in samples]
except UnicodeDecodeError as e:
    print("not UTF-8: %s" % e); sys.exit(1)
bad = sorted({hex(ord(c)) for t in text for c in t if (ord(c) < 0x20 and c not in "\n\t") or ord(c) == 0x7F})
if len(samples) != 2 or bad: print("%d samples; control characters %s" % (len(samples), bad)); sys.exit(1)
print("%d samples, %d characters, %d of them U+FFFD, %d control pictures" % (len(text), sum(map(len, text)),
      sum(t.count("\ufffd") for t in text), sum(1 for t in text for c in t if 0x2400 <= ord(c) <= 0x2421)))
PYEOF
) && pass "byte-level samples are valid UTF-8 without control characters: $r" || fail "byte-level samples as text" "$r"
builtin "./train_gpt2 -x 1 -t 32 -o logs -v 0 (given values are kept)" 1 128 "$root/train_gpt2" -x 1 -t 32 -o logs -v 0
# The emulated GPU trainer with the same preset (README's `./train_gpt2_emu -x 3`): test_run_dirs.sh.

# llm.c's command lines keep llm.c's defaults: llm.c's data (-i, -j) with a descriptor, and --plan.
tiny_data 1 5000
./train_gpt2 -e d2 -i "$dir/train.bin" -j "$dir/val.bin" -x 1 -b 1 -s 0 > "$dir/llmc.out" 2>&1 &&
    ! grep -q "^flags:" "$dir/llmc.out" && grep -q "^steps: 1 | total batch 1024 tokens .* lr 0.0003 cosine warmup 0 final 1 " "$dir/llmc.out" &&
    grep -q "^output: none (no -o, llm.c's default)" "$dir/llmc.out" && grep -q "^train: .*shuffled, -sf 1)" "$dir/llmc.out" &&
    pass "-e d2 -i/-j data: llm.c's defaults (T 1024, lr 3e-4, no warm-up or decay, no output dir, shuffled), no preset" ||
    fail "llm.c's defaults with -i" "$(grep -aE '^(flags|steps|output|train|error)' "$dir/llmc.out" | tr '\n' ' ')"
./train_gpt2 --plan -e d2 > "$dir/plan.out" 2>&1 && grep -q "^memory plan: .* B=4 T=1024, recompute 1 (GELU)" "$dir/plan.out" &&
    pass "--plan -e d2: llm.c's defaults (T 1024, recompute 1), no preset" || fail "--plan's defaults" "$(head -n 1 "$dir/plan.out")"

# Resume: a checkpoint of the built-in corpus made with llm.c's values (what a run with arguments had
# before the preset filled them) resumes from the same command line: -t, -l, -u, -q, -sf adopted from
# its record, one line each, and the resumed steps are the unbroken run's, bit for bit.
losses() { grep '"train_loss"' "$1" | sed 's/.*"train_loss": \([^,]*\),.*/\1/' | tr '\n' ' '; }
ck=(-x 4 -n 2 -v 0 -s 0 -K "$NOTOK")
(cd "$dir/cwd" && "$root/train_gpt2" "${ck[@]}" -t 32 -l 3e-4 -u 0 -q 1.0 -sf 1 -o ck > "$dir/ck1.out" 2>&1) ||
    fail "resume: the run with llm.c's values" "$(tail -n 2 "$dir/ck1.out")"
straight=$(losses "$dir/cwd/ck/log.jsonl")
rm -f "$dir/cwd/ck/"*_00000004* "$dir/cwd/ck/run_complete"
(cd "$dir/cwd" && "$root/train_gpt2" "${ck[@]}" -o ck -y 1 > "$dir/ck2.out" 2>&1)
rc=$?
adopted=$(grep -c "^resume: -[tluqsf]* [0-9.e-]*, as the checkpoint's run had it (the built-in run's preset is " "$dir/ck2.out")
[ $rc -eq 0 ] && [ "$adopted" = 5 ] && grep -q "^resume: -t 32, as the checkpoint's run had it (the built-in run's preset is 64; give the flag to check it)$" "$dir/ck2.out" &&
    grep -q "^steps: 4 | total batch 128 tokens" "$dir/ck2.out" && [ -n "$straight" ] && [ "$(losses "$dir/cwd/ck/log.jsonl")" = "$straight" ] &&
    pass "a built-in run checkpointed with llm.c's values resumes from its command line: 5 values adopted (-t 32 among them), steps 3-4 bit for bit" ||
    fail "resume with the preset" "exit $rc, $adopted adopted: $(grep -aE '^(resume|steps|error)' "$dir/ck2.out" | tr '\n' ' ')"
rm -f "$dir/cwd/ck/"*_00000004* "$dir/cwd/ck/run_complete"
(cd "$dir/cwd" && "$root/train_gpt2" "${ck[@]}" -t 32 -l 2e-3 -o ck -y 1 > "$dir/ck3.out" 2> "$dir/ck3.err")
rc=$?
[ $rc -eq 1 ] && [ "$(wc -l < "$dir/ck3.err")" = 1 ] && grep -q "flag -l (--lr) is 0.002 in this run but was 0.0003 in the run that wrote the checkpoint" "$dir/ck3.err" &&
    pass "a given value that differs from the record is still refused in one line (-l)" || fail "given -l on resume" "exit $rc: $(cat "$dir/ck3.err")"
exit $failed
