// Calls `drainpipe serve`'s OpenAI-style endpoints with OpenAI's own
// client (npm openai), for cmd/drainpipe's tests (openai_onnx_test.go):
//
//   node scripts/openai-client.mjs NODE_MODULES REQUEST.json
//
// REQUEST is {"text_url", "ids_url": the /v1 base URLs of a server that
// takes text and one that takes token ids, "key": the text server's API
// key, "model", "texts", "ids": token arrays}. It prints one JSON line:
// the embeddings each call got, the models listed, and the errors the
// client raised (status, code, type).
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const [modules, requestFile] = process.argv.slice(2);
const req = JSON.parse(fs.readFileSync(requestFile, 'utf8'));
const { default: OpenAI } = await import(pathToFileURL(path.join(modules, 'openai', 'index.mjs')).href);
const text = new OpenAI({ baseURL: req.text_url, apiKey: req.key, maxRetries: 0 });
const ids = new OpenAI({ baseURL: req.ids_url, apiKey: 'unused', maxRetries: 0 });
const vectors = (res) => res.data.map((d) => ({ index: d.index, embedding: Array.from(d.embedding) }));
const out = {};
// The client asks for base64 by default and decodes it itself.
const byDefault = await text.embeddings.create({ model: req.model, input: req.texts });
out.default = vectors(byDefault);
out.usage = byDefault.usage;
out.float = vectors(await text.embeddings.create({ model: req.model, input: req.texts, encoding_format: 'float' }));
out.one = vectors(await text.embeddings.create({ model: req.model, input: req.texts[0] }));
out.short = vectors(await text.embeddings.create({ model: req.model, input: req.texts.slice(0, 2), dimensions: 8, encoding_format: 'float' }));
out.tokens = vectors(await ids.embeddings.create({ model: req.model, input: req.ids, encoding_format: 'float' }));
out.models = (await text.models.list()).data.map((m) => m.id);
out.errors = {};
const failing = {
  missing_model: () => text.embeddings.create({ model: 'no-such-model', input: 'x' }),
  empty_input: () => text.embeddings.create({ model: req.model, input: [] }),
  too_many_dimensions: () => text.embeddings.create({ model: req.model, input: 'x', dimensions: 100000 }),
  wrong_key: () => new OpenAI({ baseURL: req.text_url, apiKey: 'wrong', maxRetries: 0 }).embeddings.create({ model: req.model, input: 'x' }),
  text_to_ids_model: () => ids.embeddings.create({ model: req.model, input: 'x' }),
};
for (const [name, call] of Object.entries(failing)) {
  try {
    await call();
    out.errors[name] = { status: 200 };
  } catch (e) {
    out.errors[name] = { status: e.status, code: e.code ?? null, type: e.type ?? null, class: e.constructor.name };
  }
}
process.stdout.write(JSON.stringify(out) + '\n');
