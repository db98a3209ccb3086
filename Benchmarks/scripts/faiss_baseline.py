#!/usr/bin/env python3
"""FAISS IVF baseline for settee-bench's `vector` workload (same data, same machine, same run).

Reads base/query vectors (.fvecs) and ground truth (.ivecs), trains IndexIVFScalarQuantizer (SQ8) and IndexIVFFlat
with the given nlist, single-threaded, and prints one JSON object: training seconds, and per encoding and nprobe
the recall@10 and queries/s (one query at a time, as settee-bench measures Settee).

    pip install faiss-cpu numpy
    python3 faiss_baseline.py --base b.fvecs --queries q.fvecs --gt gt.ivecs --nlist 316 --nprobes 1,4,8,16,32
"""
import argparse
import json
import sys
import time

import numpy as np


def read_vecs(path, dtype):
    raw = np.fromfile(path, dtype=np.int32)
    d = raw[0]
    rows = raw.reshape(-1, d + 1)[:, 1:]
    return np.ascontiguousarray(rows.view(dtype) if dtype == np.float32 else rows)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--base", required=True)
    p.add_argument("--queries", required=True)
    p.add_argument("--gt", required=True)
    p.add_argument("--nlist", type=int, required=True)
    p.add_argument("--nprobes", default="1,4,8,16,32")
    p.add_argument("--k", type=int, default=10)
    args = p.parse_args()
    try:
        import faiss
    except ImportError:
        print(json.dumps({"error": "faiss is not installed (pip install faiss-cpu)"}))
        return 0
    faiss.omp_set_num_threads(1)
    xb = read_vecs(args.base, np.float32)
    xq = read_vecs(args.queries, np.float32)
    gt = read_vecs(args.gt, np.int32)[:, : args.k]
    d = xb.shape[1]
    out = {"faiss": faiss.__version__, "n": int(xb.shape[0]), "d": int(d), "nlist": args.nlist, "encodings": {}}
    for name in ("sq8", "none"):
        quantizer = faiss.IndexFlatL2(d)
        if name == "sq8":
            index = faiss.IndexIVFScalarQuantizer(quantizer, d, args.nlist, faiss.ScalarQuantizer.QT_8bit)
        else:
            index = faiss.IndexIVFFlat(quantizer, d, args.nlist)
        t0 = time.perf_counter()
        index.train(xb)
        index.add(xb)
        train = time.perf_counter() - t0
        points = []
        for nprobe in [int(x) for x in args.nprobes.split(",")]:
            index.nprobe = nprobe
            hits = 0
            t0 = time.perf_counter()
            for i in range(xq.shape[0]):
                _, found = index.search(xq[i : i + 1], args.k)
                hits += len(set(found[0].tolist()) & set(gt[i].tolist()))
            elapsed = time.perf_counter() - t0
            points.append({"nprobe": nprobe, "recall": hits / (xq.shape[0] * args.k), "qps": xq.shape[0] / elapsed})
        out["encodings"][name] = {"train_seconds": train, "points": points}
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
