// Encodes texts with Hugging Face's Rust tokenizers (the npm package
// `tokenizers`, a native module of the Rust crate), for the tokenizer
// package's tests against files it did not make (reference_test.go):
//
//   node scripts/tokenizer-reference.js NODE_MODULES REQUEST.json
//
// REQUEST is {"file": a tokenizer.json, "items": [{"text" or "b64" (its
// bytes), "pair" or "pair_b64"?}], "decode": bool}. It prints one JSON line an item: {"ids", "type_ids",
// "offsets", "decoded"?} or {"error": the message}; a file the crate
// refuses is one line {"load_error": the message}.
const fs = require('fs');
const [modules, requestFile] = process.argv.slice(2);
const tk = require(modules + '/tokenizers');
const req = JSON.parse(fs.readFileSync(requestFile, 'utf8'));
const out = [];
(async () => {
  let t;
  try {
    t = tk.Tokenizer.fromFile(req.file);
  } catch (e) {
    process.stdout.write(JSON.stringify({ load_error: String(e && e.message || e) }) + '\n');
    return;
  }
  for (const item of req.items) {
    try {
      // Bytes (base64) are read as node reads them: each maximal
      // invalid subpart one U+FFFD.
      const read = (b64, text) => (b64 !== undefined ? Buffer.from(b64, 'base64').toString('utf8') : text);
      const text = read(item.b64, item.text);
      const pair = read(item.pair_b64, item.pair) ?? null;
      const e = await t.encode(text, pair);
      const line = { ids: e.getIds(), type_ids: e.getTypeIds(), offsets: e.getOffsets() };
      if (req.decode) line.decoded = await t.decode(e.getIds(), false);
      out.push(JSON.stringify(line));
    } catch (e) {
      out.push(JSON.stringify({ error: String(e && e.message || e) }));
    }
  }
  process.stdout.write(out.join('\n') + '\n');
})();
