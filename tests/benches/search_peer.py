#!/usr/bin/env python3
"""Peer for benches/search.rs: numpy exact top-k over the same matrix and queries.

    search_peer.py MATRIX.npy QUERIES.npy K WARMUP

MATRIX is (n, dim) float32 with unit rows; QUERIES is (q, dim) float32. For each query:
scores = M @ q, the k best by np.argpartition, then those k sorted. Prints one JSON line:
p50/p95/mean in milliseconds over the queries after WARMUP untimed ones, and the top-10 row
numbers of query 0 (so the caller can check both sides agree). BLAS threads come from the
environment (OPENBLAS_NUM_THREADS and friends), set by the caller.
"""
import json
import math
import os
import sys
import time

import numpy as np


def main() -> None:
    matrix_path, queries_path, k, warmup = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    m = np.load(matrix_path)
    queries = np.load(queries_path)
    k = min(k, m.shape[0] - 1)

    def search(q: np.ndarray) -> np.ndarray:
        scores = m @ q
        top = np.argpartition(-scores, k)[:k]
        return top[np.argsort(-scores[top], kind="stable")]

    for i in range(warmup):
        search(queries[i % len(queries)])
    latencies = []
    top10 = []
    for i, q in enumerate(queries):
        t = time.perf_counter()
        r = search(q)
        latencies.append((time.perf_counter() - t) * 1e3)
        if i == 0:
            top10 = [int(x) for x in r[:10]]
    latencies.sort()

    def pct(p: float) -> float:
        i = math.ceil(p / 100 * len(latencies))
        return latencies[min(max(i, 1), len(latencies)) - 1]

    print(
        json.dumps(
            {
                "numpy": np.__version__,
                "threads": os.environ.get("OPENBLAS_NUM_THREADS"),
                "rows": int(m.shape[0]),
                "n": len(latencies),
                "p50_ms": pct(50),
                "p95_ms": pct(95),
                "mean_ms": sum(latencies) / len(latencies),
                "top10_q0": top10,
            }
        )
    )


if __name__ == "__main__":
    main()
