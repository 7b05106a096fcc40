#!/usr/bin/env python3
# ladder_report.py: the memory ladder's table and chart, from what scripts/memory_ladder.sh left in
# OUT: rows.tsv (per row: number, label, the row it changes, ranks, flags, status, measured peak MiB,
# tokens/s) and plans/NN.json (the planner's `--plan --json` for each row). Writes OUT/ladder.md
# (GiB per component and per rank), OUT/ladder.json (the same numbers, for scripts and tests) and
# OUT/ladder.png (stacked bars per component, one panel per ladder path: the trunk, then each branch
# starting from the row it branches from, drawn again; pinned host memory as a bar beside each
# device bar; each bar's micro-batch and tokens per step under it; needs matplotlib: Debian's
# python3-matplotlib; without it one line says so and the table is still written). Standard library
# otherwise.
#
# The time table: each row's predicted step on each GPU of --time-gpus (plans/NN.GPU.json, the
# planner's `--plan --gpu GPU`: the kernel report's model where its counts cover the row, else the
# stated MFU estimate, marked), tokens/s per GPU, MFU and the change in tokens/s per GPU against the
# row it comes from; the chart draws the first GPU's step time beside the memory.
#
#   python3 scripts/ladder_report.py OUT MODEL T B BUDGET_LABEL BUDGET_BYTES [--no-chart] [--time-gpus "a6000 h100"]
import json
import os
import sys

GIB = float(1 << 30)

# The table's columns: each planner component goes to one of them (device components only; host
# ones are summed into "host"). Anything the planner adds later lands in "other" (device) or
# "estimates" (when marked as an estimate), so the columns always add up to the plan's total.
COLUMNS = ["parameters", "gradients", "master", "m", "v", "activations", "other", "estimates"]
COMPONENT_COLUMN = {
    "parameters": "parameters",
    "parameter shard": "parameters",
    "parameter gather buffers": "parameters",
    "gradients": "gradients",
    "gradient buckets": "gradients",
    "gradient shard": "gradients",
    "gradient accumulator (fp32)": "gradients",
    "master weights (fp32)": "master",
    "AdamW m (fp32)": "m",
    "AdamW v (fp32)": "v",
    "activations": "activations",
}
# One hue per component, far apart (Paul Tol's "bright" scheme and orange), so master, m and v read
# as three things; estimates hatched grey; host memory as a separate hatched bar beside the device one.
COLORS = {"parameters": "#4477aa", "gradients": "#ee7733", "master": "#228833", "m": "#ccbb44",
          "v": "#66ccee", "activations": "#ee6677", "other": "#aa3377", "estimates": "#bbbbbb"}
HOST_COLOR = "#666666"


def flag_value(flags, name, default=None):
    f = flags.split()
    return f[len(f) - 1 - f[::-1].index(name) + 1] if name in f else default


def ladder_paths(rows):
    """The rows as a trunk and its branches: each row names the row it changes ("from"). The trunk
    runs from the first row while each row has one successor; at a row with several, each successor
    starts a branch (following single successors). Returns [(title, parent row or None, [rows])]."""
    by_num = {r["row"]: r for r in rows}
    children = {}
    for r in rows:
        if r["from"]:
            children.setdefault(r["from"], []).append(r["row"])

    def chain(start):
        out = [start]
        while len(children.get(out[-1], [])) == 1:
            out.append(children[out[-1]][0])
        return out

    roots = [r["row"] for r in rows if not r["from"]]
    paths = []
    todo = [(None, root) for root in roots]
    while todo:
        parent, start = todo.pop(0)
        c = chain(start)
        paths.append((parent, [by_num[n] for n in c]))
        for k in children.get(c[-1], []) if len(children.get(c[-1], [])) > 1 else []:
            todo.append((c[-1], k))
    return paths


def split_plan(plan):
    cols = dict.fromkeys(COLUMNS, 0)
    for c in plan["components"]:
        if c["where"] != "device":
            continue
        col = "estimates" if c["estimate"] else COMPONENT_COLUMN.get(c["name"], "other")
        cols[col] += c["bytes"]
    if sum(cols.values()) != plan["device_total"]:
        sys.exit(f"ladder_report: the columns add up to {sum(cols.values())}, the plan's device total is {plan['device_total']}")
    return cols


