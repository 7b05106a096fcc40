#!/usr/bin/env python3
"""bad_inputs.py: a generated corpus of bad files for every reader, each run through the program
that reads it (test_bad_inputs.sh runs this).

Readers: the model file (train_gpt2 -e), the training-state file and the model file of a checkpoint
(train_gpt2 -y 1), the data shard (train_gpt2 -i), the tokenizer file (tokenize --tokenizer and
train_gpt2 -K), text input (text_to_shards), and the flags. Cases: each header field set to values
that are wrong (0, -1, 1, off by one, huge, wrapping), with the checksum broken and, for checkpoint
files, re-sealed so the checks behind the checksum are reached; truncation at many offsets;
trailing bytes; flipped bits; wrapped sizes; bad token ids; a FIFO, a directory, a character
device, an empty file, a missing file.

Each case must end within a timeout with an exit status 1..127. A case marked "error" must exit
non-zero with exactly one line "error: ..." on stderr naming the file (or the flag); a case marked
"any" (a mutation that may still be a valid file) may also succeed. A crash (a signal, a
sanitizer report) or a hang fails. Prints one PASS/FAIL line per reader and per failing case.
"""
import os
import re
import shutil
import stat
import struct
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ckfile import reseal  # noqa: E402

ROOT = os.path.abspath(sys.argv[1])
WORK = os.path.abspath(sys.argv[2])
TIMEOUT = int(os.environ.get("BAD_INPUTS_TIMEOUT", "60"))  # seconds; every case takes well under one
TRAIN = os.path.join(ROOT, "train_gpt2")
GEN = os.path.join(ROOT, "build/test/gen_data")
TOKENIZE = os.path.join(ROOT, "build/tokenize")
TTS = os.path.join(ROOT, "build/text_to_shards")
SEEDS = os.path.join(ROOT, "test/reliability/seeds")

results = {}  # reader -> [tried, passed]
failures = []


def run_case(reader, name, cmd, expect, needle, stdin=b"hi", cwd=None):
    tried = results.setdefault(reader, [0, 0])
    tried[0] += 1
    try:
        p = subprocess.run(cmd, input=stdin, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=TIMEOUT, cwd=cwd)
    except subprocess.TimeoutExpired:
        failures.append("%s %s: no answer in %d s (a hang)" % (reader, name, TIMEOUT))
        return
    err = p.stderr.decode("utf-8", "replace")
    lines = [l for l in err.splitlines() if l.strip()]
    ok = 0 <= p.returncode <= 127
    why = "exit %d" % p.returncode
    if ok and p.returncode == 0 and expect == "error":
        ok, why = False, "exit 0: the bad input was accepted"
    if ok and p.returncode != 0:
        if len(lines) != 1 or not lines[0].startswith("error: "):
            ok, why = False, "expected one 'error:' line, got %d lines: %s" % (len(lines), err[:300])
        elif expect == "error" and needle not in lines[0]:
            ok, why = False, "the error does not name %s: %s" % (needle, lines[0][:300])
    if ok:
        tried[1] += 1
    else:
        failures.append("%s %s: %s" % (reader, name, why))


def write(path, data):
    with open(path, "wb") as f:
        f.write(data)
    return path


def i32(data, word, value):
    """data with int32 header word set to value (wrapped to 32 bits)."""
    return data[:4 * word] + struct.pack("<I", value & 0xFFFFFFFF) + data[4 * word + 4:]


def differs(data, word, value):
    """Whether setting the word changes anything (a mutation to the same value is no case)."""
    return struct.unpack_from("<I", data, 4 * word)[0] != value & 0xFFFFFFFF


FIELD_VALUES = [0, -1, 1, 2, 3, 7, 255, 1024, 65535, 65536, 65537, 1 << 20, (1 << 30), 2**31 - 1, -2**31, -1024]


