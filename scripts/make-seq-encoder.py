#!/usr/bin/python3
"""Makes seq/testdata/encoder: a small BERT-style encoder with random
weights, exported by PyTorch to ONNX with dynamic batch and sequence axes,
and PyTorch's own outputs for each test row run alone, unpadded.

    /usr/bin/python3 scripts/make-seq-encoder.py   (Debian: python3-torch, python3-onnx)

Files written:
  model.onnx        inputs input_ids, attention_mask, token_type_ids [batch, sequence]
                    outputs last_hidden_state [batch, sequence, 32],
                    sentence_embedding [batch, 32] (masked mean), logits [batch, 3]
  config.json       a Hugging Face config (pad_token_id, id2label, max_position_embeddings)
  tokenizer_config.json, 1_Pooling/config.json  as sentence-transformers folders have
  rows.json         the test rows' token ids (lengths from seq/testdata/lengths.txt)
  torch.json        PyTorch's outputs, each row alone
"""
import argparse
import json
import math
import os

import torch
from torch import nn

# The test encoder; with --out and sizes, another (the bench's MiniLM-sized
# one: --out DIR --vocab 30005 --hidden 384 --heads 12 --layers 6 --ffn 1536),
# its model.onnx alone, and with --reference PyTorch's mean of
# last_hidden_state for the given rows, each alone.
ap = argparse.ArgumentParser()
ap.add_argument("--out", default="seq/testdata/encoder")
ap.add_argument("--vocab", type=int, default=1000)
ap.add_argument("--hidden", type=int, default=32)
ap.add_argument("--heads", type=int, default=4)
ap.add_argument("--layers", type=int, default=2)
ap.add_argument("--ffn", type=int, default=64)
ap.add_argument("--reference", help="with --out: a JSON file of rows ({\"input_ids\": [[...]]}) to write torch.json for, each row alone")
args = ap.parse_args()
OUT = args.out
VOCAB, HIDDEN, HEADS, LAYERS, FFN, MAXPOS, LABELS = args.vocab, args.hidden, args.heads, args.layers, args.ffn, 512, 3
REFERENCES = OUT == ap.get_default("out")
torch.manual_seed(36)


