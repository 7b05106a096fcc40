#!/usr/bin/env python3
"""sass_mix.py: the instruction mix of each kernel in nvdisasm's output (static counts: the
instructions in the code, each counted once, not how often they run), and each kernel's hot loop.

    python3 dev/sass_mix.py SASS.txt [--json OUT.json] [--kernels REGEX]

SASS.txt is `nvdisasm -c` of a cubin (dev/sass_mix.sh makes it). Per kernel it counts the
classes that decide a kernel's speed: tensor-core MMAs (HMMA: mma.sync and WMMA; HGMMA: sm_90a's
warpgroup wgmma, one a warp per instruction), ldmatrix (LDSM), shared-memory loads and stores by
width (LDS/STS), global loads and stores by width (LDG/STG; 128-bit is what a bandwidth-bound
kernel wants), cp.async (LDGSTS), generic loads and stores (LD/ST: an address the compiler could
not place in a space), barriers (BAR), special-function ops (MUFU: ex2, rcp, ...),
shuffles (SHFL), global atomics and reductions (ATOMG/RED), local memory (LDL/STL: spills or
indexed arrays) and everything else. NOPs (padding) are not counted.

The hot loop: of the address ranges a backward branch closes (from its target label to the branch),
the one with the most tensor instructions (HMMA + HGMMA), with its instructions, HMMA, HGMMA and MUFU.
The kernel report (dev/kernel_report.py) charges a tensor-core kernel the code outside the loop once
a warp (the kernel's counts less the loop's) and the loop's instructions per tensor instruction for
the rest of the tensor instructions the CPU runtime counted it run (mma_flops / 4096 HMMA, its
`wgmma` count of HGMMA, both a warp): the loop's trip count without a GPU. A range may hold code
only some trips run (a branch inside the loop), so the ratio is an upper bound there; the flash
kernels peel their diagonal tiles out of the loop, so theirs hold none.
A markdown table goes to stdout; --json writes the counts (and "hot_loop") for other tools.
"""
import json
import re
import subprocess
import sys

# "        /*0110*/                   LDG.E.U16 R6, [R6.64] ;" (an optional predicate "@P0 ", "@!UP1 ")
INSTR = re.compile(r"^\s+/\*([0-9a-f]{4,})\*/\s+(@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_]*)((?:\.[A-Z0-9_]+)*)(.*)")
FUNC = re.compile(r"^\.text\.(\S+):\s*$")
LABEL = re.compile(r"^(\.L_x_\d+):")
TARGET = re.compile(r"`\((\.L_x_\d+)\)")

# Width of a memory op from its suffixes: .U8/.S8 1 byte, .U16/.S16 2, .64 8, .128 16, none 4.
WIDTH_SUFFIX = {"U8": 1, "S8": 1, "U16": 2, "S16": 2, "64": 8, "128": 16}

COLUMNS = ["instrs", "HMMA", "HGMMA", "LDSM", "LDS", "LDS.128", "STS", "STS.128", "LDG", "LDG.128", "STG", "STG.128",
           "LDGSTS", "LD/ST", "BAR", "MUFU", "SHFL", "ATOM/RED", "LDL/STL"]


def width(suffixes):
    w = 4
    for s in suffixes:
        if s in WIDTH_SUFFIX:
            w = WIDTH_SUFFIX[s]
    return w


def classify(op, suffixes, counts):
    """Adds one instruction to counts (a dict of COLUMNS)."""
    counts["instrs"] += 1
    if op in ("HMMA", "HGMMA"):
        counts[op] += 1
    elif op == "LDSM":
        counts["LDSM"] += 1
    elif op in ("LDS", "STS", "LDG", "STG"):
        counts[op] += 1
        if width(suffixes) == 16:
            counts[op + ".128"] += 1
    elif op == "LDGSTS":
        counts["LDGSTS"] += 1
    elif op in ("LD", "ST"):
        counts["LD/ST"] += 1
    elif op == "BAR":
        counts["BAR"] += 1
    elif op == "MUFU":
        counts["MUFU"] += 1
    elif op == "SHFL":
        counts["SHFL"] += 1
    elif op in ("ATOMG", "ATOM", "RED", "ATOMS"):
        counts["ATOM/RED"] += 1
    elif op in ("LDL", "STL"):
        counts["LDL/STL"] += 1


