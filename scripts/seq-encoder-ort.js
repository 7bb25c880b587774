// Runs seq/testdata/encoder/model.onnx with ONNX Runtime for node on each
// test row alone, unpadded, and writes ort.json beside it: a reference the
// project's own ONNX device is compared with.
//
//   npm install --ignore-scripts onnxruntime-node@1.30.0   (in any folder)
//   NODE_PATH=that/node_modules node scripts/seq-encoder-ort.js
const fs = require('fs');
const ort = require('onnxruntime-node');

const dir = 'seq/testdata/encoder';

async function main() {
  const session = await ort.InferenceSession.create(`${dir}/model.onnx`);
  const rows = JSON.parse(fs.readFileSync(`${dir}/rows.json`, 'utf8'));
  const out = { onnxruntime: require('onnxruntime-node/package.json').version, sentence_embedding: [], logits: [], last_hidden_state_mean: [] };
  for (let i = 0; i < rows.input_ids.length; i++) {
    const ids = rows.input_ids[i];
    const n = ids.length;
    const tensor = (v) => new ort.Tensor('int64', BigInt64Array.from(v.map(BigInt)), [1, n]);
    const res = await session.run({
      input_ids: tensor(ids),
      attention_mask: tensor(ids.map(() => 1)),
      token_type_ids: tensor(rows.token_type_ids[i]),
    });
    out.sentence_embedding.push(Array.from(res.sentence_embedding.data));
    out.logits.push(Array.from(res.logits.data));
    const h = res.last_hidden_state.data, w = res.last_hidden_state.dims[2];
    const mean = new Array(w).fill(0);
    for (let t = 0; t < n; t++) for (let j = 0; j < w; j++) mean[j] += h[t * w + j];
    out.last_hidden_state_mean.push(mean.map((x) => Math.fround(x / n)));
  }
  fs.writeFileSync(`${dir}/ort.json`, JSON.stringify(out));
}

main().catch((e) => { console.error(e); process.exit(1); });