def truncations(size):
    offs = {0, 1, 3, 4, 8, 31, 32, 100, 511, 512, 1020, 1023, 1024, 1025, 1028, 1279, 1280, 1281, 1536,
            size // 3, size // 2, size - 1024, size - 8, size - 4, size - 2, size - 1}
    return sorted(o for o in offs if 0 <= o < size)


def special_files(d, base):
    """Paths that are not good regular files: (name, path)."""
    fifo = os.path.join(d, base + "_fifo")
    if not os.path.exists(fifo):
        os.mkfifo(fifo)
    dirp = os.path.join(d, base + "_dir")
    os.makedirs(dirp, exist_ok=True)
    empty = write(os.path.join(d, base + "_empty"), b"")
    link = os.path.join(d, base + "_link_to_dir")
    if not os.path.islink(link):
        os.symlink(dirp, link)
    return [("FIFO", fifo), ("directory", dirp), ("character device", "/dev/null"), ("empty file", empty),
            ("symlink to a directory", link), ("missing file", os.path.join(d, base + "_missing"))]


def main():
    os.makedirs(WORK, exist_ok=True)
    d = WORK
    # Good inputs: the seed model (L=1, C=8, V=16), a shard for it, a checkpoint pair of a run.
    model = os.path.join(SEEDS, "model/tiny.bin")
    shard = os.path.join(d, "train.bin")
    subprocess.run([GEN, "shard", shard, "4000", "16", "3"], check=True)
    flags = ["-b", "1", "-t", "4", "-x", "2", "-v", "0", "-s", "0"]
    base_run = os.path.join(d, "base_run")
    shutil.rmtree(base_run, ignore_errors=True)
    subprocess.run([TRAIN, "-e", model, "-i", shard] + flags + ["-n", "2", "-o", base_run], check=True,
                   stdout=subprocess.DEVNULL)
    good_model = open(os.path.join(base_run, "model_00000002.bin"), "rb").read()
    good_state = open(os.path.join(base_run, "state_00000002.bin"), "rb").read()
    seed_model = open(model, "rb").read()
    good_shard = open(shard, "rb").read()
    good_tok = open(os.path.join(SEEDS, "tokenizer/tiny.bin"), "rb").read()

    # ---- the model file, as -e ----
    md = os.path.join(d, "model")
    os.makedirs(md, exist_ok=True)
    n = [0]

    def model_case(name, data, expect="error"):
        n[0] += 1
        p = write(os.path.join(md, "m%04d.bin" % n[0]), data)
        run_case("model", name, [TRAIN, "-e", p, "-i", shard] + flags + ["-o", ""], expect, p)

    for w in range(0, 16):
        for v in FIELD_VALUES:
            if differs(seed_model, w, v):
                model_case("header word %d = %d" % (w, v), i32(seed_model, w, v), "any" if w == 12 else "error")
    for w in (2, 3, 4, 5, 6, 7):  # sealed: the checks behind the checksum
        for v in (0, -1, 1, 3, 1 << 20, 2**31 - 1):
            if differs(seed_model, w, v):
                model_case("header word %d = %d, checksum re-sealed" % (w, v), reseal(i32(seed_model, w, v)), "any")
    wrap = struct.pack("<256i", 20240326, 3, 2**31 - 53, 1, 4, 1, 2**30, 2**31 - 1, *([0] * 248))
    model_case("parameter count that wraps to 0 bytes", wrap)
    model_case("parameter count that wraps, with a payload", wrap + seed_model[1024:])
    for off in truncations(len(seed_model)):
        model_case("truncated at %d" % off, seed_model[:off])
    for extra in (1, 4, 1024):
        model_case("%d trailing bytes" % extra, seed_model + b"\0" * extra)
    for off in (1024, 1025, 2000, len(seed_model) - 1):
        b = bytearray(seed_model)
        b[off] ^= 0x10
        model_case("bit flipped at %d" % off, bytes(b))
    for name, p in special_files(md, "m"):
        run_case("model", name, [TRAIN, "-e", p, "-i", shard] + flags + ["-o", ""], "error", p)
    # NaN and Inf anywhere, wte's padding rows included (V=16, Vp=128: rows 16..127), with
    # the checksum re-sealed, and in a file without one (llm.c's): refused, naming the file.
    nparams = (len(seed_model) - 1024) // 4
    C = struct.unpack_from("<i", seed_model, 24)[0]
    spots = {"the first weight": 0, "a padding row of wte": 20 * C + 3, "the last padding row": 128 * C - 1,
             "wpe": 128 * C, "the last weight": nparams - 1, "the middle": nparams // 2}
    for where, idx in spots.items():
        for v in (float("nan"), float("inf"), float("-inf")):
            data = seed_model[:1024 + 4 * idx] + struct.pack("<f", v) + seed_model[1024 + 4 * idx + 4:]
            model_case("%r in %s (entry %d), checksum re-sealed" % (v, where, idx), reseal(data))
            if v != v:
                model_case("nan in %s (entry %d), no checksum" % (where, idx), i32(data, 12, 0))

    # ---- a checkpoint: the state file and the model file beside it, as -y 1 reads them ----
    sd = os.path.join(d, "state")
    os.makedirs(sd, exist_ok=True)

    def ckpt_case(reader, name, state=good_state, model_data=good_model, expect="error", special=None):
        n[0] += 1
        out = os.path.join(sd, "r%04d" % n[0])
        os.makedirs(out)
        sp, mp = os.path.join(out, "state_00000002.bin"), os.path.join(out, "model_00000002.bin")
        if special and reader == "state":
            os.symlink(special, sp) if special != "/dev/null" else os.symlink("/dev/null", sp)
        else:
            write(sp, state)
        if special and reader == "checkpoint model":
            os.symlink(special, mp)
        else:
            write(mp, model_data)
        needle = sp if reader == "state" else mp
        run_case(reader, name, [TRAIN, "-e", model, "-i", shard] + flags + ["-n", "2", "-y", "1", "-o", out], expect, needle)

    for w in list(range(0, 16)):
        for v in FIELD_VALUES:
            if differs(good_state, w, v):
                ckpt_case("state", "header word %d = %d" % (w, v), state=i32(good_state, w, v))
    for w in (2, 3, 4, 5, 6, 7, 8, 9, 10, 11):
        for v in (0, -1, 1, 3, 8, 1 << 20, 2**31 - 1):
            if differs(good_state, w, v):
                ckpt_case("state", "header word %d = %d, checksum re-sealed" % (w, v), state=reseal(i32(good_state, w, v)))
    step = struct.unpack_from("<q", good_state, 1024)[0]
    for word in range(0, 16):
        for v in (-1, -(2**63), 2**62, 1, 3, 10**9 + 1):
            off = 1024 + 8 * word
            if struct.unpack_from("<q", good_state, off)[0] == v:
                continue
            data = good_state[:off] + struct.pack("<q", v) + good_state[off + 8:]
            # Values a writer could have written are no error: the RNG and unused words take any value,
            # counters any value in range, doubles (words 9, 12-15) anything finite of the right sign.
            fine = (word in (1, 6, 7) or (word in (8, 11) and 0 <= v <= step) or (word == 10 and v >= 0) or
                    (word in (9, 12, 13, 14, 15) and v != -1))
            ckpt_case("state", "word %d = %d, checksum re-sealed" % (word, v), state=reseal(data),
                      expect="any" if fine else "error")
    for w in (15, 16):  # the run id: another run's state file beside this model file
        for v in (0, 1, -1):
            if differs(good_state, w, v):
                ckpt_case("state", "header word %d = %d (run id), checksum re-sealed" % (w, v), state=reseal(i32(good_state, w, v)))
    for word, v in ((9, float("nan")), (9, -1.0), (9, float("inf")), (12, float("nan")), (13, -1.0), (15, float("inf")),
                    (9, 0.5), (9, 1e-30), (9, 5e-324)):
        off = 1024 + 8 * word
        data = good_state[:off] + struct.pack("<d", v) + good_state[off + 8:]
        ckpt_case("state", "word %d = %r (double), checksum re-sealed" % (word, v), state=reseal(data))
    rec_len = struct.unpack_from("<i", good_state, 44)[0]
    rec_at = 1024 + 256
    record = good_state[rec_at:rec_at + rec_len]
    # whatever the run's learning rate was (the default's value may change), 0.5 instead
    for name, new in (("the learning rate", re.sub(rb"\nlr [^\n]*\n", b"\nlr 0.5\n", record, count=1)),
                      ("the seed", record.replace(b"seed 1337", b"seed 1338")),
                      ("the data checksum", record.replace(b"checksum ", b"checksum f")[:rec_len]),
                      ("a NUL byte", record[:10] + b"\0" + record[11:])):
        new = new[:rec_len].ljust(rec_len, b" ")
        ckpt_case("state", "run record with %s changed, checksum re-sealed" % name,
                  state=reseal(good_state[:rec_at] + new + good_state[rec_at + rec_len:]))
    for v in (-1.0, float("nan"), float("inf")):  # AdamW's v: never negative, never NaN
        off = len(good_state) - 4
        ckpt_case("state", "AdamW v = %r, checksum re-sealed" % v,
                  state=reseal(good_state[:off] + struct.pack("<f", v)))
    for off in truncations(len(good_state)):
        ckpt_case("state", "truncated at %d" % off, state=good_state[:off])
    for extra in (1, 4, 1000):
        ckpt_case("state", "%d trailing bytes" % extra, state=good_state + b"\0" * extra)
    for off in (1024, 1280, 1300, 4000, len(good_state) - 1):
        b = bytearray(good_state)
        b[off] ^= 0x01
        ckpt_case("state", "bit flipped at %d" % off, state=bytes(b))
    ckpt_case("state", "zeroed optimizer state", state=good_state[:-4096] + b"\0" * 4096)
    for name, p in special_files(sd, "s"):
        if name != "missing file":  # a state file that is not there: the pair is incomplete
            ckpt_case("state", name, special=p)
    for w in range(0, 16):
        for v in (0, -1, 1, 65536, 2**31 - 1):
            if differs(good_model, w, v):
                ckpt_case("checkpoint model", "header word %d = %d" % (w, v), model_data=i32(good_model, w, v))
    for off in truncations(len(good_model)):
        ckpt_case("checkpoint model", "truncated at %d" % off, model_data=good_model[:off])
    ckpt_case("checkpoint model", "without its checksum (an llm.c file)", model_data=i32(good_model, 12, 0))
    # Words 15-17 tie the model file to its state files (run id, step); NaN or Inf in it.
    for w in (15, 16, 17):
        for v in (0, 1, -1, 3):
            if differs(good_model, w, v):
                ckpt_case("checkpoint model", "header word %d = %d, checksum re-sealed" % (w, v),
                          model_data=reseal(i32(good_model, w, v)))
    for idx in (0, 200, (len(good_model) - 1024) // 4 - 1):
        for v in (float("nan"), float("inf")):
            ckpt_case("checkpoint model", "%r at entry %d, checksum re-sealed" % (v, idx),
                      model_data=reseal(good_model[:1024 + 4 * idx] + struct.pack("<f", v) + good_model[1028 + 4 * idx:]))
    for name, p in special_files(sd, "cm"):
        if name != "missing file":
            ckpt_case("checkpoint model", name, special=p)

    # ---- the data shard, as -i ----
    hd = os.path.join(d, "shard")
    os.makedirs(hd, exist_ok=True)

    def shard_case(name, data, expect="error"):
        n[0] += 1
        p = write(os.path.join(hd, "s%04d.bin" % n[0]), data)
        run_case("shard", name, [TRAIN, "-e", model, "-i", p] + flags + ["-o", ""], expect, p)

    for w in range(0, 4):
        for v in FIELD_VALUES:
            if differs(good_shard, w, v):
                shard_case("header word %d = %d" % (w, v), i32(good_shard, w, v), "any" if w == 3 else "error")
    for off in truncations(len(good_shard)):
        shard_case("truncated at %d" % off, good_shard[:off])
    for extra in (1, 2, 1000):
        shard_case("%d trailing bytes" % extra, good_shard + b"\x01" * extra)
    ntok = (len(good_shard) - 1024) // 2
    for pos in (0, 1, 4, ntok // 2, ntok - 2, ntok - 1):
        for tok in (16, 17, 50256, 65535):
            off = 1024 + 2 * pos
            shard_case("token %d at position %d" % (tok, pos), good_shard[:off] + struct.pack("<H", tok) + good_shard[off + 2:])
    shard_case("no tokens", i32(good_shard[:1024], 2, 0))
    for name, p in special_files(hd, "h"):
        run_case("shard", name, [TRAIN, "-e", model, "-i", p] + flags + ["-o", ""], "error", p)

    # ---- the tokenizer file: tokenize --tokenizer, and train_gpt2 -K ----
    td = os.path.join(d, "tok")
    os.makedirs(td, exist_ok=True)

    def tok_case(name, data, expect="error", trainer=False):
        n[0] += 1
        p = write(os.path.join(td, "t%04d.bin" % n[0]), data)
        run_case("tokenizer", name, [TOKENIZE, "--tokenizer", p], expect, p)
        if trainer:
            run_case("tokenizer", name + " (train_gpt2 -K)", [TRAIN, "-e", model, "-i", shard, "-K", p] + flags + ["-o", ""],
                     expect, p)

    for w in range(0, 8):
        for v in FIELD_VALUES:
            if differs(good_tok, w, v):
                tok_case("header word %d = %d" % (w, v), i32(good_tok, w, v), "any" if w in (4, 6, 7) else "error", trainer=w == 2)
    vocab = struct.unpack_from("<i", good_tok, 8)[0]
    for off in truncations(len(good_tok)):
        tok_case("truncated at %d" % off, good_tok[:off], trainer=off in (0, 32, 100))
    tok_case("4 trailing bytes", good_tok + b"\0" * 4)
    for i in (0, 5, 255, 256, vocab - 1):  # token lengths
        for v in (0, 2, 255):
            b = bytearray(good_tok)
            if b[32 + i] == v:
                continue
            b[32 + i] = v
            tok_case("length of token %d = %d" % (i, v), bytes(b))
    merges_at = len(good_tok) - 12 * 3
    for k in range(3):
        for field in range(3):
            for v in (-1, 0, 255, 256, vocab - 1, vocab, 2**31 - 1):
                off = merges_at + 12 * k + 4 * field
                tok_case("merge %d field %d = %d" % (k, field, v), good_tok[:off] + struct.pack("<i", v) + good_tok[off + 4:], "any")
    b = bytearray(good_tok)
    b[32 + vocab + 3] ^= 0x20  # a byte token's byte
    tok_case("byte token 3 changed", bytes(b))
    for name, p in special_files(td, "t"):
        run_case("tokenizer", name, [TOKENIZE, "--tokenizer", p], "error", p)
        if name != "missing file":  # a missing -K file means byte-level decoding, by design
            run_case("tokenizer", name + " (train_gpt2 -K)", [TRAIN, "-e", model, "-i", shard, "-K", p] + flags + ["-o", ""],
                     "error", p)

    # ---- text input: text_to_shards ----
    xd = os.path.join(d, "text")
    os.makedirs(xd, exist_ok=True)
    out = os.path.join(xd, "out", "x")
    import random
    r = random.Random(9)
    for k in range(24):  # any bytes are text: these must be encoded (or refused cleanly), never crash
        size = r.choice([1, 2, 3, 17, 100, 1000, 4096, 65537])
        data = bytes(r.randrange(256) for _ in range(size))
        if k % 3 == 0:
            data = data.replace(b"\n", b"")
        p = write(os.path.join(xd, "r%02d.txt" % k), data)
        for split in ("file", "line", "blank", "delim"):
            run_case("text", "random bytes %d (%d bytes), --split %s" % (k, size, split),
                     [TTS, "-q", "--bytes", "--split", split, "-o", out, p], "any", p)
    p = write(os.path.join(xd, "newlines.txt"), b"\n" * 1000)
    run_case("text", "only newlines, --split line", [TTS, "-q", "--bytes", "--split", "line", "-o", out, p], "error", p)
    run_case("text", "only newlines, --split blank", [TTS, "-q", "--bytes", "--split", "blank", "-o", out, p], "error", p)
    for name, p in special_files(xd, "x"):
        run_case("text", name, [TTS, "-q", "--bytes", "-o", out, p], "error", p)

    # ---- flags: out of range, overflowing, malformed ----
    fl = [("-d", "549755813888"), ("-d", "9223372036854775807"), ("-d", "-5"), ("-d", "3"), ("-g", "2147483647"),
          ("-g", "-1"), ("-x", "2000000000"), ("-x", "-2"), ("-b", "2000000000"), ("-b", "0"), ("-b", "-1"),
          ("-t", "2147483647"), ("-t", "9"), ("-b", "99999999999"), ("-l", "nan"), ("-l", "inf"), ("-l", "1e999"),
          ("-l", "-1"), ("-u", "-1"), ("-q", "2"), ("-c", "-1"), ("-G", "-1"), ("-B1", "1"), ("-B2", "-0.5"),
          ("-E", "0"), ("-v", "-1"), ("-m", "0"), ("-s", "-3"), ("-T", "-1"), ("-k", "-1"), ("-k", "40"), ("-k", "cos"), ("--top-k", "-1"), ("-h", "2"), ("-nk", "-1"), ("-nm", "-1"), ("-pi", "tcp"), ("-pn", "0"), ("-sl", "-1"), ("-w", "0"), ("-lg", "-2"), ("-n", "-1"),
          ("-y", "2"), ("-z", "7"), ("-sf", "2"), ("-a", "-1"), ("-p", "0"), ("-S", "1e9"), ("-r", "4"), ("-ge", "3"), ("-ge", "-2"),
          ("--engine", "tpu"), ("--loss-scale", "0"), ("--loss-scale-interval", "0"), ("--skip-outliers", "-1"),
          ("-x", "99999999999999999999"), ("-b", "4x"), ("-l", ""), ("--recompute-every", "-1"),
          ("--offload", "disk"), ("--max-memory", "48XB"), ("--max-memory", "-1GiB"), ("--max-memory", "1e30TiB"),
          ("--precision", "fp8"), ("--memory-budget", "48GiB"), ("--ranks", "4")]
    for flag, value in fl:
        run_case("flags", "%s %s" % (flag, value), [TRAIN, "-e", model, "-i", shard] + flags + ["-o", "", flag, value],
                 "error", flag)
    run_case("flags", "OMP_NUM_THREADS=100000", ["env", "OMP_NUM_THREADS=100000", TRAIN, "-e", model, "-i", shard] + flags + ["-o", ""],
             "error", "OMP_NUM_THREADS")
    run_case("flags", "-y 1 with --overwrite", [TRAIN, "-e", model, "-i", shard] + flags + ["-o", base_run, "-y", "1", "--overwrite"],
             "error", "--overwrite")
    # Loss scales below 1, budgets of nothing, the planner held to the trainer's limits, and
    # flags the C engine cannot honour (refused, naming the flag and the engine).
    for flag, value in (("--loss-scale", "0.5"), ("--loss-scale", "1e-30"), ("--max-memory", "0"), ("--max-memory", "0.5"),
                        ("--max-memory", "-0"), ("--max-memory", "1e-9"), ("--max-memory", "0GiB")):
        run_case("flags", "%s %s" % (flag, value), [TRAIN, "-e", model, "-i", shard] + flags + ["-o", "", flag, value],
                 "error", flag)
    for value in ("0", "0.5", "1e-9", "-0", "0KiB", "-1"):
        run_case("flags", "--plan --memory-budget %s" % value, [TRAIN, "--plan", "-e", "d2", "--memory-budget", value],
                 "error", "--memory-budget")
    for extra in (["-t", "1024", "-b", "32768"], ["-t", "1024", "-b", "2147483647"], ["-t", "64", "-b", "4", "-d", "100"],
                  ["-t", "1024", "-b", "1", "-d", str(1024 << 21)]):
        run_case("flags", "--plan %s" % " ".join(extra), [TRAIN, "--plan", "-e", "d48", "--memory-budget", "48GiB"] + extra,
                 "error", "flag")
    for flag, value in (("-r", "1"), ("-r", "3"), ("--recompute-every", "2"), ("-ge", "1"), ("--offload", "optimizer"),
                        ("--offload", "grads"), ("--max-memory", "1GiB"), ("--precision", "bf16"), ("--precision", "fp16"),
                        ("--loss-scale", "8"), ("--loss-scale-interval", "100")):
        run_case("flags", "%s %s on the C engine" % (flag, value),
                 [TRAIN, "-e", model, "-i", shard, "--engine", "cpu"] + flags + ["-o", "", flag, value], "error", flag)

    total = [0, 0]
    for reader, (tried, passed) in results.items():
        total[0] += tried
        total[1] += passed
        mark = "PASS" if tried == passed else "FAIL"
        print("%s bad inputs, %s: %d tried, %d survived (one error line naming the file or flag, or a clean run)" %
              (mark, reader, tried, passed))
    for f in failures[:40]:
        print("FAIL bad input %s" % f)
    if len(failures) > 40:
        print("FAIL bad inputs: %d more failing cases" % (len(failures) - 40))
    if os.environ.get("BAD_INPUTS_ALL_FAILURES"):
        with open(os.environ["BAD_INPUTS_ALL_FAILURES"], "w") as f:
            f.write("\n".join(failures) + "\n")
    print("   bad inputs: %d tried, %d survived" % (total[0], total[1]))
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
