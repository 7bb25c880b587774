#!/usr/bin/python3
"""Writes tokenizer/testdata/nmt_nfkc.charsmap: SentencePiece's precompiled
charsmap of its nmt_nfkc normalization rule (XLM-R's and most SentencePiece
models'), taken from a small model SentencePiece trains here (Debian's
python3-sentencepiece), for the Precompiled normalizer's golden corpus.

    /usr/bin/python3 scripts/spm-charsmap.py
"""
import glob
import os
import tempfile

import sentencepiece as spm


def field(buf, want):
    """Returns the bytes of length-delimited field `want` of a protobuf message."""
    i = 0
    while i < len(buf):
        key, i = varint(buf, i)
        num, wire = key >> 3, key & 7
        if wire == 0:
            _, i = varint(buf, i)
        elif wire == 1:
            i += 8
        elif wire == 5:
            i += 4
        elif wire == 2:
            n, i = varint(buf, i)
            if num == want:
                return buf[i:i + n]
            i += n
        else:
            raise ValueError(f"wire type {wire}")
    raise KeyError(want)


def varint(buf, i):
    shift = result = 0
    while True:
        b = buf[i]
        i += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, i
        shift += 7


with tempfile.TemporaryDirectory() as d:
    text = os.path.join(d, "text.txt")
    with open(text, "w") as f:
        for name in sorted(glob.glob("/usr/share/common-licenses/*")):
            if os.path.isfile(name):
                f.write(open(name).read())
    spm.SentencePieceTrainer.train(input=text, model_prefix=os.path.join(d, "m"), vocab_size=500,
                                   normalization_rule_name="nmt_nfkc", minloglevel=2)
    model = open(os.path.join(d, "m.model"), "rb").read()
    charsmap = field(field(model, 3), 2)  # ModelProto.normalizer_spec.precompiled_charsmap
    with open("tokenizer/testdata/nmt_nfkc.charsmap", "wb") as out:
        out.write(charsmap)
    print(len(charsmap), "bytes")
