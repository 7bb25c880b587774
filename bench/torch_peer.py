#!/usr/bin/python3
"""PyTorch peer for drainpipe's benchmark suite (go run ./bench).

Runs the same workload the Go runners run: rows of 64 float32 features in
batches through torch.utils.data.DataLoader, into a trivial model (the sum of
the features per row) or the MLP 64-256-256-10 (ReLU, softmax) with the
weights of a drainpipe .dpmlp file, with the same batch size and thread
count, and prints one JSON object.

Tested with Debian 12's python3-torch 1.13.1 and python3-numpy 1.24.2.

usage: torch_peer.py WORKLOAD ROWS BATCH THREADS [MODEL.dpmlp]
"""
import json
import struct
import sys
import time
import zlib

import numpy as np
import torch


def load_dpmlp(path):
    """Reads a drainpipe MLP file (format in device/cpu/doc.go)."""
    data = open(path, "rb").read()
    body, (crc,) = data[:-4], struct.unpack("<I", data[-4:])
    if body[:8] != b"DPMLP\x00\x00\x01" or zlib.crc32(body) != crc:
        raise ValueError(f"{path}: not a drainpipe MLP file")
    off = 8
    (n,) = struct.unpack_from("<I", body, off)
    off += 4 + n
    (layers,) = struct.unpack_from("<I", body, off)
    off += 4
    modules = []
    for i in range(layers):
        d_in, d_out, act = struct.unpack_from("<3I", body, off)
        off += 12
        w = np.frombuffer(body, dtype="<f4", count=d_in * d_out, offset=off).reshape(d_in, d_out)
        off += 4 * d_in * d_out
        b = np.frombuffer(body, dtype="<f4", count=d_out, offset=off)
        off += 4 * d_out
        lin = torch.nn.Linear(d_in, d_out)
        with torch.no_grad():
            lin.weight.copy_(torch.from_numpy(w.T.copy()))
            lin.bias.copy_(torch.from_numpy(b.copy()))
        modules.append(lin)
        modules.append({0: torch.nn.Identity(), 1: torch.nn.ReLU(), 2: torch.nn.Tanh(),
                        3: torch.nn.Sigmoid(), 4: torch.nn.Softmax(dim=1)}[act])
    return torch.nn.Sequential(*modules).eval()


class RowSum(torch.nn.Module):
    def forward(self, x):
        return x.sum(dim=1)


def main():
    workload, rows, batch, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    torch.set_num_threads(threads)
    model = RowSum() if workload == "pipeline" else load_dpmlp(sys.argv[5])
    x = torch.from_numpy(np.random.default_rng(1).uniform(-1, 1, (rows, 64)).astype(np.float32))
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x), batch_size=batch, shuffle=False)
    n = 0
    start = time.perf_counter()
    with torch.no_grad():
        for (xb,) in loader:
            out = model(xb)
            n += out.shape[0]
    seconds = time.perf_counter() - start
    assert n == rows, (n, rows)
    print(json.dumps({"rows": n, "seconds": seconds, "torch": torch.__version__, "numpy": np.__version__,
                      "threads": torch.get_num_threads()}))


if __name__ == "__main__":
    main()
