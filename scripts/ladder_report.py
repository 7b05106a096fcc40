#!/usr/bin/env python3
# ladder_report.py: the memory ladder's table and chart, from what scripts/memory_ladder.sh left in
# OUT: rows.tsv (per row: number, label, the row it changes, ranks, flags, status, measured peak MiB,
# tokens/s) and plans/NN.json (the planner's `--plan --json` for each row). Writes OUT/ladder.md
# (GiB per component and per rank), OUT/ladder.json (the same numbers, for scripts and tests) and
# OUT/ladder.png (stacked bars per component; needs matplotlib: Debian's python3-matplotlib; without
# it one line says so and the table is still written). Standard library otherwise.
#
#   python3 scripts/ladder_report.py OUT MODEL T B BUDGET_LABEL BUDGET_BYTES
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
    "gradients": "gradients",
    "gradient buckets": "gradients",
    "gradient shard": "gradients",
    "gradient accumulator (fp32)": "gradients",
    "master weights (fp32)": "master",
    "AdamW m (fp32)": "m",
    "AdamW v (fp32)": "v",
    "activations": "activations",
}
COLORS = {"parameters": "#4c72b0", "gradients": "#dd8452", "master": "#55a868", "m": "#8fbc8f",
          "v": "#c7e9c0", "activations": "#c44e52", "other": "#8172b3", "estimates": "#bbbbbb"}


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
    T, B, budget_bytes = int(T), int(B), int(budget_bytes)
    rows = []
    with open(os.path.join(out, "rows.tsv")) as f:
        for line in f:
            num, label, frm, ranks, flags, status, peak, toks = line.rstrip("\n").split("\t")
            plan = json.load(open(os.path.join(out, "plans", f"{int(num):02d}.json")))
            rows.append({
                "row": int(num), "step": label, "from": None if frm == "-" else int(frm), "ranks": int(ranks),
                "flags": flags, "status": status,
                "bytes": split_plan(plan), "device_total": plan["device_total"], "host_bytes": plan["host_bytes"],
                "fits": plan["device_total"] <= budget_bytes,
                "measured_peak_bytes": int(float(peak) * 1048576) if peak else None,
                "tokens_per_s_per_gpu": float(toks) / int(ranks) if toks else None,
            })
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
    lines.append(f"GPT-2 {model} ({params:,} parameters), T={T}, micro-batch {B} per rank: device memory per rank "
                 f"in GiB (2^30 bytes), {'measured where a row says so, planned otherwise' if any_measured else 'planned (no GPU ran these rows)'}.")
    lines.append("")
    head = ["#", "step", "from", "flags", "ranks"] + COLUMNS + ["total per rank", "host", f"fits {budget_label}",
                                                                 "measured peak", "tok/s per GPU"]
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
        cells = [str(r["row"]), r["step"], str(r["from"]) if r["from"] else "–", f"`{r['flags']}`", str(r["ranks"])]
        cells += [gib(r["bytes"][c]) for c in COLUMNS]
        cells += [f"**{gib(r['device_total'])}**", gib(r["host_bytes"]), "yes" if r["fits"] else "no", peak, toks]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    lines.append("Columns: *gradients* are every device gradient buffer (the full-size one, or ZeRO-2's and "
                 "offload's per-layer buckets, gradient shard and fp32 accumulator); *master*, *m*, *v* the fp32 "
                 "optimizer state on the device (on the host with --offload; none in FP32, where the parameters "
                 "are the master weights); *other* scratch, cuBLASLt's workspace and checkpoint staging; "
                 "*estimates* the CUDA context (512 MiB) and NCCL's buffers (384 MiB with ranks > 1), estimated; "
                 "*host* pinned host memory (offloaded optimizer state and buffers). "
                 "*from*: the row this one changes. Rows 1-5 and the last three run on one GPU; the ZeRO rows "
                 "take the same micro-batch on each of their ranks (so more tokens per step).")
    if base:
        lines.append(f"Tokens/s per GPU as % of row {base['row']} ({base['step']}); the measured peak is the "
                     "trainer's own (`device memory: at most`), beside its plan.")
    table = "\n".join(lines) + "\n"
    with open(os.path.join(out, "ladder.md"), "w") as f:
        f.write(table)
    with open(os.path.join(out, "ladder.json"), "w") as f:
        json.dump({"model": model, "parameters": params, "T": T, "B": B, "budget_bytes": budget_bytes,
                   "columns": COLUMNS, "rows": rows}, f, indent=1)
    print(table, end="")
    chart(rows, out, model, T, B, budget_label, budget_bytes, any_measured)


def chart(rows, out, model, T, B, budget_label, budget_bytes, any_measured):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"ladder_report: no matplotlib for {sys.executable} (Debian: apt-get install python3-matplotlib); "
              "table written, no chart")
        return
    fig, ax = plt.subplots(figsize=(13, 6.5))
    x = list(range(len(rows)))
    bottom = [0.0] * len(rows)
    for c in COLUMNS:
        h = [r["bytes"][c] / GIB for r in rows]
        ax.bar(x, h, bottom=bottom, color=COLORS[c], label=c, edgecolor="white", linewidth=0.5)
        bottom = [b + v for b, v in zip(bottom, h)]
    for i, r in enumerate(rows):
        ax.text(i, bottom[i] + 0.6, f"{r['device_total'] / GIB:.1f}", ha="center", va="bottom", fontsize=8)
        if r["measured_peak_bytes"]:
            ax.plot(i, r["measured_peak_bytes"] / GIB, marker="D", color="black", markersize=5,
                    label="measured peak" if not any(rr["measured_peak_bytes"] for rr in rows[:i]) else None)
    ax.axhline(budget_bytes / GIB, color="black", linestyle="--", linewidth=1)
    ax.text(len(rows) - 0.5, budget_bytes / GIB + 0.5, budget_label, ha="right", va="bottom", fontsize=9)
    ax.set_xticks(x)
    ax.set_xticklabels([f"{r['row']}. {r['step']}" + (f" [{r['ranks']} ranks]" if r["ranks"] > 1 and "ranks" not in r["step"] else "")
                        for r in rows], rotation=35, ha="right", fontsize=8)
    ax.set_ylabel("GiB per rank (device)")
    ax.set_title(f"GPT-2 {model}, T={T}, micro-batch {B}: device memory per rank by component"
                 + ("" if any_measured else " (planned)"))
    handles, names = ax.get_legend_handles_labels()
    ax.legend(handles[::-1], names[::-1], fontsize=8, ncol=2, loc="upper right")  # top of the stack first
    ax.set_ylim(0, max(bottom + [budget_bytes / GIB]) * 1.12)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "ladder.png"), dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    main()
