#!/usr/bin/env python3
"""doc_figures.py: the figures in README.md and docs/*.md that this project's tools print, written
by those tools. A figure sits between two HTML comments, which Markdown does not show:

    ... down to <!-- fig ladder.bottom -->4.86<!-- /fig --> GiB ...

or, for a block (a table, the lines of a code block), the same two comments on lines of their own.
Each NAME is one of FIGURES below: a function that runs the tool (./train_gpt2 --plan --json, the
memory ladder, a recipe's --dry) and formats what it prints, and the files it must appear in.

    scripts/doc_figures.py               check: every marked figure is what its tool prints now, and
                                         every figure is marked in each file it belongs to; and the
                                         docs' links resolve and README is at most 200 lines; one
                                         PASS or FAIL line each, exit 1 on any FAIL (make test:
                                         test/test_doc_figures.sh)
    scripts/doc_figures.py --write       write what the tools print into the marks (make docs)
    --root DIR                           the tree whose README.md and docs/ are read (default: .);
                                         the tools are always this tree's

Needs ./train_gpt2 (make train): the planner runs on any machine, no GPU. Standard library only.
A figure a tool does not print (a paper's, a measurement's) is not marked: it says where it is from.

Not marked: docs/design.md's descriptor
table (GPT-2's and llm.c's model names, 124M ... 12.2B, not counts: --plan prints the counts) and its
peak table (common/gpu_peak.c's rows, each with its datasheet); docs/speed.md's share of the product
term in llm.c's 1558M step (74%, from the report's run, not its JSON) and the mma.sync attention's
21.3 ms of an earlier report. Figures from a formula or a paper (Korthikanti's, the ZeRO paper's,
DeepSpeed's estimator) and measurements (each says where it was made) are not the tools' and are
not marked.
"""
import argparse
import atexit
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GiB = 1 << 30
MARK = re.compile(r"<!-- fig ([a-z0-9_.]+) -->(.*?)<!-- /fig -->", re.S)


# The tools' own python3 calls run this Python: the python3 first on PATH may be a slow shim (pyenv's
# takes a third of a second to start, and the ladder and the recipe start a few).
_BIN = tempfile.mkdtemp(prefix="doc_figures.")
os.symlink(sys.executable, os.path.join(_BIN, "python3"))
atexit.register(shutil.rmtree, _BIN, True)


def run(cmd, env=None):
    env = dict(env or os.environ)
    env["PATH"] = _BIN + os.pathsep + env.get("PATH", "")
    r = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        sys.exit("error: %s failed (exit %d): %s" % (" ".join(cmd), r.returncode, (r.stderr or r.stdout).strip()[-300:]))
    return r.stdout


class Tools:
    """The tools' outputs, each run once."""

    def __init__(self):
        self.plans, self._ladder, self._recipe, self._kr, self._sass = {}, None, None, None, None
        if not os.access(os.path.join(REPO, "train_gpt2"), os.X_OK):
            sys.exit("error: ./train_gpt2 is not built (make train): the figures are its planner's")

    def plan(self, flags):
        """./train_gpt2 --plan --json FLAGS, as a dict."""
        flags = " ".join(flags.split())
        if flags not in self.plans:
            self.plans[flags] = json.loads(run(["./train_gpt2", "--plan", "--json"] + flags.split()))
        return self.plans[flags]

    def ladder(self):
        """scripts/memory_ladder.sh d48 --planned: its JSON and its Markdown table."""
        if self._ladder is None:
            with tempfile.TemporaryDirectory() as d:
                run(["bash", "scripts/memory_ladder.sh", "d48", "--planned", "--no-chart", "--out", d])
                data = json.load(open(os.path.join(d, "ladder.json")))
                md = open(os.path.join(d, "ladder.md")).read()
            self._ladder = (data, md)
        return self._ladder

    def kernel_report(self):
        """docs/kernel_report_fp16.json: the kernel report's own output (make kernel-report writes it
        and its .md; a run needs llm.c's checkout, so the committed JSON is the report's word)."""
        if self._kr is None:
            self._kr = json.load(open(os.path.join(REPO, "docs", "kernel_report_fp16.json")))
        return self._kr

    def sass_mix(self):
        """docs/sass_mix_fp16.json: make sass-mix's own output (it needs CUDA 11.8's nvdisasm)."""
        if self._sass is None:
            self._sass = json.load(open(os.path.join(REPO, "docs", "sass_mix_fp16.json")))
        return self._sass

    def corpus(self):
        """docs/runtime_corpus.json: dev/runtime_corpus.sh --write's counts (it needs llm.c's and the
        CUDA samples' checkouts, so the committed JSON is the corpus's word)."""
        if getattr(self, "_corpus", None) is None:
            self._corpus = json.load(open(os.path.join(REPO, "docs", "runtime_corpus.json")))
        return self._corpus

    def recipe(self):
        """scripts/run_gpt2_1558M_48GB.sh --dry with FineWeb's shards, as docs/memory.md runs it."""
        if self._recipe is None:
            env = dict(os.environ, TRAIN="data/cache/shards/fineweb_train_*.bin", VAL="data/cache/shards/fineweb_val_*.bin")
            self._recipe = run(["bash", "scripts/run_gpt2_1558M_48GB.sh", "--dry"], env=env)
        return self._recipe


def gib(b):
    return "%.2f" % (b / GiB)


def commas(b):
    return "{:,}".format(b)


def ladder_row(t, flag_part):
    data, _ = t.ladder()
    rows = [r for r in data["rows"] if flag_part in r["flags"]]
    return rows[-1]


D48 = "-e d48 -t 1024 -b 8 --precision fp16"


# ---- the figures -----------------------------------------------------------------------------------

OFF = D48.replace("-b 8", "-b 4") + " -r 3 -d 8192"  # the ladder's offload rows' shape


def step_ms(t, flags, gpu):
    """The planner's predicted step (ms) for FLAGS (D48's and more) on GPU (its --gpu name)."""
    return t.plan("%s --gpu %s" % (flags, gpu))["communication"]["step_seconds"] * 1e3


def cost_pct(t, flags, base, gpu):
    """What FLAGS cost against BASE on GPU, % of BASE's predicted step (tokens a step the same)."""
    return "%+.1f%%" % (100 * (step_ms(t, flags, gpu) / step_ms(t, base, gpu) - 1))


def act_saved_pct(t, flags, base):
    return "%.0f%%" % (100 * (1 - activations(t, flags) / activations(t, base)))


def off_comm(t, offload="optimizer", gpu="a6000"):
    """The communication plan (with its predicted step) of d48 at the ladder's offload rows' shape."""
    return t.plan("%s %s --gpu %s" % (OFF, "--offload " + offload if offload else "", gpu))["communication"]

def ladder_tables(t):
    """The ladder's tables, as scripts/memory_ladder.sh writes them: each a block of "|" lines."""
    _, md = t.ladder()
    blocks = [b for b in md.split("\n\n") if b.startswith("| #")]
    return blocks


def ladder_table(t):
    """The ladder's memory table."""
    return ladder_tables(t)[0]


def ladder_time_table(t):
    """The ladder's time table and its notes (which rows the kernel report's counts do not cover)."""
    _, md = t.ladder()
    table = ladder_tables(t)[1]
    notes = [l for l in md.splitlines() if re.match(r"^\([a-z]\) compute at ", l)]
    return table + ("\n\n" + "\n\n".join(notes) if notes else "")


def zero_comm_ratio(t, extra=""):
    sent = lambda z: t.plan("%s -r 3 -z %d --ranks 8 %s" % (D48, z, extra))["communication"]["sent_per_step"]
    return "%.2f" % (sent(3) / sent(1))


