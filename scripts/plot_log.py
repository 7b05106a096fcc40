#!/usr/bin/env python3
"""plot_log.py: draws one run's log, or several runs' logs over each other, to a PNG.

    scripts/plot_log.py RUN [RUN...] [-o plot.png] [--label NAME ...] [--smooth N] [--summary]

RUN is a log file or an output dir (its log.jsonl, else its main.log): this trainer's log.jsonl,
or main.log in llm.c's format (`s:N trl:LOSS lr:LR norm:NORM`, `s:N tel:LOSS`, `s:N eval:ACC`),
which this trainer writes beside log.jsonl and llm.c writes alone; so a run here and an llm.c run
overlay on one figure. Panels: train loss (and val loss, dashed), learning rate, gradient norm,
tokens/s, device memory and HellaSwag accuracy, each drawn when some run logged it. The x axis is
the step as log.jsonl counts it (updates done; main.log's train line s:N is step N + 1).
--smooth N draws the train loss as a moving mean over N steps. --summary prints what was read from
each run, one line each, and draws nothing unless -o is given too.
"""
import argparse
import json
import math
import os
import sys


def fail(msg):
    print("error: " + msg, file=sys.stderr)
    sys.exit(1)


def python_with_matplotlib():
    """Another Python that imports matplotlib (Debian's first), or None; never twice (no loop)."""
    if os.environ.get("PLOT_LOG_REEXEC"):
        return None
    import subprocess
    for py in ("/usr/bin/python3", "/usr/local/bin/python3"):
        if os.access(py, os.X_OK) and subprocess.run([py, "-c", "import matplotlib"], stdout=subprocess.DEVNULL,
                                                     stderr=subprocess.DEVNULL).returncode == 0:
            return py
    return None


def resolve(path):
    """A log file, or the log in an output dir."""
    if os.path.isdir(path):
        for name in ("log.jsonl", "main.log"):
            p = os.path.join(path, name)
            if os.path.isfile(p):
                return p
        fail("%s holds neither log.jsonl nor main.log" % path)
    if not os.path.isfile(path):
        fail("%s: no such log file or output dir" % path)
    return path


def read_log(path):
    """{series: [(step, value), ...]} from either format; the format is told by the first line."""
    series = {k: [] for k in ("train_loss", "val_loss", "lr", "grad_norm", "tok_per_s", "memory_mib", "hellaswag")}
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = [l.strip() for l in f if l.strip()]
    if not lines:
        fail("%s is empty" % path)
    kind = "jsonl" if lines[0].startswith("{") else "main.log"
    for n, line in enumerate(lines, 1):
        if kind == "jsonl":
            try:
                rec = json.loads(line)
            except ValueError:
                if n == len(lines):
                    continue  # a last line cut off by a crash
                fail("%s line %d is not JSON: %s" % (path, n, line[:80]))
            step = rec.get("step")
            for key, name in (("train_loss", "train_loss"), ("val_loss", "val_loss"), ("lr", "lr"),
                              ("grad_norm", "grad_norm"), ("tok_per_s", "tok_per_s"), ("memory_mib", "memory_mib"),
                              ("hellaswag", "hellaswag")):
                v = rec.get(key)
                if step is not None and v is not None:
                    series[name].append((step, float(v)))
        else:
            fields = dict(p.split(":", 1) for p in line.split() if ":" in p)
            try:
                s = int(fields["s"])
                if "trl" in fields:
                    series["train_loss"].append((s + 1, float(fields["trl"])))
                    if "lr" in fields:
                        series["lr"].append((s + 1, float(fields["lr"])))
                    if "norm" in fields:
                        series["grad_norm"].append((s + 1, float(fields["norm"])))
                elif "tel" in fields:
                    series["val_loss"].append((s, float(fields["tel"])))
                elif "eval" in fields:
                    series["hellaswag"].append((s, float(fields["eval"])))
            except (KeyError, ValueError):
                if n == len(lines):
                    continue
                fail("%s line %d is not llm.c's main.log format: %s" % (path, n, line[:80]))
    return kind, series


def smooth(points, n):
    if n <= 1 or len(points) < 2:
        return points
    out, total, window = [], 0.0, []
    for step, v in points:
        window.append(v)
        total += v
        if len(window) > n:
            total -= window.pop(0)
        out.append((step, total / len(window)))
    return out


