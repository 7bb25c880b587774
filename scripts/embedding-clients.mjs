// Calls `drainpipe serve` with the clients RAG code embeds through, for
// cmd/drainpipe's tests (clients_onnx_test.go):
//
//   node scripts/embedding-clients.mjs NODE_MODULES REQUEST.json
//
// REQUEST is {"openai_url": the server's /v1 base URL, "tei_url": a TEI
// endpoint URL (.../tei/MODEL), "key", "model", "texts"}. It prints one
// JSON line: LangChain's OpenAIEmbeddings (@langchain/openai) documents,
// in batches of 7, and query; Hugging Face's inference client
// (@huggingface/inference) feature extraction of the texts at the
// endpoint URL; and the errors LangChain raised (status, class).
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const [modules, requestFile] = process.argv.slice(2);
const req = JSON.parse(fs.readFileSync(requestFile, 'utf8'));
const load = (pkg, file) => import(pathToFileURL(path.join(modules, ...pkg.split('/'), ...file.split('/'))).href);
const { OpenAIEmbeddings } = await load('@langchain/openai', 'dist/index.js');
const { InferenceClient } = await load('@huggingface/inference', 'dist/esm/index.js');

const out = {};
const embeddings = new OpenAIEmbeddings({ model: req.model, apiKey: req.key, batchSize: 7, maxRetries: 0, configuration: { baseURL: req.openai_url } });
out.documents = await embeddings.embedDocuments(req.texts);
out.query = await embeddings.embedQuery(req.texts[0]);
const hf = new InferenceClient(req.key); // sent as a bearer token, as to a protected endpoint
out.features = await hf.featureExtraction({ endpointUrl: req.tei_url, inputs: req.texts, parameters: { truncate: true } });
out.errors = {};
const failing = {
  missing_model: () => new OpenAIEmbeddings({ model: 'no-such-model', apiKey: req.key, maxRetries: 0, configuration: { baseURL: req.openai_url } }).embedQuery('x'),
  wrong_key: () => new OpenAIEmbeddings({ model: req.model, apiKey: 'wrong', maxRetries: 0, configuration: { baseURL: req.openai_url } }).embedQuery('x'),
};
for (const [name, call] of Object.entries(failing)) {
  try {
    await call();
    out.errors[name] = { status: 200 };
  } catch (e) {
    out.errors[name] = { status: e.status ?? e.response?.status ?? null, class: e.constructor.name, message: String(e.message).slice(0, 200) };
  }
}
process.stdout.write(JSON.stringify(out) + '\n');