LINKS = (("nvlink", "450 GB/s"), ("pcie", "25"), ("ib", "50"))


def comm_table(t):
    """docs/memory.md's stage-by-stage traffic at three links (8 ranks, -r 3)."""
    out = ["| stage | sent a rank a step | %s | could hide |" % " | ".join("%s (%s): time, exposed" % l for l in LINKS),
           "| --- | --- | --- | --- | --- | --- |"]
    for z in range(4):
        cells, hides = [], []
        for link, _ in LINKS:
            c = t.plan("%s -r 3 -z %d --ranks 8 --link %s" % (D48, z, link))["communication"]
            cells.append("%.2f ms, %.2f" % (c["comm_seconds"] * 1e3, c["exposed_seconds"] * 1e3))
            hides.append(c["hides_if_overlapped"])
            sent = c["sent_per_step"]
        if all(hides):
            could = "yes"
        elif not any(hides):
            could = "no"
        else:
            could = "yes (not at %s)" % ", ".join(l for (l, _), h in zip(LINKS, hides) if not h)
        out.append("| %d | %.3f GB | %s | %s |" % (z, sent / 1e9, " | ".join(cells), could))
    return "\n".join(out)


def comm_compute_ms(t):
    return "%.1f" % (t.plan("%s -r 3 -z 0 --ranks 8" % D48)["communication"]["compute_seconds"] * 1e3)


def z1_gather_ms(t, link):
    """Stage 1's parameter all-gather after the update at LINK, ms (8 ranks, -r 3)."""
    c = comm(t, 1, "--link %s" % link)
    sent = sum(i["sent"] for i in c["items"] if i["what"].startswith("parameters, gathered") and i["each"] == "step")
    return "%.2f" % (sent / c["link"]["bytes_per_s"] * 1e3)


def comm(t, z, extra=""):
    """The communication plan of rank 0 of 8 at -r 3 -z Z (and EXTRA flags)."""
    return t.plan("%s -r 3 -z %d --ranks 8 %s" % (D48, z, extra))["communication"]


def gathers_gb(t, extra=""):
    c = comm(t, 3, extra)
    return "%.2f" % (sum(i["sent"] for i in c["items"] if i["what"].startswith("parameters, gathered")) / 1e9)


def accum(t, z, what):
    """-d 131072 (2 micro-steps of 8 x 1024 tokens a rank): what = gb, ms, exposed_ms or compute_ms."""
    c = comm(t, z, "-d 131072")
    return {"gb": "%.2f" % (c["sent_per_step"] / 1e9), "ms": "%.2f" % (c["comm_seconds"] * 1e3),
            "exposed_ms": "%.2f" % (c["exposed_seconds"] * 1e3), "compute_ms": "%.1f" % (c["compute_seconds"] * 1e3)}[what]


def zero3_fit_table(t):
    """-z 3 at 4 and 8 ranks against the cards they are meant for (docs/memory.md)."""
    out = ["| ranks | allocated by the engine | with the estimates (CUDA context 0.5 GiB, NCCL 0.375 GiB) | meant to fit in | fits? |",
           "| --- | --- | --- | --- | --- |"]
    for n, cap in ((4, 12), (8, 8)):
        p = t.plan("%s -r 3 -z 3 --ranks %d" % (D48, n))
        dev, tot = p["device_bytes"], p["device_total"]
        fits = "yes, %.2f GiB spare" % (cap - tot / GiB) if tot <= cap * GiB else "no, %.2f GiB over" % (tot / GiB - cap)
        out.append("| %d | %s B = %s GiB | %s B = **%s GiB** | %d GiB | %s |" % (n, commas(dev), gib(dev), commas(tot), gib(tot), cap, fits))
    return "\n".join(out)


def offload_z3_table(t):
    """Rank 0 of 4 at -z 3 --offload optimizer, component by component (docs/memory.md)."""
    p = t.plan("%s -r 3 -z 3 --ranks 4 --offload optimizer" % D48)
    comp = {c["name"]: c for c in p["components"]}
    out = ["| component (rank 0 of 4) | where | bytes | GiB |", "| --- | --- | --- | --- |"]
    row = lambda name, where, b, bold=False: out.append(
        "| %s | %s | %s | %s |" % (name, where, commas(b) if isinstance(b, int) else b, ("**%.2f**" if bold else "%.3f") % (b / GiB)))
    for name in ("parameter shard", "parameter gather buffers", "gradient buckets", "gradient shard", "gradient accumulator (fp32)"):
        row(name, "device", comp[name]["bytes"])
    row("activations (segments of %d layers)" % p["options"]["recompute_every"], "device", comp["activations"]["bytes"])
    row("scratch, cuBLASLt workspace, checkpoint staging", "device",
        sum(comp[n]["bytes"] for n in ("scratch", "cuBLASLt workspace", "checkpoint staging")))
    row("allocated by the engine", "device", p["device_bytes"], True)
    row("with the estimates (CUDA context 0.5 GiB, NCCL 0.375 GiB)", "device", p["device_total"], True)
    fp32 = comp["master weights (fp32)"]["bytes"]
    assert comp["AdamW m (fp32)"]["bytes"] == fp32 == comp["AdamW v (fp32)"]["bytes"]
    out.append("| master weights, AdamW m, AdamW v (fp32) | host | 3 × %s | 3 × %.3f |" % (commas(fp32), fp32 / GiB))
    row("offload buffers (pinned), host staging, encoder plan", "host",
        sum(comp[n]["bytes"] for n in ("offload buffers (pinned)", "host staging (pinned)", "encoder plan (host)")))
    out.append("| total | host | %s | %.2f |" % (commas(p["host_bytes"]), p["host_bytes"] / GiB))
    return "\n".join(out)


NOT_MODEL_STATES = ("activations", "scratch", "cuBLASLt workspace", "checkpoint staging")


def model_states(t, z, n, base=None):
    """A rank's model states at -z Z on N ranks (d48 at -r 3, or BASE's flags): every device component
    the engine allocates but the activations and the scratch (parameters, gradients, fp32 master
    weights, m, v, and at -z 2 and 3 the fp32 gradient sum, the buckets and the gather buffers)."""
    p = t.plan("%s -z %d --ranks %d" % (base or D48 + " -r 3", z, n))
    return sum(c["bytes"] for c in p["components"]
               if c["where"] == "device" and not c["estimate"] and c["name"] not in NOT_MODEL_STATES)


def zero_states_table(t):
    """docs/memory.md's model states per rank, stage by stage, beside the published formulas."""
    psi = next(c["bytes"] for c in t.plan("%s -r 3 -z 0 --ranks 2" % D48)["components"]
               if c["name"] == "master weights (fp32)") // 4
    ns = (2, 4, 8)
    ours = lambda z: " | ".join("%.2f GB (%.2f GiB)" % (model_states(t, z, n) / 1e9, model_states(t, z, n) / GiB) for n in ns)
    formula = lambda f: " | ".join("%.2f GB" % (f(n) * psi / 1e9) for n in ns)
    assert all(model_states(t, 0, n) == 16 * psi for n in ns), "stage 0's model states are not 16 psi"
    return "\n".join([
        "| model states per rank | published | this project | d48, N = 2 | N = 4 | N = 8 |",
        "| --- | --- | --- | --- | --- | --- |",
        "| stage 0 (data parallel) | 16Ψ | 16Ψ | %s |" % " | ".join("%.2f GB" % (16 * psi / 1e9) for n in ns),
        "| stage 1 (optimizer state sharded) | 4Ψ + 12Ψ/N | **4Ψ + 12Ψ/N**, to the byte (gradients reduce-scattered in place) | %s |" % ours(1),
        "| stage 2 (gradients too), the paper | 2Ψ + 14Ψ/N | – | %s |" % formula(lambda n: 2 + 14 / n),
        "| stage 2, DeepSpeed's estimator | 2Ψ + 18Ψ/N | – | %s |" % formula(lambda n: 2 + 18 / n),
        "| stage 2, this project | – | **2Ψ + 18Ψ/N + buckets** | %s |" % ours(2),
        "| stage 3 (parameters too), the paper | 16Ψ/N | – | %s |" % formula(lambda n: 16 / n),
        "| stage 3, this project | – | **16Ψ/N** to the byte, **+ 4Ψ/N + buckets + gather buffers** | %s |" % ours(3)])


