#!/usr/bin/env python3
"""Writes seq/testdata/lengths.txt: 20,000 token lengths of a long-tail
distribution like that of real text columns (log-normal, median 14 tokens,
99th percentile about 640), for the padding-waste tests and benchmarks."""
import math
import random

rng = random.Random(20261201)
mu, sigma = math.log(14), math.log(640 / 14) / 2.3263
with open("seq/testdata/lengths.txt", "w") as f:
    for _ in range(20000):
        f.write(f"{max(3, min(4096, round(rng.lognormvariate(mu, sigma))))}\n")