def gib(x):
    return f"{x / GIB:.2f}"


def main():
    out, model, T, B, budget_label, budget_bytes = sys.argv[1:7]
    rest = sys.argv[7:]
    draw = "--no-chart" not in rest
    time_gpus = rest[rest.index("--time-gpus") + 1].split() if "--time-gpus" in rest else []
    T, B, budget_bytes = int(T), int(B), int(budget_bytes)
    rows = []
    with open(os.path.join(out, "rows.tsv")) as f:
        for line in f:
            num, label, frm, ranks, flags, status, peak, toks = line.rstrip("\n").split("\t")
            plan = json.load(open(os.path.join(out, "plans", f"{int(num):02d}.json")))
            B_row = int(flag_value(flags, "-b", B))
            tokens = int(flag_value(flags, "-d", "-1"))
            if tokens <= 0:
                tokens = B_row * T * int(ranks)
            dp = int(ranks) // int(flag_value(flags, "-pp", "1"))  # with -pp a micro-step is B*T*(ranks / P)
            rows.append({
                "row": int(num), "step": label, "from": None if frm == "-" else int(frm), "ranks": int(ranks),
                "flags": flags, "status": status, "micro_batch": B_row, "tokens_per_step": tokens,
                "micro_steps": tokens // (B_row * T * dp),
                "bytes": split_plan(plan), "device_total": plan["device_total"], "host_bytes": plan["host_bytes"],
                "fits": plan["device_total"] <= budget_bytes,
                "measured_peak_bytes": int(float(peak) * 1048576) if peak else None,
                "tokens_per_s_per_gpu": float(toks) / int(ranks) if toks else None,
            })
            # The ZeRO rows' communication (the planner's, common/comm_plan.c): a rank's bytes sent a
            # step and their time at the planner's link, beside the predicted compute.
            c = plan.get("communication")
            if c and int(ranks) > 1:
                rows[-1].update({"comm_sent_per_step": c["sent_per_step"], "comm_link": c["link"]["name"],
                                 "comm_seconds": c["comm_seconds"], "comm_exposed_seconds": c["exposed_seconds"],
                                 "compute_seconds": c["compute_seconds"]})
            # The predicted step on each GPU named: compute (the kernel report's model, or the stated
            # estimate), the pipeline's bubble, the communication and offload the step does not hide.
            rows[-1]["time"] = {}
            m = plan["model"]
            flops_token = 6.0 * m["parameters"] + 6.0 * m["layers"] * m["channels"] * T
            for g in time_gpus:
                gp = json.load(open(os.path.join(out, "plans", f"{int(num):02d}.{g}.json")))["communication"]
                step = gp["step_seconds"]
                per_gpu = tokens / int(ranks) / step
                rows[-1]["time"][g] = {"gpu": gp["card"], "step_seconds": step, "compute_seconds": gp["compute_seconds"],
                                       "counted": gp["counted"], "time_model": gp["time_model"],
                                       "tokens_per_s_per_gpu": per_gpu, "mfu": flops_token * per_gpu / gp["peak_flops"]}
    if not rows:
        sys.exit("ladder_report: no rows")
    first = json.load(open(os.path.join(out, "plans", "01.json")))
    params = first["model"]["parameters"]

    # Tokens/s against the FP32 baseline when it was measured, else against the first measured row.
    measured = [r for r in rows if r["tokens_per_s_per_gpu"]]
    base = measured[0] if measured else None
    for r in rows:
        r["tokens_per_s_percent"] = (100.0 * r["tokens_per_s_per_gpu"] / base["tokens_per_s_per_gpu"]
                                     if base and r["tokens_per_s_per_gpu"] else None)

    any_measured = bool([r for r in rows if r["status"] == "measured"])
    lines = []
    lines.append(f"GPT-2 {model} ({params:,} parameters), T={T}: memory per rank in GiB (2^30 bytes), "
                 f"{'measured where a row says so, planned otherwise' if any_measured else 'planned (no GPU ran these rows)'}; "
                 "each row's micro-batch and tokens per optimizer step in its own columns.")
    lines.append("")
    links = sorted({r["comm_link"] for r in rows if r.get("comm_link")}) or ["nvlink"]
    head = ["#", "step", "from", "flags", "ranks", "micro-batch", "tokens per step"] + COLUMNS + [
        "total per rank", "host", f"fits {budget_label}", "comm GB a step per rank",
        f"comm ms at {'/'.join(links)} (exposed) / compute ms", "measured peak", "tok/s per GPU"]
    lines.append("| " + " | ".join(head) + " |")
    lines.append("|" + "|".join(["---"] * len(head)) + "|")
    for r in rows:
        if r["status"] == "measured":
            p = r["measured_peak_bytes"]
            peak = f"{gib(p)} ({100.0 * (p - r['device_total']) / r['device_total']:+.1f}% of plan)" if p else "–"
            if r["tokens_per_s_per_gpu"]:
                toks = f"{r['tokens_per_s_per_gpu']:,.0f} ({r['tokens_per_s_percent']:.0f}%)"
            else:
                toks = "–"
        else:
            peak = toks = r["status"]
        steps_note = f" ({r['micro_steps']} micro-steps)" if r["micro_steps"] > 1 else ""
        cells = [str(r["row"]), r["step"], str(r["from"]) if r["from"] else "–", f"`{r['flags']}`", str(r["ranks"]),
                 str(r["micro_batch"]), f"{r['tokens_per_step']:,}{steps_note}"]
        cells += [gib(r["bytes"][c]) for c in COLUMNS]
        cells += [f"**{gib(r['device_total'])}**", gib(r["host_bytes"]), "yes" if r["fits"] else "no"]
        if r.get("comm_sent_per_step") is not None:
            cells += [f"{r['comm_sent_per_step'] / 1e9:.3f}",
                      f"{r['comm_seconds'] * 1e3:.2f} ({r['comm_exposed_seconds'] * 1e3:.2f}) / {r['compute_seconds'] * 1e3:.0f}"]
        else:
            cells += ["–", "–"]
        cells += [peak, toks]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    lines.append("Columns: *parameters* are the floatX parameters (ZeRO-3: the rank's shard and the buffers each layer "
                 "is gathered into); *gradients* are every device gradient buffer (the full-size one, or ZeRO-2's and "
                 "offload's per-layer buckets, gradient shard and fp32 accumulator); *master*, *m*, *v* the fp32 "
                 "optimizer state on the device (on the host with --offload; none in FP32, where the parameters "
                 "are the master weights); *other* scratch, cuBLASLt's workspace and checkpoint staging; "
                 "*estimates* the CUDA context (512 MiB) and NCCL's buffers (384 MiB with ranks > 1), estimated; "
                 "*host* pinned host memory (offloaded optimizer state and buffers), not device memory but "
                 "memory all the same. *from*: the row this one changes (a branch where two rows change the same "
                 "one). The ZeRO rows take the same micro-batch on each of their ranks, so a step holds more tokens. "
                 "The pipeline rows (-pp P) are their largest stage's plan, a rank's figure (every stage's: "
                 "`--plan -pp P --ranks N`); a micro-step is B*T on each data-parallel replica, P of them a step, and "
                 "their comm is that rank's activations and gradients to and from its neighbouring stages and the "
                 "step's statistics. "
                 "*comm*: the bytes a rank sends the others per optimizer step (ring collectives, in the precision "
                 "sent; GB = 10^9 bytes), their time at the planner's link (an assumed bus bandwidth, "
                 "`--plan --link`), the part this engine does not overlap with compute, and the predicted compute "
                 "of the step (40% MFU of an H100 SXM; `--plan` says how): planned, never measured.")
    if base:
        lines.append(f"Tokens/s per GPU as % of row {base['row']} ({base['step']}); the measured peak is the "
                     "trainer's own (`device memory: at most`), beside its plan.")
    if time_gpus:
        lines += [""] + time_table(rows, time_gpus)
    table = "\n".join(lines) + "\n"
    with open(os.path.join(out, "ladder.md"), "w") as f:
        f.write(table)
    print(table, end="")
    panels = chart(rows, out, model, T, B, budget_label, budget_bytes, any_measured) if draw else chart_layout(rows)
    with open(os.path.join(out, "ladder.json"), "w") as f:
        json.dump({"model": model, "parameters": params, "T": T, "B": B, "budget_bytes": budget_bytes,
                   "columns": COLUMNS, "colors": COLORS, "host_color": HOST_COLOR, "panels": panels, "rows": rows},
                  f, indent=1)