class Layer(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(HIDDEN, 3 * HIDDEN)
        self.out = nn.Linear(HIDDEN, HIDDEN)
        self.ln1 = nn.LayerNorm(HIDDEN)
        self.ff1 = nn.Linear(HIDDEN, FFN)
        self.ff2 = nn.Linear(FFN, HIDDEN)
        self.ln2 = nn.LayerNorm(HIDDEN)

    def forward(self, x, bias):
        b, s, _ = x.shape
        q, k, v = self.qkv(x).split(HIDDEN, dim=-1)
        heads = lambda t: t.view(b, s, HEADS, HIDDEN // HEADS).transpose(1, 2)
        q, k, v = heads(q), heads(k), heads(v)
        scores = q @ k.transpose(-1, -2) / math.sqrt(HIDDEN // HEADS) + bias
        ctx = (scores.softmax(-1) @ v).transpose(1, 2).reshape(b, s, HIDDEN)
        x = self.ln1(x + self.out(ctx))
        return self.ln2(x + self.ff2(torch.nn.functional.gelu(self.ff1(x))))


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, HIDDEN)
        self.pos = nn.Embedding(MAXPOS, HIDDEN)
        self.typ = nn.Embedding(2, HIDDEN)
        self.ln = nn.LayerNorm(HIDDEN)
        self.layers = nn.ModuleList([Layer() for _ in range(LAYERS)])
        self.cls = nn.Linear(HIDDEN, LABELS)

    def forward(self, input_ids, attention_mask, token_type_ids):
        s = input_ids.shape[1]
        pos = torch.arange(s, dtype=torch.long).unsqueeze(0)
        x = self.ln(self.tok(input_ids) + self.pos(pos) + self.typ(token_type_ids))
        mask = attention_mask.to(torch.float32)
        # BERT's additive mask: a fully masked row would be uniform, not NaN;
        # drainpipe keeps one token attended in padding rows all the same.
        bias = ((1.0 - mask) * -10000.0)[:, None, None, :]
        for layer in self.layers:
            x = layer(x, bias)
        m = mask.unsqueeze(-1)
        sentence = (x * m).sum(1) / m.sum(1).clamp(min=1e-9)
        return x, sentence, self.cls(sentence)


def main():
    model = Encoder().eval()
    os.makedirs(f"{OUT}/1_Pooling", exist_ok=True)
    ids = torch.randint(0, VOCAB, (2, 7))
    torch.onnx.export(
        model, (ids, torch.ones_like(ids), torch.zeros_like(ids)), f"{OUT}/model.onnx",
        input_names=["input_ids", "attention_mask", "token_type_ids"],
        output_names=["last_hidden_state", "sentence_embedding", "logits"],
        dynamic_axes={n: {0: "batch", 1: "sequence"} for n in ["input_ids", "attention_mask", "token_type_ids", "last_hidden_state"]}
        | {"sentence_embedding": {0: "batch"}, "logits": {0: "batch"}},
        opset_version=14, do_constant_folding=True)
    if args.reference:
        rows = json.load(open(args.reference))["input_ids"]
        with torch.no_grad():
            means = [model(torch.tensor([r]), torch.ones(1, len(r), dtype=torch.long), torch.zeros(1, len(r), dtype=torch.long))[0][0].mean(0).tolist()
                     for r in rows]
        with open(f"{OUT}/torch.json", "w") as f:
            json.dump({"torch": torch.__version__, "last_hidden_state_mean": means}, f)
    if not REFERENCES:
        return
    with open(f"{OUT}/config.json", "w") as f:
        json.dump({"model_type": "bert", "hidden_size": HIDDEN, "vocab_size": VOCAB, "pad_token_id": 0, "max_position_embeddings": MAXPOS,
                   "id2label": {"0": "negative", "1": "neutral", "2": "positive"}}, f, indent=2)
    with open(f"{OUT}/tokenizer_config.json", "w") as f:
        json.dump({"model_max_length": MAXPOS, "padding_side": "right"}, f, indent=2)
    with open(f"{OUT}/1_Pooling/config.json", "w") as f:
        json.dump({"word_embedding_dimension": HIDDEN, "pooling_mode_mean_tokens": True}, f, indent=2)

    # Test rows: lengths from the committed long-tail distribution (capped at
    # the model's 512 positions), a few edge rows, ids from a seeded draw.
    lengths = [int(l) for l in open("seq/testdata/lengths.txt")][:300]
    lengths = [min(l, MAXPOS) for l in lengths] + [1, 2, MAXPOS]
    g = torch.Generator().manual_seed(7)
    rows, types = [], []
    for n in lengths:
        rows.append([101] + torch.randint(1000 - 900, VOCAB, (n - 2,), generator=g).tolist() + [102] if n >= 2 else [101])
        cut = len(rows[-1]) // 2
        types.append([0] * cut + [1] * (len(rows[-1]) - cut))
    with open(f"{OUT}/rows.json", "w") as f:
        json.dump({"input_ids": rows, "token_type_ids": types}, f)
    ref = {"last_hidden_state_mean": [], "sentence_embedding": [], "logits": []}
    with torch.no_grad():
        for r, t in zip(rows, types):
            i = torch.tensor([r])
            h, s, l = model(i, torch.ones_like(i), torch.tensor([t]))
            ref["last_hidden_state_mean"].append(h[0].mean(0).tolist())
            ref["sentence_embedding"].append(s[0].tolist())
            ref["logits"].append(l[0].tolist())
    with open(f"{OUT}/torch.json", "w") as f:
        json.dump({"torch": torch.__version__, **ref}, f)


if __name__ == "__main__":
    main()
