// Embeds texts as a Node user would without drainpipe, for the bench's
// embedding goals (bench/seqpeers.go): transformers.js's
// feature-extraction pipeline (mean pooling, normalized, a batch of texts
// at a time in input order, each batch padded to its longest), or ONNX
// Runtime for node called directly on the same batches of token ids, each
// padded to its longest row, the embeddings mean-pooled and normalized
// here.
//
//   node scripts/embedding-peers.mjs NODE_MODULES REQUEST.json
//
// REQUEST is {"peer": "transformers.js" or "onnxruntime", "threads",
// "batch", and for transformers.js "root" (a folder of model folders laid
// out as it reads them) and "model" (one of them) and "texts"; for
// onnxruntime "onnx" (the model file) and "ids" (each row's token ids)}.
// It prints one JSON line: the rows embedded, their width, and the sum of
// every embedding's elements (a check that the work was done).
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';

const [modules, requestFile] = process.argv.slice(2);
const req = JSON.parse(fs.readFileSync(requestFile, 'utf8'));
const sessionOptions = { intraOpNumThreads: req.threads, interOpNumThreads: 1 };
let rows = 0, width = 0, sum = 0;
const take = (data, n, w) => {
  rows += n;
  width = w;
  for (const x of data) sum += x;
};

if (req.peer === 'transformers.js') {
  const entry = path.join(modules, '@huggingface', 'transformers', 'dist', 'transformers.node.mjs');
  const { pipeline, env } = await import(pathToFileURL(entry).href);
  env.allowRemoteModels = false;
  env.localModelPath = req.root + path.sep;
  const run = await pipeline('feature-extraction', req.model, { dtype: 'fp32', session_options: sessionOptions });
  for (let i = 0; i < req.texts.length; i += req.batch) {
    const t = await run(req.texts.slice(i, i + req.batch), { pooling: 'mean', normalize: true });
    take(t.data, t.dims[0], t.dims[1]);
  }
} else if (req.peer === 'onnxruntime') {
  const ort = createRequire(path.join(modules, 'x.js'))('onnxruntime-node');
  const session = await ort.InferenceSession.create(req.onnx, sessionOptions);
  for (let i = 0; i < req.ids.length; i += req.batch) {
    const batch = req.ids.slice(i, i + req.batch);
    const n = batch.length, longest = Math.max(...batch.map((r) => r.length));
    const ids = new BigInt64Array(n * longest), mask = new BigInt64Array(n * longest);
    batch.forEach((r, b) => r.forEach((id, t) => { ids[b * longest + t] = BigInt(id); mask[b * longest + t] = 1n; }));
    const dims = [n, longest];
    const out = await session.run({
      input_ids: new ort.Tensor('int64', ids, dims),
      attention_mask: new ort.Tensor('int64', mask, dims),
      token_type_ids: new ort.Tensor('int64', new BigInt64Array(n * longest), dims),
    }, ['last_hidden_state']);
    const h = out.last_hidden_state.data, w = out.last_hidden_state.dims[2];
    const pooled = new Float32Array(n * w);
    batch.forEach((r, b) => {
      const e = pooled.subarray(b * w, (b + 1) * w);
      for (let t = 0; t < r.length; t++) for (let j = 0; j < w; j++) e[j] += h[(b * longest + t) * w + j];
      let norm = 0;
      for (let j = 0; j < w; j++) { e[j] /= r.length; norm += e[j] * e[j]; }
      norm = Math.max(Math.sqrt(norm), 1e-12);
      for (let j = 0; j < w; j++) e[j] /= norm;
    });
    take(pooled, n, w);
  }
} else {
  throw new Error(`peer ${req.peer}: want transformers.js or onnxruntime`);
}
process.stdout.write(JSON.stringify({ rows, width, sum }) + '\n');