def pipeline_plan(t):
    """The four-card pipeline of docs/guide.md: d48, -b 4 -r 0 -pp 4 on 4 ranks, 128 micro-steps."""
    return t.plan("-e d48 -t 1024 -b 4 -r 0 -pp 4 --ranks 4 -d 524288")


MiB = 1 << 20


def activations(t, flags, precision="fp16"):
    """The activations component of a d48 plan at T=1024."""
    p = t.plan("-e d48 -t 1024 --precision %s %s" % (precision, flags))
    return next(c["bytes"] for c in p["components"] if c["name"] == "activations")


def per_layer_bytes(t):
    """What one layer keeps for one sequence at -r 0: the tensors kept for every layer, per layer."""
    p = t.plan("-e d48 -t 1024 --precision fp16 -b 1 -r 0")
    L = p["model"]["layers"]
    return sum(a["bytes"] // L for a in p["activations"] if a["layers"] == L)


def mib1(b):
    return "{:,.1f}".format(b / MiB)


def recompute_table(t):
    """docs/memory.md's activations and totals by recompute level, d48, B=8."""
    out = ["| d48, B=8, T=1024, FP16 | activations | total per rank |", "| --- | --- | --- |"]
    for label, flags in (("`-r 0`", "-r 0"), ("`-r 1`", "-r 1"), ("`-r 2`", "-r 2"),
                         ("`-r 3` (K = %d, the default)", "-r 3"), ("`-r 3 --recompute-every 7` (√L)", "-r 3 --recompute-every 7")):
        p = t.plan("%s %s" % (D48, flags))
        act = next(c["bytes"] for c in p["components"] if c["name"] == "activations")
        if "%d" in label:
            label = label % p["options"]["recompute_every"]
        out.append("| %s | %.2f GiB | %s GiB |" % (label, act / GiB, gib(p["device_total"])))
    return "\n".join(out)


def pipeline_stage_table(t):
    """docs/memory.md's four stages of d48 at -b 4 -r 0 -pp 4: each stage's layers, micro-batches in
    flight, model states, activations and device total."""
    p = pipeline_plan(t)
    stages = p["by_stage"]
    largest = max(s["device_total"] for s in stages)
    out = ["| stage | layers | in flight | model states | activations | device total (with estimates) |",
           "| --- | --- | --- | --- | --- | --- |"]
    for s in stages:
        c = s["components"]
        states = sum(b for n, b in c.items() if n not in NOT_MODEL_STATES and n in DEVICE_ALLOCATED)
        layers = "%d–%d (%d)" % (s["first_layer"], s["first_layer"] + s["layers"] - 1, s["layers"])
        if s["stage"] == 0:
            layers += " and the embeddings"
        if s["stage"] == len(stages) - 1:
            layers += ", final LayerNorm, classifier"
        total = "%s GiB" % gib(s["device_total"])
        if s["device_total"] == largest:
            total = "**%s**, the largest" % total
        out.append("| %d | %s | %d | %s GiB | %s GiB | %s |" % (s["stage"], layers, s["in_flight"], gib(states),
                                                               gib(c["activations"]), total))
    return "\n".join(out)


# the components the engine allocates on the device (the plan's estimates and host buffers are not)
DEVICE_ALLOCATED = ("parameters", "parameter shard", "parameter gather buffers", "gradients", "gradient buckets",
                    "gradient shard", "gradient accumulator (fp32)", "master weights (fp32)", "AdamW m (fp32)",
                    "AdamW v (fp32)", "activations", "scratch", "cuBLASLt workspace", "checkpoint staging")


ADVICE = "./train_gpt2 --plan -e d48 -t 1024 -b 32 -r 0 --precision fp16 --memory-budget 48GiB"


def advice_line(t):
    """The planner's answer to a budget, as docs/memory.md shows it: the command and the text report's
    last line, as a fenced block (a mark inside a fence would show)."""
    last = run(ADVICE.split()).rstrip("\n").splitlines()[-1]
    return "```\n$ %s | tail -n 1\n%s\n```" % (ADVICE, last)


def plan_value(t, flags, what):
    """One number of a plan: device_total, device_bytes, host_bytes, max_B (with --memory-budget),
    advice_total (the advice's device_total), host_down (the host link's bytes down a step),
    activations, or device_states (the device's parameters, gradients and their buffers: every
    device component but the activations, the scratch and the fp32 optimizer state)."""
    p = t.plan(flags)
    comp = {c["name"]: c for c in p["components"]}
    if what in ("device_total", "device_bytes", "host_bytes"):
        return p[what]
    if what == "max_B":
        return p["budget"]["max_B"]
    if what == "advice_total":
        return p["budget"]["advice"]["device_total"]
    if what == "host_down":
        return p["communication"]["host_down_per_step"]
    if what == "activations":
        return comp["activations"]["bytes"]
    if what == "device_states":
        skip = NOT_MODEL_STATES + ("master weights (fp32)", "AdamW m (fp32)", "AdamW v (fp32)")
        return sum(c["bytes"] for c in p["components"] if c["where"] == "device" and not c["estimate"] and c["name"] not in skip)
    raise KeyError(what)


FORMATS = {"gib": lambda b: gib(b), "gb": lambda b: "%.2f" % (b / 1e9), "commas": commas, "int": str}


def pfig(flags, what, fmt="gib", files=("docs/memory.md",)):
    """A figure that is one number of one plan (plan_value), formatted."""
    return (lambda t: FORMATS[fmt](plan_value(t, flags, what)), list(files))


Z3N4 = D48.replace("-b 8", "-b 8 -r 3 -z 3 --ranks 4")


PP = "-e d48 -t 1024 --precision fp16 -b 4 -r 0"


def pp_comm(t, what):
    """The four-card pipeline's middle stage (rank 2) at -d 524288 over PCIe: what = sent_gb, ms or
    compute_s."""
    c = t.plan(PP + " -pp 4 --ranks 4 -d 524288 --link pcie")["communication"]
    return {"sent_gb": "%.2f" % (c["sent_per_step"] / 1e9), "ms": "%.0f" % (c["comm_seconds"] * 1e3),
            "compute_s": "%.1f" % c["compute_seconds"]}[what]


def ladder_at(t, flags, ranks=1):
    """The ladder's row with exactly these flags on this many ranks."""
    data, _ = t.ladder()
    rows = [r for r in data["rows"] if r["flags"] == flags and r["ranks"] == ranks]
    assert len(rows) == 1, (flags, ranks)
    return rows[0]


def gib1(b):
    return "%.1f" % (b / GiB)


def zero3_parts(t, n):
    """A ZeRO-3 rank's 16Ψ/N (parameter, gradient and optimizer shards) and its gather buffers."""
    comp = {c["name"]: c["bytes"] for c in t.plan("%s -r 3 -z 3 --ranks %d" % (D48, n))["components"]}
    return sum(comp[k] for k in ("parameter shard", "parameter gather buffers", "gradient shard", "master weights (fp32)",
                                 "AdamW m (fp32)", "AdamW v (fp32)"))


D2 = "-e d2 -t 64 -b 4 --precision fp16"  # dev/bench_memory.sh's default model and batch


def d2_act(t, flags):
    return next(c["bytes"] for c in t.plan("%s %s" % (D2, flags))["components"] if c["name"] == "activations")


def d2_states(t, z):
    """d2's model states a rank at -z Z on 2 ranks, for bench_memory's table."""
    return model_states(t, z, 2, D2 + " -r 0")


def mib2(b):
    return "%.2f" % (b / MiB)


def recipe_gib(t):
    """The 48 GB recipe's GiB per rank, from its plan line."""
    m = re.search(r"; ([0-9.]+) GiB per rank", t.recipe())
    assert m, "the recipe's --dry printed no plan line with GiB per rank"
    return m.group(1)


def recipe_lines(t):
    """The 48 GB recipe's plan and command lines (its --dry), as a fenced block."""
    return "```\n%s\n```" % "\n".join(l for l in t.recipe().splitlines() if l.startswith(("plan: ", "command: ")))


def kr_side(t, gpu, model, key):
    return t.kernel_report()["side_by_side"][gpu][model][key]


def kr_side_table(t):
    """docs/speed.md's table: ours beside llm.c, every GPU, d12 and d48, by the same model."""
    out = ["| predicted | d12 ours | d12 llm.c | d48 ours | d48 llm.c |", "| --- | ---: | ---: | ---: | ---: |"]
    for gpu, models in t.kernel_report()["side_by_side"].items():
        d12, d48 = models["d12"], models["d48"]
        att = d48["llmc_attention"]
        note = " (llm.c's own attention: no rate published)" if att.startswith("its own") else ""
        out.append("| %s%s | %.1f ms | %.1f ms | %.1f ms (%.1f%% MFU) | %.1f ms (%.1f%%) |" % (
            gpu, note, d12["ours_ms"], d12["llmc_ms"], d48["ours_ms"], d48["ours_mfu"] * 100, d48["llmc_ms"], d48["llmc_mfu"] * 100))
    return "\n".join(out)


def kr_calibration(t, anchor, fmt, scale=1):
    """A calibration row's predicted value (the step in s; SCALE 1e3 for ms)."""
    rows = [c for c in t.kernel_report()["calibration"] if c["anchor"] == anchor]
    assert len(rows) == 1, anchor
    return fmt % (rows[0]["predicted"] * scale)


def kr_ours_attention(t, gpu, T, both):
    """Our flash attention's predicted TFLOP/s at FlashAttention-2's benchmark configuration (the
    report's comparison rows): forward, or forward and backward."""
    what = "forward+backward" if both else "forward"
    rows = [c for c in t.kernel_report()["calibration"] if c["kind"] == "comparison" and c["anchor"].endswith(" " + what)
            and c["config"].startswith(gpu + ",") and "T=%d " % T in c["config"]]
    assert rows, (gpu, T, what)
    return "%.0f" % rows[0]["predicted"]


def sass_loop(t, kernel, key="instrs"):
    """A kernel's hot loop in the SASS mix: its instructions, or its count of one class."""
    return str(t.sass_mix()[kernel]["hot_loop"][key])


def kr_family(t, family, who):
    """A kernel family's predicted ms in a d48 step on an H100 (ours or llm.c's)."""
    return t.kernel_report()["side_by_side"]["H100 SXM"]["d48"]["families"][family][who + "_ms"]


def fa3_row(t):
    """The report's row of our forward beside FlashAttention-3's measured one at T=2048."""
    rows = [c for c in t.kernel_report()["calibration"] if c["anchor"] == "ours beside FlashAttention-3 forward"
            and "T=2048 " in c["config"]]
    assert len(rows) == 1
    return rows[0]


def step_margin_pct(t):
    """How far under its bar the d48 step target is, in percent."""
    r = next(r for r in t.kernel_report()["targets"] if r["target"].startswith("d48 step"))
    return "%.1f" % (100 * (1 - r["ours"] / r["bar"]))


def kr_target(t, prefix, key, fmt):
    """A target of the report's: ours or the bar."""
    rows = [r for r in t.kernel_report()["targets"] if r["target"].startswith(prefix)]
    assert len(rows) == 1, prefix
    return fmt % rows[0][key]


# name -> (function, the files it belongs in, relative to the root)
FIGURES = {
    "corpus.llmc_alarms": (lambda t: "%d" % t.corpus()["llmc_distinct_alarms"], ["docs/runtime.md"]),
    "corpus.llmc_defects": (lambda t: "%d" % t.corpus()["llmc_defects"], ["docs/runtime.md"]),
    "corpus.llmc_worst": (lambda t: "%.1e" % t.corpus()["llmc_worst_rel_loss"], ["docs/runtime.md"]),
    "corpus.samples": (lambda t: "%d" % t.corpus()["samples"], ["docs/runtime.md"]),
    "corpus.samples_clean": (lambda t: "%d" % t.corpus()["samples_clean"], ["docs/runtime.md"]),
    "corpus.samples_noted": (lambda t: "%d" % t.corpus()["samples_noted"], ["docs/runtime.md"]),
    "corpus.samples_unsupported": (lambda t: "%d" % t.corpus()["samples_unsupported"], ["docs/runtime.md"]),
    "ladder.table": (ladder_table, ["docs/memory.md"]),
    "ladder.time_table": (ladder_time_table, ["docs/memory.md"]),
    "ladder.top": (lambda t: gib(ladder_row(t, "--precision fp32")["device_total"]), ["README.md", "docs/guide.md", "docs/memory.md"]),
    "ladder.bottom": (lambda t: gib(ladder_row(t, "--offload grads")["device_total"]), ["README.md", "docs/guide.md"]),
    "ladder.bottom_host": (lambda t: gib(ladder_row(t, "--offload grads")["host_bytes"]), ["docs/guide.md"]),
    "zero3.comm_ratio": (zero_comm_ratio, ["docs/guide.md"]),
    "zero3.comm_ratio_k7": (lambda t: zero_comm_ratio(t, "--recompute-every 7"), ["docs/guide.md"]),
    "comm.table": (comm_table, ["docs/memory.md"]),
    "comm.compute_ms": (comm_compute_ms, ["docs/memory.md"]),
    "zero3.comm_ratio.memory": (zero_comm_ratio, ["docs/memory.md"]),
    "zero3.comm_ratio_k7.memory": (lambda t: zero_comm_ratio(t, "--recompute-every 7"), ["docs/memory.md"]),
    "zero3.gathers_gb": (gathers_gb, ["docs/memory.md"]),
    "zero3.gathers_gb_k7": (lambda t: gathers_gb(t, "--recompute-every 7"), ["docs/memory.md"]),
    "zero3.accum_gb": (lambda t: accum(t, 3, "gb"), ["docs/memory.md"]),
    "zero3.accum_ms": (lambda t: accum(t, 3, "ms"), ["docs/memory.md"]),
    "zero2.accum_gb": (lambda t: accum(t, 2, "gb"), ["docs/memory.md"]),
    "zero2.accum_ms": (lambda t: accum(t, 2, "ms"), ["docs/memory.md"]),
    "zero2.accum_exposed_ms": (lambda t: accum(t, 2, "exposed_ms"), ["docs/memory.md"]),
    "zero2.accum_compute_ms": (lambda t: accum(t, 2, "compute_ms"), ["docs/memory.md"]),
    "zero3.fit_table": (zero3_fit_table, ["docs/memory.md"]),
    "offload.z3_table": (offload_z3_table, ["docs/memory.md"]),
    "recipe.48gb": (recipe_lines, ["docs/memory.md"]),
    "zero.states_table": (zero_states_table, ["docs/memory.md"]),
    "zero.states_z0": (lambda t: "%.2f" % (model_states(t, 0, 8) / 1e9), ["docs/guide.md"]),
    "zero.states_z1": (lambda t: "%.2f" % (model_states(t, 1, 8) / 1e9), ["docs/guide.md"]),
    "zero.states_z2": (lambda t: "%.2f" % (model_states(t, 2, 8) / 1e9), ["docs/guide.md"]),
    "zero.states_z3": (lambda t: "%.2f" % (model_states(t, 3, 8) / 1e9), ["docs/guide.md"]),
    "pp.split": (lambda t: "/".join(str(s["layers"]) for s in pipeline_plan(t)["by_stage"]), ["docs/guide.md"]),
    "pp.largest_gib": (lambda t: gib(max(s["device_total"] for s in pipeline_plan(t)["by_stage"])), ["docs/guide.md"]),
    "pp.bubble_pct": (lambda t: "%.1f" % (100 * pipeline_plan(t)["pipeline"]["bubble"]), ["docs/guide.md", "docs/memory.md"]),
    "pp.zero1_gib": (lambda t: gib(t.plan("-e d48 -t 1024 -b 4 -r 0 -z 1 --ranks 4")["device_total"]), ["docs/guide.md", "docs/memory.md"]),
    "act.per_layer_bytes": (lambda t: commas(per_layer_bytes(t)), ["docs/memory.md"]),
    "act.per_layer_mib": (lambda t: "%.2f" % (per_layer_bytes(t) / MiB), ["docs/memory.md"]),
    "act.layers_gib": (lambda t: "%.2f" % (48 * per_layer_bytes(t) / GiB), ["docs/memory.md"]),
    "act.r0_mib": (lambda t: mib1(activations(t, "-b 1 -r 0")), ["docs/memory.md"]),
    "act.r0_gib": (lambda t: "%.2f" % (activations(t, "-b 1 -r 0") / GiB), ["docs/memory.md"]),
    "act.r1_mib": (lambda t: mib1(activations(t, "-b 1 -r 1")), ["docs/memory.md"]),
    "act.r2_mib": (lambda t: mib1(activations(t, "-b 1 -r 2")), ["docs/memory.md"]),
    "act.r3k7_mib": (lambda t: mib1(activations(t, "-b 1 -r 3 --recompute-every 7")), ["docs/memory.md"]),
    "act.r3k2_mib": (lambda t: mib1(activations(t, "-b 1 -r 3 --recompute-every 2")), ["docs/memory.md"]),
    "act.r3k1_mib": (lambda t: mib1(activations(t, "-b 1 -r 3 --recompute-every 1")), ["docs/memory.md"]),
    "act.fp32_gib": (lambda t: "%.2f" % (activations(t, "-b 1 -r 0", "fp32") / GiB), ["docs/memory.md"]),
    "act.fp32_b8_gib": (lambda t: "%.2f" % (activations(t, "-b 8 -r 0", "fp32") / GiB), ["docs/memory.md"]),
    "act.fp16_b8_gib": (lambda t: "%.2f" % (activations(t, "-b 8 -r 0") / GiB), ["docs/memory.md"]),
    "recompute.table": (recompute_table, ["docs/memory.md"]),
    "pp.stage_table": (pipeline_stage_table, ["docs/memory.md"]),
    "planner.advice": (advice_line, ["docs/memory.md"]),
    # docs/memory.md, section 4: stage 3 with offload
    "off.z3n4_opt_total": pfig(Z3N4 + " --offload optimizer", "device_total"),
    "off.z3n4_grads_bytes": pfig(Z3N4 + " --offload grads", "device_bytes"),
    "off.z3n4_grads_total": pfig(Z3N4 + " --offload grads", "device_total"),
    "off.z3n4_grads_host": pfig(Z3N4 + " --offload grads", "host_bytes"),
    "off.z3n8_opt_total": pfig(Z3N4.replace("--ranks 4", "--ranks 8") + " --offload optimizer", "device_total"),
    "off.z3n8_grads_total": pfig(Z3N4.replace("--ranks 4", "--ranks 8") + " --offload grads", "device_total"),
    "off.z3n4_host_down": pfig(Z3N4 + " --offload optimizer", "host_down", "commas"),
    "off.advice_before": pfig("-e d48 -t 1024 --precision fp16 -b 1 -r 3 -z 3 --ranks 4 --memory-budget 5GiB", "device_total"),
    "off.advice_after": pfig("-e d48 -t 1024 --precision fp16 -b 1 -r 3 -z 3 --ranks 4 --memory-budget 5GiB", "advice_total"),
    # section 5: micro-batch
    "mb.act_b8": pfig(D48 + " -r 3", "activations"),
    "mb.act_b4": pfig(D48.replace("-b 8", "-b 4") + " -r 3", "activations"),
    "mb.total_b8": pfig(D48 + " -r 3", "device_total"),
    "mb.total_b4": pfig(D48.replace("-b 8", "-b 4") + " -r 3", "device_total"),
    "mb.maxb_r0": pfig(D48 + " -r 0 --memory-budget 48GiB", "max_B", "int"),
    "mb.maxb_r1": pfig(D48 + " -r 1 --memory-budget 48GiB", "max_B", "int"),
    "mb.maxb_r2": pfig(D48 + " -r 2 --memory-budget 48GiB", "max_B", "int"),
    "mb.maxb_r3": pfig(D48 + " -r 3 --memory-budget 48GiB", "max_B", "int"),
    "mb.maxb_r3k7": pfig(D48 + " -r 3 --recompute-every 7 --memory-budget 48GiB", "max_B", "int"),
    # section 6: offload on one card
    "off.opt_states_gb": pfig(D48 + " -r 3 --offload optimizer", "device_states", "gb"),
    "off.opt_states_gib": pfig(D48 + " -r 3 --offload optimizer", "device_states"),
    "off.opt_host": pfig(D48 + " -r 3 --offload optimizer", "host_bytes"),
    "off.grads_states_gb": pfig(D48 + " -r 3 --offload grads", "device_states", "gb"),
    "off.grads_states_gib": pfig(D48 + " -r 3 --offload grads", "device_states"),
    "off.grads_host": pfig(D48 + " -r 3 --offload grads", "host_bytes"),
    "off.r3b8_opt": pfig(D48 + " -r 3 --offload optimizer", "device_total"),
    "off.r3b8_grads": pfig(D48 + " -r 3 --offload grads", "device_total"),
    "off.r3b4_opt": pfig(D48.replace("-b 8", "-b 4") + " -r 3 --offload optimizer", "device_total"),
    "off.r3b4_grads": pfig(D48.replace("-b 8", "-b 4") + " -r 3 --offload grads", "device_total"),
    "off.r3b1_grads": pfig(D48.replace("-b 8", "-b 1") + " -r 3 --offload grads", "device_total"),
    "off.r1b8_opt": pfig(D48 + " -r 1 --offload optimizer", "device_total"),
    # docs/memory.md, section 4b: the four-card pipeline beside its alternatives
    "pp.one_card_gib": pfig(PP, "device_total"),
    "pp.one_card_act": pfig(PP, "activations"),
    "pp.zero3_gib": pfig(PP + " -z 3 --ranks 4", "device_total"),
    "pp.dp2_gib": (lambda t: gib(max(s["device_total"] for s in t.plan(PP + " -pp 4 -z 1 --ranks 8 -d 524288")["by_stage"])),
                   ["docs/memory.md"]),
    "pp.dp2_split": (lambda t: "/".join(str(s["layers"]) for s in t.plan(PP + " -pp 4 -z 1 --ranks 8 -d 524288")["by_stage"]),
                     ["docs/memory.md"]),
    "pp.bubble_m4_pct": (lambda t: "%.1f" % (100 * t.plan(PP + " -pp 4 --ranks 4")["pipeline"]["bubble"]), ["docs/memory.md"]),
    "pp.sent_gb": (lambda t: pp_comm(t, "sent_gb"), ["docs/memory.md"]),
    "pp.comm_ms": (lambda t: pp_comm(t, "ms"), ["docs/memory.md"]),
    "pp.compute_s": (lambda t: pp_comm(t, "compute_s"), ["docs/memory.md"]),
    # docs/memory.md: what the ladder shows, under its table
    "ladder.states_1f": (lambda t: gib1(model_states(t, 0, 2)), ["docs/memory.md"]),
    "ladder.spare_1f": (lambda t: "%.1f" % (48 - ladder_at(t, "--precision fp16 -b 8 -r 0")["device_total"] / GiB), ["docs/memory.md"]),
    "ladder.act_r0_1f": (lambda t: gib1(activations(t, "-b 8 -r 0")), ["docs/memory.md"]),
    "ladder.act_r3_1f": (lambda t: gib1(activations(t, "-b 8 -r 3")), ["docs/memory.md"]),
    "ladder.z3n8_1f": (lambda t: gib1(ladder_at(t, "--precision fp16 -b 8 -r 3 -z 3", 8)["device_total"]), ["docs/memory.md"]),
    "ladder.off_opt_1f": (lambda t: gib1(ladder_at(t, "--precision fp16 -b 4 -r 3 -d 8192 --offload optimizer")["device_total"]), ["docs/memory.md"]),
    "ladder.off_grads_1f": (lambda t: gib1(ladder_at(t, "--precision fp16 -b 4 -r 3 -d 8192 --offload grads")["device_total"]), ["docs/memory.md"]),
    "ladder.off_host_range": (lambda t: "%.0f–%.0f" % tuple(ladder_at(t, "--precision fp16 -b 4 -r 3 -d 8192 --offload " + o)["host_bytes"] / GiB
                                                          for o in ("optimizer", "grads")), ["docs/memory.md"]),
    "ladder.pp_1f": (lambda t: gib1(ladder_at(t, "--precision fp16 -b 8 -r 3 -pp 4", 4)["device_total"]), ["docs/memory.md"]),
    "ladder.z1n4_1f": (lambda t: gib1(ladder_at(t, "--precision fp16 -b 8 -r 3 -z 1", 4)["device_total"]), ["docs/memory.md"]),
    # docs/memory.md, section 1 and section 8
    "model.psi": (lambda t: commas(t.plan(D48)["model"]["parameters"]), ["docs/memory.md"]),
    "states.bytes": (lambda t: commas(model_states(t, 0, 2)), ["docs/memory.md"]),
    "states.gb1": (lambda t: "%.1f" % (model_states(t, 0, 2) / 1e9), ["docs/memory.md"]),
    "states.gib": (lambda t: gib(model_states(t, 0, 2)), ["docs/memory.md"]),
    "states.b1_gib1": (lambda t: gib1(t.plan("-e d48 -t 1024 --precision fp16 -b 1 -r 0")["device_total"]), ["docs/memory.md"]),
    "zero.z1_n2_gb": (lambda t: "%.2f" % (model_states(t, 1, 2) / 1e9), ["docs/memory.md"]),
    "zero.z2_n2_gb": (lambda t: "%.2f" % (model_states(t, 2, 2) / 1e9), ["docs/memory.md"]),
    # docs/memory.md, section 4: what a ZeRO-3 rank holds beside its 16Ψ/N
    "zero3.states_n4": (lambda t: gib(zero3_parts(t, 4)), ["docs/memory.md"]),
    "zero3.states_n8": (lambda t: gib(zero3_parts(t, 8)), ["docs/memory.md"]),
    "zero3.logits_gib": (lambda t: gib(next(a["bytes"] for a in t.plan("%s -r 3 -z 3 --ranks 4" % D48)["activations"]
                                            if a["name"] == "logits")), ["docs/memory.md"]),
    "zero3.accum_n4": (lambda t: gib(next(c["bytes"] for c in t.plan("%s -r 3 -z 3 --ranks 4" % D48)["components"]
                                          if c["name"] == "gradient accumulator (fp32)")), ["docs/memory.md"]),
    # docs/memory.md, "What each saves and costs": the byte columns (the GPU engine's, as planned)
    "bench.act_r0": (lambda t: mib2(d2_act(t, "-r 0")), ["docs/memory.md"]),
    "bench.act_r123": (lambda t: " / ".join(mib2(d2_act(t, "-r %d" % r)) for r in (1, 2, 3)), ["docs/memory.md"]),
    "bench.saved_r123": (lambda t: " / ".join(commas(d2_act(t, "-r 0") - d2_act(t, "-r %d" % r)) for r in (1, 2, 3)) + " B (" +
                         " / ".join("%.1f" % (100 * (1 - d2_act(t, "-r %d" % r) / d2_act(t, "-r 0"))) for r in (1, 2, 3)) + "%)",
                         ["docs/memory.md"]),
    "bench.act_accum": (lambda t: mib2(d2_act(t, "-r 0 -b 2 -d 256")), ["docs/memory.md"]),
    "bench.saved_accum": (lambda t: "%s B (%.0f%%)" % (commas(d2_act(t, "-r 0") - d2_act(t, "-r 0 -b 2 -d 256")),
                                                      100 * (1 - d2_act(t, "-r 0 -b 2 -d 256") / d2_act(t, "-r 0"))), ["docs/memory.md"]),
    "bench.z0": (lambda t: mib2(d2_states(t, 0)), ["docs/memory.md"]),
    "bench.z1": (lambda t: mib2(d2_states(t, 1)), ["docs/memory.md"]),
    "bench.z2": (lambda t: mib2(d2_states(t, 2)), ["docs/memory.md"]),
    "bench.saved_z1": (lambda t: "%s B (%.1f%%)" % (commas(d2_states(t, 0) - d2_states(t, 1)), 100 * (1 - d2_states(t, 1) / d2_states(t, 0))),
                       ["docs/memory.md"]),
    "bench.saved_z2": (lambda t: "%s B (%.1f%%)" % (commas(d2_states(t, 0) - d2_states(t, 2)), 100 * (1 - d2_states(t, 2) / d2_states(t, 0))),
                       ["docs/memory.md"]),
    "bench.psi": (lambda t: commas(t.plan(D2)["model"]["parameters"]), ["docs/memory.md"]),
    "bench.traffic": (lambda t: commas(next(i["sent"] for i in t.plan(D2 + " -z 0 --ranks 2")["communication"]["items"]
                                            if i["what"].startswith("gradients"))), ["docs/memory.md"]),
    # docs/memory.md, "Often-quoted figures, checked": planned bytes, predicted steps (A6000, H100)
    "claims.mp_saved_pct": (lambda t: "%.0f%%" % (100 * (1 - t.plan(D48 + " -r 0")["device_total"] /
                                                         t.plan(D48.replace("fp16", "fp32") + " -r 0")["device_total"])),
                            ["docs/memory.md"]),
    "claims.act_saved_r123": (lambda t: " / ".join(act_saved_pct(t, "-b 8 -r %d" % r, "-b 8 -r 0") for r in (1, 2, 3)),
                              ["docs/memory.md"]),
    "claims.cost_r123_a6000": (lambda t: " / ".join(cost_pct(t, D48 + " -r %d" % r, D48 + " -r 0", "a6000") for r in (1, 2, 3)),
                               ["docs/memory.md"]),
    "claims.cost_r123_h100": (lambda t: " / ".join(cost_pct(t, D48 + " -r %d" % r, D48 + " -r 0", "h100") for r in (1, 2, 3)),
                              ["docs/memory.md"]),
    "claims.cost_r1_both": (lambda t: " / ".join(cost_pct(t, D48 + " -r 1", D48 + " -r 0", g) for g in ("a6000", "h100")), ["docs/memory.md"]),
    "claims.cost_r2_both": (lambda t: " / ".join(cost_pct(t, D48 + " -r 2", D48 + " -r 0", g) for g in ("a6000", "h100")), ["docs/memory.md"]),
    "claims.cost_r3_both": (lambda t: " / ".join(cost_pct(t, D48 + " -r 3", D48 + " -r 0", g) for g in ("a6000", "h100")), ["docs/memory.md"]),
    "claims.k_default": (lambda t: str(t.plan(D48 + " -r 3")["options"]["recompute_every"]), ["docs/memory.md"]),
    "claims.act_k_default": (lambda t: gib(activations(t, "-b 8 -r 3")), ["docs/memory.md"]),
    "claims.act_k7": (lambda t: gib(activations(t, "-b 8 -r 3 --recompute-every 7")), ["docs/memory.md"]),
    "claims.act_k48": (lambda t: gib(activations(t, "-b 8 -r 3 --recompute-every 48")), ["docs/memory.md"]),
    "claims.cost_k7_a6000": (lambda t: cost_pct(t, D48 + " -r 3 --recompute-every 7", D48 + " -r 3", "a6000"), ["docs/memory.md"]),
    "claims.z3n8_gib": (lambda t: gib(t.plan(D48 + " -r 3 -z 3 --ranks 8")["device_total"]), ["docs/memory.md"]),
    "claims.z3n8_states_gb": (lambda t: "%.2f" % (model_states(t, 3, 8) / 1e9), ["docs/memory.md"]),
    "claims.mb_cost_a6000": (lambda t: cost_pct(t, D48.replace("-b 8", "-b 4") + " -r 3 -d 8192", D48 + " -r 3", "a6000"),
                             ["docs/memory.md"]),
    "claims.mb_cost_h100": (lambda t: cost_pct(t, D48.replace("-b 8", "-b 4") + " -r 3 -d 8192", D48 + " -r 3", "h100"),
                            ["docs/memory.md"]),
    "claims.mb_saved_gib": (lambda t: gib(t.plan(D48 + " -r 3")["device_total"] - t.plan(D48.replace("-b 8", "-b 4") + " -r 3 -d 8192")["device_total"]),
                            ["docs/memory.md"]),
    "claims.a6000_fp16_ms": (lambda t: "%.0f" % step_ms(t, D48 + " -r 0", "a6000"), ["docs/memory.md", "README.md"]),
    "claims.cost_r3_a6000": (lambda t: cost_pct(t, D48 + " -r 3", D48 + " -r 0", "a6000"), ["README.md"]),
    "claims.h100_fp16_ms": (lambda t: "%.0f" % step_ms(t, D48 + " -r 0", "h100"), ["docs/memory.md"]),
    "claims.a6000_recipe_s": (lambda t: "%.1f" % (step_ms(t, D48 + " -r 0 -d 524288", "a6000") / 1e3), ["docs/memory.md"]),
    "claims.a6000_recipe_tps": (lambda t: "{:,.0f}".format(524288 / (step_ms(t, D48 + " -r 0 -d 524288", "a6000") / 1e3)),
                                ["docs/memory.md"]),
    "claims.h100_recipe_tps": (lambda t: "{:,.0f}".format(524288 / (step_ms(t, D48 + " -r 0 -d 524288", "h100") / 1e3)),
                               ["docs/memory.md"]),
    # docs/memory.md, section 6: offload's time
    "off.copies_ms": (lambda t: "%.0f" % (off_comm(t)["host_seconds"] * 1e3), ["docs/memory.md"]),
    "off.adamw_ms": (lambda t: "%.0f" % (off_comm(t)["host_update_seconds"] * 1e3), ["docs/memory.md"]),
    "off.exposed_ms": (lambda t: "%.0f" % (off_comm(t)["exposed_seconds"] * 1e3), ["docs/memory.md"]),
    "off.a6000_base_ms": (lambda t: "%.0f" % (off_comm(t, None)["step_seconds"] * 1e3), ["docs/memory.md"]),
    "off.a6000_opt_ms": (lambda t: "%.0f" % (off_comm(t)["step_seconds"] * 1e3), ["docs/memory.md"]),
    "off.a6000_grads_ms": (lambda t: "%.0f" % (off_comm(t, "grads")["step_seconds"] * 1e3), ["docs/memory.md"]),
    "comm.z1_forward_ms": (lambda t: "%.1f" % (comm(t, 1)["forward_seconds"] * 1e3), ["docs/memory.md"]),
    "comm.z1_pcie_gather_ms": (lambda t: z1_gather_ms(t, "pcie"), ["docs/memory.md"]),
    "kr.fa3_over_ours_pct": (lambda t: "%.0f" % (100 * (fa3_row(t)["measured"] / fa3_row(t)["predicted"] - 1)), ["docs/speed.md"]),
    "kr.step_margin_pct": (step_margin_pct, ["docs/speed.md", "docs/guide.md"]),
    "recipe.gib": (recipe_gib, ["README.md", "docs/guide.md", "docs/memory.md"]),
    "kr.d48_h100_ours": (lambda t: "%.1f" % kr_side(t, "H100 SXM", "d48", "ours_ms"), ["README.md"]),
    "kr.d48_h100_llmc": (lambda t: "%.1f" % kr_side(t, "H100 SXM", "d48", "llmc_ms"), ["README.md"]),
    "kr.side_by_side": (kr_side_table, ["docs/speed.md"]),
    "kr.cal_124m_ms": (lambda t: kr_calibration(t, "llm.c GPT-2 124M, 8x A100 80GB SXM: step", "%.0f", 1e3),
                       ["docs/speed.md", "docs/guide.md"]),
    "kr.flash_h100_1k_f": (lambda t: kr_ours_attention(t, "H100 SXM", 1024, False), ["docs/speed.md"]),
    "kr.flash_h100_1k_fb": (lambda t: kr_ours_attention(t, "H100 SXM", 1024, True), ["docs/speed.md"]),
    "kr.flash_h100_2k_f": (lambda t: kr_ours_attention(t, "H100 SXM", 2048, False), ["docs/speed.md"]),
    "kr.flash_h100_2k_fb": (lambda t: kr_ours_attention(t, "H100 SXM", 2048, True), ["docs/speed.md"]),
    "kr.flash_a100_1k_fb": (lambda t: kr_ours_attention(t, "A100 SXM 80GB", 1024, True), ["docs/speed.md"]),
    "kr.target_step_ratio": (lambda t: "%.3f" % (kr_side(t, "H100 SXM", "d48", "ours_ms") / kr_side(t, "H100 SXM", "d48", "llmc_ms")),
                             ["docs/speed.md"]),
    "kr.target_step_bar": (lambda t: kr_target(t, "d48 step", "bar", "%.1f"), ["docs/speed.md"]),
    "kr.target_ln": (lambda t: kr_target(t, "LayerNorm", "ours", "%.1f"), ["docs/speed.md"]),
    "kr.target_ln_bar": (lambda t: kr_target(t, "LayerNorm", "bar", "%.1f"), ["docs/speed.md"]),
    "kr.target_gelu": (lambda t: kr_target(t, "GELU", "ours", "%.1f"), ["docs/speed.md"]),
    "kr.target_adamw": (lambda t: kr_target(t, "optimizer", "ours", "%.2f"), ["docs/speed.md"]),
    "kr.target_adamw_bar": (lambda t: kr_target(t, "optimizer", "bar", "%.2f"), ["docs/speed.md"]),
    "kr.target_classifier": (lambda t: kr_target(t, "classifier", "ours", "%.3f"), ["docs/speed.md"]),
    "kr.target_classifier_bar": (lambda t: kr_target(t, "classifier", "bar", "%.3f"), ["docs/speed.md"]),
    "kr.fam_matmul": (lambda t: "%.1f" % kr_family(t, "matmul (cuBLASLt)", "ours"), ["docs/speed.md"]),
    "kr.fam_llmc_gelu_bias": (lambda t: "%.1f" % (kr_family(t, "GELU", "llmc") + kr_family(t, "bias gradient", "llmc")), ["docs/speed.md"]),
    "kr.fam_att_ours": (lambda t: "%.1f" % kr_family(t, "attention", "ours"), ["docs/speed.md"]),
    "kr.fam_att_llmc": (lambda t: "%.1f" % kr_family(t, "attention", "llmc"), ["docs/speed.md"]),
    "sass.fwd_wgmma": (lambda t: sass_loop(t, "attention_forward_flash_wgmma_kernel<__half, 64>"), ["docs/speed.md"]),
    "sass.fwd_wgmma_hgmma": (lambda t: sass_loop(t, "attention_forward_flash_wgmma_kernel<__half, 64>", "HGMMA"), ["docs/speed.md"]),
    "sass.fwd_wgmma_mufu": (lambda t: sass_loop(t, "attention_forward_flash_wgmma_kernel<__half, 64>", "MUFU"), ["docs/speed.md"]),
    "sass.dq_wgmma": (lambda t: sass_loop(t, "flash_backward_dq_wgmma_kernel<__half, 64>"), ["docs/speed.md"]),
    "sass.kv_wgmma": (lambda t: sass_loop(t, "flash_backward_kv_wgmma_kernel<__half, 64>"), ["docs/speed.md"]),
    "sass.fwd_mma": (lambda t: sass_loop(t, "attention_forward_flash_kernel<__half, 64>"), ["docs/speed.md"]),
    "sass.dq_mma": (lambda t: sass_loop(t, "flash_backward_dq_kernel<__half, 64>"), ["docs/speed.md"]),
    "sass.kv_mma": (lambda t: sass_loop(t, "flash_backward_kv_kernel<__half, 64>"), ["docs/speed.md"]),
    "kr.cal_1558m_s": (lambda t: kr_calibration(t, "llm.c GPT-2 1558M, 8x H100 SXM: step", "%.2f"), ["docs/speed.md", "docs/guide.md"]),
}


README_MAX_LINES = 200  # README is a door: what it is, the two commands, the doors, where it stands, links


def heading_anchors(path):
    """The anchors GitHub gives a Markdown file's headings (lower case, punctuation dropped, spaces
    to hyphens), headings inside fenced code left out."""
    out, fence = set(), False
    for line in open(path, encoding="utf-8"):
        if line.startswith("```"):
            fence = not fence
            continue
        m = None if fence else re.match(r"#+ (.*)", line)
        if m:
            out.add(re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-"))
    return out


def check_links(root, files):
    """Every relative link of FILES names a file that exists and, with #anchor into Markdown, a heading
    it has; README.md is at most README_MAX_LINES lines. Returns the number of failures."""
    failed = 0
    readme = os.path.join(root, "README.md")
    n = sum(1 for _ in open(readme, encoding="utf-8"))
    if n <= README_MAX_LINES:
        print("PASS README.md: %d lines (at most %d)" % (n, README_MAX_LINES))
    else:
        print("FAIL README.md: %d lines, more than %d (move the details to docs/, with a link)" % (n, README_MAX_LINES))
        failed += 1
    links = 0
    for f in files:
        text = re.sub(r"```.*?```", "", open(f, encoding="utf-8").read(), flags=re.S)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target):
                continue
            links += 1
            path, _, frag = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(f), path)) if path else f
            why = None
            if not os.path.exists(dest):
                why = "no such file"
            elif frag and dest.endswith(".md") and frag not in heading_anchors(dest):
                why = "no such heading in %s" % os.path.relpath(dest, root)
            if why:
                print("FAIL doc link %s in %s: %s" % (target, os.path.relpath(f, root), why))
                failed += 1
    if not failed:
        print("PASS doc links: %d relative links in %d files resolve, anchors included" % (links, len(files)))
    return failed


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="write the tools' figures into the marks")
    ap.add_argument("--root", default=REPO, help="the tree whose README.md and docs/*.md are read")
    a = ap.parse_args()
    files = [os.path.join(a.root, "README.md")] + sorted(glob.glob(os.path.join(a.root, "docs", "*.md")))
    tools = Tools()
    values = {}
    failed = 0
    seen = {name: [] for name in FIGURES}
    for path in files:
        rel = os.path.relpath(path, a.root)
        text = open(path, encoding="utf-8").read()

        def replace(m):
            nonlocal failed
            name, old = m.group(1), m.group(2)
            if name not in FIGURES:
                print("FAIL doc figure %s in %s: no such figure (scripts/doc_figures.py's FIGURES)" % (name, rel))
                failed += 1
                return m.group(0)
            seen[name].append(rel)
            if name not in values:
                values[name] = FIGURES[name][0](tools)
            new = values[name]
            block = old.startswith("\n")
            if block:
                new = "\n" + new + "\n"
            if old == new:
                print("PASS doc figure %s in %s: %s" % (name, rel, "a block of %d lines" % (new.count("\n") - 1) if block else new))
            elif a.write:
                print("wrote doc figure %s in %s" % (name, rel))
            else:
                first = next((o, n) for o, n in zip(old.splitlines() + [""], new.splitlines() + [""]) if o != n)
                print("FAIL doc figure %s in %s: the tool prints %r where the doc says %r (scripts/doc_figures.py --write, "
                      "or make docs)" % (name, rel, first[1][:160], first[0][:160]))
                failed += 1
            return "<!-- fig %s -->%s<!-- /fig -->" % (name, new if a.write else old)

        out = MARK.sub(replace, text)
        if a.write and out != text:
            tmp = path + ".tmp"
            open(tmp, "w", encoding="utf-8").write(out)
            os.replace(tmp, path)
    for name, (_, where) in FIGURES.items():
        for rel in where:
            if rel not in seen[name]:
                print("FAIL doc figure %s: not marked in %s, where it belongs (<!-- fig %s -->...<!-- /fig -->)" % (name, rel, name))
                failed += 1
    if not a.write:
        failed += check_links(a.root, [os.path.join(a.root, f) for f in ("data/README.md", "test/cuda_cpu/README.md")
                                       if os.path.exists(os.path.join(a.root, f))] + files)
    sys.exit(1 if failed and not a.write else 0)


if __name__ == "__main__":
    main()
