// Cuts texts into the windows Hugging Face's Rust tokenizers make of a
// right truncation with a stride (the npm package `tokenizers`, a native
// module of the crate), for the tokenizer package's tests of Windows
// (windows_test.go):
//
//   node scripts/tokenizer-windows.js NODE_MODULES REQUEST.json
//
// REQUEST is {"file": a tokenizer.json, "texts", "configs": [{"max_length",
// "stride", "texts": the indices of the texts to cut}]}.
// The windows are those of tokenizers 0.22.2: since 0.23.1 the crate
// stops tokenizing a text at max_length, so a truncated encoding's
// overflowing windows come back incomplete (huggingface/tokenizers#2091,
// fix open in #2098). As 0.22.2 did, the script encodes the whole text
// without special tokens, cuts it with the crate's Encoding.truncate at
// max_length less the special tokens, with the stride, and post-processes
// it, which gives each window its special tokens (the raw encoding comes
// from a copy of the file without its post-processor: encode
// post-processes even without special tokens, and RoBERTa's trims
// offsets, which a second pass would trim again). It prints one JSON
// line a config's text, config by config: {"windows": [{"ids",
// "type_ids", "offsets"}]} or {"error": the message}.
const fs = require('fs');
const [modules, requestFile] = process.argv.slice(2);
const tk = require(modules + '/tokenizers');
const req = JSON.parse(fs.readFileSync(requestFile, 'utf8'));
(async () => {
  const doc = JSON.parse(fs.readFileSync(req.file, 'utf8'));
  doc.truncation = null;
  doc.padding = null;
  const t = tk.Tokenizer.fromString(JSON.stringify(doc));
  const raw = tk.Tokenizer.fromString(JSON.stringify({ ...doc, post_processor: null }));
  const added = (await t.encode('', null)).getLength();
  for (const c of req.configs) {
    const out = [];
    for (const i of c.texts) {
      try {
        const e = await raw.encode(req.texts[i], null, { addSpecialTokens: false });
        e.truncate(c.max_length - added, c.stride, 'right');
        const p = t.postProcess(e, null, true);
        const windows = [p, ...p.getOverflowing()].map((w) => ({ ids: w.getIds(), type_ids: w.getTypeIds(), offsets: w.getOffsets() }));
        out.push(JSON.stringify({ windows }));
      } catch (err) {
        out.push(JSON.stringify({ error: String((err && err.message) || err) }));
      }
    }
    if (out.length > 0) process.stdout.write(out.join('\n') + '\n');
  }
})();