def time_table(rows, gpus):
    """The time table's lines: per row and GPU the predicted ms a step, tokens/s per GPU, MFU and the
    change in tokens/s per GPU against the row it comes from; a row the kernel report's counts do not
    cover is marked and its reason listed once."""
    by_num = {r["row"]: r for r in rows}
    names = [rows[0]["time"][g]["gpu"] for g in gpus]
    head = ["#", "step", "from"]
    for n in names:
        head += [f"{n}: ms a step", "tok/s per GPU", "MFU", "vs from"]
    out = ["Predicted time of a step (the planner's `--plan --gpu`, by the kernel report's model: compute from the "
           "counted kernels, plus the pipeline's bubble and the communication and offload the step does not hide; "
           "never measured), tokens/s per GPU, MFU (model FLOPs, 6 per parameter per token and attention's, recompute "
           "not counted) and the change in tokens/s per GPU against the row it comes from:", "",
           "| " + " | ".join(head) + " |", "|" + "|".join(["---"] * len(head)) + "|"]
    notes = {}
    for r in rows:
        cells = [str(r["row"]), r["step"], str(r["from"]) if r["from"] else "–"]
        for g in gpus:
            t = r["time"][g]
            mark = ""
            if not t["counted"]:
                mark = notes.setdefault(t["time_model"], f" ({chr(ord('a') + len(notes))})")
            vs = "–"
            if r["from"]:
                f = by_num[r["from"]]["time"][g]
                vs = f"{100 * (t['tokens_per_s_per_gpu'] / f['tokens_per_s_per_gpu'] - 1):+.1f}%"
                if not f["counted"]:  # against an estimate: the change is the estimate's too
                    vs += notes.setdefault(f["time_model"], f" ({chr(ord('a') + len(notes))})")
            cells += [f"{t['step_seconds'] * 1e3:,.1f}{mark}", f"{t['tokens_per_s_per_gpu']:,.0f}",
                      f"{100 * t['mfu']:.1f}%", vs]
        out.append("| " + " | ".join(cells) + " |")
    for why, mark in notes.items():
        out += ["", f"{mark.strip()} compute at {why}."]
    return out


