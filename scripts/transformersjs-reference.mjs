// Runs a model folder with transformers.js (@huggingface/transformers,
// on onnxruntime-node), the second reference the hfmodel tests hold
// drainpipe's sequence path to (transformersjs_onnx_test.go):
//
//   node scripts/transformersjs-reference.mjs NODE_MODULES REQUEST.json
//
// REQUEST is {"root": a folder of model folders laid out as transformers.js
// reads them (config.json, tokenizer.json, tokenizer_config.json,
// onnx/model.onnx), "model": one of them, "task": "feature-extraction" or
// "text-classification", "pooling", "normalize" (feature extraction),
// "texts", "batch": texts a call, padded together in input order}. It
// prints one JSON line: each text's embedding, or its scores in the
// order of config.json's id2label.
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const [modules, requestFile] = process.argv.slice(2);
const req = JSON.parse(fs.readFileSync(requestFile, 'utf8'));
const entry = path.join(modules, '@huggingface', 'transformers', 'dist', 'transformers.node.mjs');
const { pipeline, env } = await import(pathToFileURL(entry).href);
env.allowRemoteModels = false;
env.localModelPath = req.root + path.sep;
const run = await pipeline(req.task, req.model, { dtype: 'fp32' });
const config = JSON.parse(fs.readFileSync(path.join(req.root, req.model, 'config.json'), 'utf8'));
const out = [];
for (let i = 0; i < req.texts.length; i += req.batch) {
  const texts = req.texts.slice(i, i + req.batch);
  if (req.task === 'feature-extraction') {
    const t = await run(texts, { pooling: req.pooling, normalize: req.normalize });
    const [rows, width] = t.dims;
    for (let r = 0; r < rows; r++) {
      out.push(Array.from(t.data.slice(r * width, (r + 1) * width)));
    }
  } else {
    const labels = Object.keys(config.id2label).sort((a, b) => a - b).map((k) => config.id2label[k]);
    for (const scores of await run(texts, { top_k: null })) {
      out.push(labels.map((l) => scores.find((s) => s.label === l).score));
    }
  }
}
process.stdout.write(JSON.stringify(out) + '\n');
