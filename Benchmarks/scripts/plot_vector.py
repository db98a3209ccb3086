#!/usr/bin/env python3
"""Plots settee-bench's vector recall/QPS points (SETTEE_VECTOR_CSV) as recall@10 against queries/s.

    SETTEE_VECTOR_CSV=/tmp/vector.csv .build/release/settee-bench vector
    python3 Benchmarks/scripts/plot_vector.py /tmp/vector.csv docs/vector-search.png
"""
import csv
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    source, target = sys.argv[1], sys.argv[2]
    series = defaultdict(list)
    datasets = []
    with open(source) as f:
        for row in csv.DictReader(f):
            if row["dataset"] not in datasets:
                datasets.append(row["dataset"])
            key = (row["dataset"], row["engine"], row["encoding"])
            series[key].append((int(row["nprobe"]), float(row["recall"]), float(row["qps"])))
    fig, axes = plt.subplots(1, len(datasets), figsize=(6.5 * len(datasets), 4.8), squeeze=False)
    styles = {("settee", "sq8"): ("tab:blue", "o", "-"), ("settee", "none"): ("tab:blue", "s", "--"),
              ("faiss", "sq8"): ("tab:orange", "o", "-"), ("faiss", "none"): ("tab:orange", "s", "--")}
    names = {"sq8": "IVF-SQ8", "none": "IVF-Flat"}
    for ax, dataset in zip(axes[0], datasets):
        for (ds, engine, encoding), points in sorted(series.items()):
            if ds != dataset:
                continue
            points.sort()
            color, marker, line = styles.get((engine, encoding), ("gray", "x", ":"))
            ax.plot([p[1] for p in points], [p[2] for p in points], color=color, marker=marker, linestyle=line,
                    label=f"{'Settee' if engine == 'settee' else 'FAISS'} {names.get(encoding, encoding)}")
            for nprobe, recall, qps in points:
                if engine == "settee" and encoding == "sq8":
                    ax.annotate(f"nprobe {nprobe}", (recall, qps), textcoords="offset points", xytext=(4, 4), fontsize=7)
        ax.set_yscale("log")
        ax.set_xlabel("recall@10")
        ax.set_ylabel("queries/s (one thread)")
        ax.set_title(dataset)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("Settee vector index vs FAISS: recall@10 and single-thread queries/s (settee-bench vector)")
    fig.tight_layout()
    fig.savefig(target, dpi=110)


if __name__ == "__main__":
    main()