def hot_loop(instrs, labels):
    """The backward-branch range with the most tensor instructions (HMMA + HGMMA): {"instrs", "HMMA",
    "HGMMA", "MUFU", "start", "end"} (byte addresses), or None when no loop holds one. instrs:
    (address, op, branch target label or None, predicated) in order; labels: name -> the address of
    the instruction after it."""
    best = None
    for addr, op, target, pred in instrs:
        if op != "BRA" or target is None:
            continue
        if target in labels:
            if labels[target] > addr:
                continue
            lo = labels[target]
        else:
            # The target's instruction did not decode (11.8's nvdisasm leaves out what it cannot read,
            # label and all). A loop the compiler rotated is entered by an unconditional BRA jumping
            # over its body to where it exits: the body starts after the latest such jump.
            jumps = [a for a, o, t, p in instrs if o == "BRA" and not p and a < addr and labels.get(t, -1) > addr]
            if not jumps:
                continue
            lo = jumps[-1] + 1
        body = [o for a, o, _, _ in instrs if lo <= a <= addr]
        loop = {"instrs": len(body), "HMMA": body.count("HMMA"), "HGMMA": body.count("HGMMA"),
                "MUFU": body.count("MUFU"), "start": lo, "end": addr}
        tensor = loop["HMMA"] + loop["HGMMA"]
        if tensor and (best is None or (tensor, -loop["instrs"]) > (best["HMMA"] + best["HGMMA"], -best["instrs"])):
            best = loop
    return best


def parse(lines):
    """{mangled kernel name: counts} in the order the kernels appear, each with "hot_loop" (or None)."""
    kernels, code, labels = {}, {}, {}
    cur, pending = None, []
    for line in lines:
        m = FUNC.match(line)
        if m:
            cur = kernels.setdefault(m.group(1), {c: 0 for c in COLUMNS})
            code[m.group(1)], labels[m.group(1)], pending = [], {}, []
            name = m.group(1)
            continue
        if cur is None:
            continue
        m = LABEL.match(line)
        if m:
            pending.append(m.group(1))
            continue
        m = INSTR.match(line)
        if not m or m.group(3) == "NOP":
            continue
        addr = int(m.group(1), 16)
        for p in pending:
            labels[name][p] = addr
        pending = []
        t = TARGET.search(m.group(5))
        code[name].append((addr, m.group(3), t.group(1) if t else None, m.group(2) is not None))
        classify(m.group(3), m.group(4).split(".")[1:], cur)
    for name, counts in kernels.items():
        counts["hot_loop"] = hot_loop(code[name], labels[name])
    return kernels


def demangle(names):
    try:
        out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True, check=True).stdout
        full = out.splitlines()
    except (OSError, subprocess.CalledProcessError):
        full = list(names)
    # "void attention_forward_kernel<64>(__half*, ...)" -> "attention_forward_kernel<64>"
    return [re.sub(r"\(.*$", "", re.sub(r"^void ", "", f)) for f in full]


def main():
    args = sys.argv[1:]
    if not args or args[0].startswith("-"):
        sys.exit("usage: sass_mix.py SASS.txt [--json OUT.json] [--kernels REGEX]")
    path, json_out, pattern = args[0], None, None
    i = 1
    while i < len(args):
        if args[i] == "--json" and i + 1 < len(args):
            json_out = args[i + 1]
        elif args[i] == "--kernels" and i + 1 < len(args):
            pattern = re.compile(args[i + 1])
        else:
            sys.exit(f"sass_mix.py: unknown argument '{args[i]}' (expected --json OUT or --kernels REGEX)")
        i += 2
    try:
        with open(path) as f:
            kernels = parse(f)
    except OSError as e:
        sys.exit(f"sass_mix.py: cannot read {path}: {e.strerror}")
    if not kernels:
        sys.exit(f"sass_mix.py: {path} holds no kernel (expected the output of nvdisasm -c)")
    names = list(kernels)
    short = dict(zip(names, demangle(names)))
    rows = [(short[n], n, kernels[n]) for n in names if pattern is None or pattern.search(short[n])]
    rows.sort(key=lambda r: r[0])
    print("| kernel | " + " | ".join(COLUMNS) + " | hot loop: instrs, HMMA, HGMMA, MUFU |")
    print("| --- | " + " | ".join("---:" for _ in COLUMNS) + " | ---: |")
    for s, _, c in rows:
        loop = c["hot_loop"]
        hot = f"{loop['instrs']}, {loop['HMMA']}, {loop['HGMMA']}, {loop['MUFU']}" if loop else "-"
        print(f"| `{s}` | " + " | ".join(str(c[k]) for k in COLUMNS) + f" | {hot} |")
    if json_out:
        with open(json_out, "w") as f:
            json.dump({s: dict(c, mangled=n) for s, n, c in rows}, f, indent=1)


if __name__ == "__main__":
    main()