def chart_layout(rows):
    """The chart's panels: the trunk, then each branch with its parent row drawn again first (faded)
    so the branch point shows. Written into ladder.json for tests and tools."""
    panels = []
    for parent, path in ladder_paths(rows):
        if parent is None:
            title = f"one GPU, rows {path[0]['row']}-{path[-1]['row']}"
        else:
            ranks = max(r["ranks"] for r in path)
            more = "pipeline" if any("-pp" in r["flags"].split() for r in path) else "more GPUs (ZeRO)"
            title = (f"from row {parent}: " + (more if ranks > 1 else "one GPU again")
                     + f", rows {path[0]['row']}-{path[-1]['row']}")
        panels.append({"title": title, "parent": parent, "rows": ([parent] if parent else []) + [r["row"] for r in path]})
    return panels


def bar_label(r):
    ranks = f", {r['ranks']} ranks" if r["ranks"] > 1 else ""
    k = r["tokens_per_step"] / 1024
    tokens = f"{k:.0f}K" if k >= 1 else str(r["tokens_per_step"])
    return f"{r['row']}. {r['step']}\n-b {r['micro_batch']}{ranks}, {tokens} tok/step"


def chart(rows, out, model, T, B, budget_label, budget_bytes, any_measured):
    panels = chart_layout(rows)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.patches import Patch
    except ImportError:
        print(f"ladder_report: no matplotlib for {sys.executable} (Debian: apt-get install python3-matplotlib); "
              "table written, no chart")
        return panels
    by_num = {r["row"]: r for r in rows}
    widths = [len(p["rows"]) for p in panels]
    fig, axes = plt.subplots(1, len(panels), figsize=(2.5 + 1.1 * sum(widths), 7.0), sharey=True,
                             gridspec_kw={"width_ratios": widths})
    if len(panels) == 1:
        axes = [axes]
    top = max([r["device_total"] for r in rows] + [r["host_bytes"] for r in rows] + [budget_bytes]) / GIB
    time_top = max([t["step_seconds"] * 1e3 for r in rows for t in list(r.get("time", {}).values())[:1]] or [1.0])
    for ax, panel in zip(axes, panels):
        for i, n in enumerate(panel["rows"]):
            r = by_num[n]
            again = panel["parent"] is not None and i == 0  # the branch point, drawn again
            alpha = 0.35 if again else 1.0
            bottom = 0.0
            for c in COLUMNS:
                h = r["bytes"][c] / GIB
                ax.bar(i - 0.18, h, width=0.55, bottom=bottom, color=COLORS[c], alpha=alpha, edgecolor="white",
                       linewidth=0.5, hatch="//" if c == "estimates" else None)
                bottom += h
            ax.text(i - 0.18, bottom + top * 0.01, f"{r['device_total'] / GIB:.1f}", ha="center", va="bottom", fontsize=8,
                    alpha=alpha)
            if r["host_bytes"] >= 0.05 * GIB:  # pinned host memory: beside the device bar, not on it
                hb = r["host_bytes"] / GIB
                ax.bar(i + 0.28, hb, width=0.22, color="white", edgecolor=HOST_COLOR, hatch="xx", alpha=alpha, linewidth=0.8)
                ax.text(i + 0.28, hb + top * 0.01, f"+{hb:.1f}\nhost", ha="center", va="bottom", fontsize=7,
                        color=HOST_COLOR, alpha=alpha)
            if r["measured_peak_bytes"]:
                ax.plot(i - 0.18, r["measured_peak_bytes"] / GIB, marker="D", color="black", markersize=5, alpha=alpha)
        if r.get("time"):  # the first time GPU's predicted step, on its own axis
            g = next(iter(r["time"]))
            tx = ax.twinx()
            tx.plot(range(len(panel["rows"])), [by_num[n]["time"][g]["step_seconds"] * 1e3 for n in panel["rows"]],
                    color="black", marker="o", markersize=4, linewidth=1, linestyle=":")
            tx.set_ylim(0, time_top * 1.15)
            if ax is axes[-1]:
                tx.set_ylabel(f"predicted ms a step on the {r['time'][g]['gpu']} (dotted)")
            else:
                tx.set_yticklabels([])
        ax.axhline(budget_bytes / GIB, color="black", linestyle="--", linewidth=1)
        ax.set_xticks(range(len(panel["rows"])))
        ax.set_xticklabels([("(" + bar_label(by_num[n]).split("\n")[0] + ")\nbranch point")
                            if panel["parent"] is not None and i == 0 else bar_label(by_num[n])
                            for i, n in enumerate(panel["rows"])], rotation=40, ha="right", fontsize=7.5)
        ax.set_title(panel["title"], fontsize=9.5)
        ax.set_xlim(-0.7, len(panel["rows"]) - 0.3)
    axes[0].text(-0.6, budget_bytes / GIB + top * 0.01, f"budget {budget_label}", ha="left", va="bottom", fontsize=9)
    axes[0].set_ylabel("GiB per rank")
    axes[0].set_ylim(0, top * 1.15)
    handles = [Patch(facecolor=COLORS[c], hatch="//" if c == "estimates" else None, edgecolor="white",
                     label=("device: " if i == 0 else "") + c) for i, c in enumerate(COLUMNS)][::-1]
    handles.append(Patch(facecolor="white", edgecolor=HOST_COLOR, hatch="xx", label="host (pinned), beside the bar"))
    if any(r["measured_peak_bytes"] for r in rows):
        from matplotlib.lines import Line2D
        handles.append(Line2D([], [], marker="D", color="black", linestyle="none", label="measured peak"))
    axes[0].legend(handles=handles, fontsize=7.5, loc="upper right")
    if rows[0].get("time"):
        from matplotlib.lines import Line2D
        g = next(iter(rows[0]["time"]))
        handles.append(Line2D([], [], marker="o", color="black", linestyle=":", markersize=4,
                              label=f"predicted ms a step, {rows[0]['time'][g]['gpu']} (right axis)"))
        axes[0].legend(handles=handles, fontsize=7.5, loc="upper right")
    fig.suptitle(f"GPT-2 {model}, T={T}: memory per rank by component, each technique added to the row it changes"
                 + ("" if any_measured else " (planned)"), fontsize=11)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "ladder.png"), dpi=110)
    plt.close(fig)
    return panels


if __name__ == "__main__":
    main()