def main():
    ap = argparse.ArgumentParser(description="Plot training logs (log.jsonl or llm.c's main.log) to a PNG.")
    ap.add_argument("runs", nargs="+", help="log files or output dirs")
    ap.add_argument("-o", "--output", help="the PNG to write (default: plot.png, or nothing with --summary)")
    ap.add_argument("--label", action="append", default=[], help="a name per run, in order (default: the path)")
    ap.add_argument("--smooth", type=int, default=1, help="moving mean of the train loss over N steps")
    ap.add_argument("--summary", action="store_true", help="print what was read from each run")
    a = ap.parse_args()
    if a.smooth < 1:
        fail("--smooth must be at least 1, got %d" % a.smooth)
    if a.label and len(a.label) != len(a.runs):
        fail("--label given %d times for %d runs" % (len(a.label), len(a.runs)))
    runs = []
    for i, r in enumerate(a.runs):
        path = resolve(r)
        kind, series = read_log(path)
        runs.append((a.label[i] if a.label else r, path, kind, series))
    if a.summary:
        for label, path, kind, s in runs:
            def last(name):
                return "%.6g" % s[name][-1][1] if s[name] else "-"
            print("%s: %s (%s): %d train points (last step %s, loss %s), %d val points (last %s), lr last %s, "
                  "norm last %s, %d hellaswag points" %
                  (label, path, kind, len(s["train_loss"]), s["train_loss"][-1][0] if s["train_loss"] else "-",
                   last("train_loss"), len(s["val_loss"]), last("val_loss"), last("lr"), last("grad_norm"),
                   len(s["hellaswag"])))
        if not a.output:
            return
    out = a.output or "plot.png"

    try:
        import matplotlib
    except ImportError:
        # The python3 first on PATH (pyenv, a venv) may lack matplotlib where Debian's has it: run again
        # under a Python that has it, as scripts/memory_ladder.sh picks one.
        other = python_with_matplotlib()
        if other:
            print("(drawing with %s, which has matplotlib; %s lacks it)" % (other, sys.executable), flush=True)
            os.environ["PLOT_LOG_REEXEC"] = "1"
            os.execv(other, [other] + sys.argv)
        fail("drawing needs matplotlib, which %s lacks (pip install matplotlib, or Debian's python3-matplotlib and "
             "/usr/bin/python3); --summary needs nothing" % sys.executable)
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [("loss", ["train_loss", "val_loss"]), ("learning rate", ["lr"]), ("gradient norm", ["grad_norm"]),
              ("tokens/s", ["tok_per_s"]), ("device memory (MiB)", ["memory_mib"]), ("HellaSwag acc_norm", ["hellaswag"])]
    panels = [(t, keys) for t, keys in panels if any(r[3][k] for r in runs for k in keys)]
    if not panels:
        fail("nothing to plot: the logs hold no steps")
    cols = 2 if len(panels) > 1 else 1
    rows = math.ceil(len(panels) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(6.5 * cols, 3.8 * rows), squeeze=False)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for idx, (title, keys) in enumerate(panels):
        ax = axes[idx // cols][idx % cols]
        for ri, (label, _, _, s) in enumerate(runs):
            c = colors[ri % len(colors)]
            for k in keys:
                pts = s[k]
                if k == "train_loss":
                    pts = smooth(pts, a.smooth)
                if not pts:
                    continue
                xs, ys = zip(*pts)
                style = "--" if k == "val_loss" else "-"
                marker = "o" if k in ("val_loss", "hellaswag") and len(pts) < 50 else None
                name = label + (" val" if k == "val_loss" else " train" if k == "train_loss" else "")
                ax.plot(xs, ys, style, color=c, marker=marker, markersize=3, linewidth=1.2, label=name)
        ax.set_title(title)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
        if title == "loss" or len(runs) > 1:
            ax.legend(fontsize=8)
    for idx in range(len(panels), rows * cols):
        axes[idx // cols][idx % cols].axis("off")
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    print("plot_log: wrote %s (%s; %d run%s)" % (out, ", ".join(t for t, _ in panels), len(runs), "" if len(runs) == 1 else "s"))


if __name__ == "__main__":
    main()
