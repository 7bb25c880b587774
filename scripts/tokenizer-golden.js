// Makes the tokenizer package's golden corpus with Hugging Face's Rust
// tokenizers (the npm package `tokenizers`, a native module of the Rust
// crate), pinned:
//
//   npm install tokenizers@0.23.2          (in any folder)
//   NODE_PATH=that/node_modules node scripts/tokenizer-golden.js
//
// It trains a BERT WordPiece vocabulary on the licence texts every Debian
// system has (/usr/share/common-licenses) and on words of 11 scripts made
// here, writes tokenizer.json files (uncased; cased; cased with accents
// stripped) into tokenizer/testdata/, and encodes 4,000+ strings with each:
// edge cases, prose, seeded random strings, 11 scripts, and pairs. It does
// the same for byte-level BPE tokenizers (RoBERTa's layout). Each line of
// golden-FAMILY.jsonl.gz is {"text", "pair"?, and per tokenizer its ids,
// type ids and offsets}.
const fs = require('fs');
const os = require('os');
const path = require('path');
const tk = require('tokenizers');

const out = 'tokenizer/testdata';

// A seeded generator (mulberry32): the same corpus on every run.
function rng(seed) {
  return () => {
    seed |= 0; seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const rand = rng(37);
const pick = (a) => a[Math.floor(rand() * a.length)];
const between = (lo, hi) => lo + Math.floor(rand() * (hi - lo + 1));

// Scripts: [name, code point ranges of its letters].
const scripts = [
  ['latin', [[0x61, 0x7a], [0xe0, 0xff]]],
  ['latin-ext', [[0x100, 0x17f]]],
  ['greek', [[0x3b1, 0x3c9]]],
  ['cyrillic', [[0x430, 0x44f]]],
  ['arabic', [[0x627, 0x64a]]],
  ['hebrew', [[0x5d0, 0x5ea]]],
  ['devanagari', [[0x905, 0x939], [0x93e, 0x94d]]],
  ['thai', [[0xe01, 0xe2e], [0xe30, 0xe3a]]],
  ['hangul', [[0xac00, 0xd7a3]]],
  ['kana', [[0x3041, 0x3096], [0x30a1, 0x30fa]]],
  ['cjk', [[0x4e00, 0x9fff]]],
];
function letter(ranges) {
  const [lo, hi] = pick(ranges);
  return String.fromCodePoint(between(lo, hi));
}
function word(ranges) {
  let w = '';
  for (let i = between(1, 8); i > 0; i--) w += letter(ranges);
  return w;
}
function sentence(ranges) {
  const words = [];
  for (let i = between(1, 12); i > 0; i--) words.push(word(ranges));
  return words.join(pick([' ', ' ', ' ', ', ', '. ', '、', '。'])) + pick(['', '.', '!', '?', '。']);
}

// Training text: the licences, and sentences of every script.
const licences = fs.readdirSync('/usr/share/common-licenses').sort()
  .map((f) => path.join('/usr/share/common-licenses', f))
  .filter((f) => fs.statSync(f).isFile())
  .map((f) => fs.readFileSync(f, 'utf8'));
const train = path.join(os.tmpdir(), 'tokenizer-train.txt');
const lines = licences.join('\n').split('\n');
for (const [, ranges] of scripts) for (let i = 0; i < 400; i++) lines.push(sentence(ranges));
fs.writeFileSync(train, lines.join('\n'));

const specials = ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]'];
function bert(name, normalizer) {
  const t = new tk.Tokenizer(tk.WordPiece.empty());
  t.setNormalizer(normalizer);
  t.setPreTokenizer(tk.bertPreTokenizer());
  t.train([train]);
  t.addSpecialTokens(specials);
  const cls = t.tokenToId('[CLS]'), sep = t.tokenToId('[SEP]');
  t.setPostProcessor(tk.templateProcessing('[CLS] $A [SEP]', '[CLS] $A [SEP] $B:1 [SEP]:1', [['[CLS]', cls], ['[SEP]', sep]]));
  t.setDecoder(tk.wordPieceDecoder('##', true));
  // The trainer takes no special tokens here: they are added tokens, and
  // go into the model's vocabulary too, where WordPiece finds [UNK].
  const file = path.join(out, `${name}.json`);
  t.save(file, false);
  const json = JSON.parse(fs.readFileSync(file, 'utf8'));
  for (const a of json.added_tokens) json.model.vocab[a.content] = a.id;
  fs.writeFileSync(file, JSON.stringify(json));
  return [name, tk.Tokenizer.fromFile(file)];
}
const tokenizers = [
  bert('bert-uncased', tk.bertNormalizer({ lowercase: true })),
  bert('bert-cased', tk.bertNormalizer({ lowercase: false, stripAccents: false })),
  bert('bert-cased-strip', tk.bertNormalizer({ lowercase: false, stripAccents: true })),
  handWrittenBert(),
];

// A BERT tokenizer.json written by hand, as older exports are: the
// uncased vocabulary, BertProcessing instead of a template, a normalizer
// that lowercases, keeps accents and leaves Chinese characters unspaced,
// and truncation at 64 tokens.
function handWrittenBert() {
  const uncased = JSON.parse(fs.readFileSync(path.join(out, 'bert-uncased.json'), 'utf8'));
  const id = (tok) => uncased.model.vocab[tok];
  const json = {
    version: '1.0',
    truncation: { direction: 'Right', max_length: 64, strategy: 'LongestFirst', stride: 0 },
    padding: null,
    added_tokens: uncased.added_tokens,
    normalizer: { type: 'BertNormalizer', clean_text: true, handle_chinese_chars: false, strip_accents: false, lowercase: true },
    pre_tokenizer: { type: 'BertPreTokenizer' },
    post_processor: { type: 'BertProcessing', sep: ['[SEP]', id('[SEP]')], cls: ['[CLS]', id('[CLS]')] },
    decoder: { type: 'WordPiece', prefix: '##', cleanup: true },
    model: { type: 'WordPiece', unk_token: '[UNK]', continuing_subword_prefix: '##', max_input_chars_per_word: 100, vocab: uncased.model.vocab },
  };
  const file = path.join(out, 'bert-handwritten.json');
  fs.writeFileSync(file, JSON.stringify(json));
  return ['bert-handwritten', tk.Tokenizer.fromFile(file)];
}

// Byte-level BPE (RoBERTa, GTE, ModernBERT): trained on the same text,
// every byte's character in the vocabulary (as byte-level vocabularies
// have them), RoBERTa's post-processor; with and without a prefix space,
// and the merges in both formats tokenizer.json has had ([a, b] pairs and
// the older "a b" strings).
const bpeSpecials = ['<s>', '<pad>', '</s>', '<unk>', '<mask>'];
function bpe(name, addPrefixSpace, legacyMerges) {
  const t = new tk.Tokenizer(tk.BPE.empty());
  t.setPreTokenizer(tk.byteLevelPreTokenizer(addPrefixSpace, true));
  t.train([train]);
  t.addSpecialTokens(bpeSpecials);
  t.setPostProcessor(tk.robertaProcessing(['</s>', t.tokenToId('</s>')], ['<s>', t.tokenToId('<s>')], true, addPrefixSpace));
  const file = path.join(out, `${name}.json`);
  t.save(file, false);
  const json = JSON.parse(fs.readFileSync(file, 'utf8'));
  let next = Math.max(...Object.values(json.model.vocab), ...json.added_tokens.map((a) => a.id)) + 1;
  for (const c of tk.byteLevelAlphabet()) if (!(c in json.model.vocab)) json.model.vocab[c] = next++;
  for (const a of json.added_tokens) json.model.vocab[a.content] = a.id;
  if (legacyMerges) json.model.merges = json.model.merges.map((m) => (Array.isArray(m) ? m.join(' ') : m));
  fs.writeFileSync(file, JSON.stringify(json));
  return [name, tk.Tokenizer.fromFile(file)];
}
const bpeTokenizers = [
  bpe('bpe-roberta', false, false),
  bpe('bpe-prefix-space', true, false),
  bpe('bpe-legacy-merges', false, true),
];

// The strings.
const edge = [
  '', ' ', '   ', '\t', '\n', '\r\n', 'a\r\nb', 'a\u00a0b', '\u00a0', 'a\u200bb', 'a\u200db', '\u2028', '\u3000x\u3000',
  'e\u0301', 'cafe\u0301', 'café', 'CAFÉ', 'naïve', 'Ångström', 'ﬁne', 'ß', 'İstanbul', 'ǅ', 'ＡＢＣ１２３', 'Ⅻ', '½',
  '\u0000', 'a\u0000b', '\u0007bell', '\ufffd', 'soft\u00adhyphen', 'rtl\u200fmark', '\ufeffbom', 'tab\there',
  '😀', '👍🏽', '👨‍👩‍👧', '🇫🇷', 'a😀b', '❤️', '🥰', '🫠',
  '你好，世界！', '日本語のテキスト', '한국어 문장입니다', 'שלום עולם', 'مرحبا بالعالم', 'नमस्ते दुनिया', 'สวัสดีชาวโลก',
  '[MASK]', 'the [MASK] sat', 'a[MASK]b', '[CLS] x [SEP]', '[mask]', '[ MASK ]', '[PAD][UNK]',
  'x'.repeat(99), 'x'.repeat(100), 'x'.repeat(101), 'y'.repeat(300), 'Supercalifragilisticexpialidocious',
  "don't", 'U.S.A.', 'e-mail', '$100.00', '3.14159', 'a/b\\c', '«quoted»', '“smart”', '—dash—', '…', '¿Qué?', '¡Hola!',
  'hello   world', ' leading', 'trailing ', 'MiXeD CaSe', 'ΑΒΓ', 'αβγ', 'Σίσυφος', 'ÀÉÎÕÜ', 'ǰ', 'ﬀ', 'Ω', 'K',
];
const strings = edge.map((text) => ({ text }));
for (const l of lines.slice(0, 20000)) {
  const t = l.trim();
  if (t.length > 0 && strings.length < edge.length + 1500 && rand() < 0.5) strings.push({ text: t.slice(0, 300) });
}
// Random strings: code points from a mix of blocks, controls and spaces.
const blocks = [[0x20, 0x7e], [0xa0, 0x2ff], [0x300, 0x36f], [0x370, 0x52f], [0x590, 0x6ff], [0x900, 0x97f], [0xe00, 0xe7f],
  [0x1100, 0x11ff], [0x2000, 0x206f], [0x20a0, 0x21ff], [0x3000, 0x30ff], [0x4e00, 0x4eff], [0xac00, 0xacff], [0xfe00, 0xfe6f],
  [0xff00, 0xffef], [0x1f300, 0x1faff], [0x0, 0x1f], [0x7f, 0x9f], [0x20000, 0x200ff], [0xe000, 0xe0ff], [0xfff0, 0xfffd]];
for (let i = 0; i < 1500; i++) {
  let s = '';
  for (let n = between(0, 40); n > 0; n--) {
    const [lo, hi] = pick(blocks);
    s += rand() < 0.2 ? ' ' : String.fromCodePoint(between(lo, hi));
  }
  strings.push({ text: s });
}
for (const [, ranges] of scripts) for (let i = 0; i < 150; i++) strings.push({ text: sentence(ranges) });
for (let i = 0; i < 200; i++) strings.push({ text: pick(strings).text, pair: pick(strings).text });

// The test encoder's tokenizer (seq/testdata/encoder): the uncased
// vocabulary's first 1,000 ids, with BERT's special tokens at BERT's ids
// (0, 100-103), and texts encoded by it for the CLI's --text-column test.
function encoderTokenizer() {
  const json = JSON.parse(fs.readFileSync(path.join(out, 'bert-uncased.json'), 'utf8'));
  const ids = { '[PAD]': 0, '[UNK]': 100, '[CLS]': 101, '[SEP]': 102, '[MASK]': 103 };
  const taken = new Set(Object.values(ids));
  const vocab = {};
  for (const [tok, id] of Object.entries(json.model.vocab)) {
    if (id < 1000 && !taken.has(id) && !(tok in ids)) vocab[tok] = id;
  }
  Object.assign(vocab, ids);
  json.model.vocab = vocab;
  for (const a of json.added_tokens) a.id = ids[a.content];
  for (const [name, s] of Object.entries(json.post_processor.special_tokens)) s.ids = [ids[name]];
  const t = tk.Tokenizer.fromString(JSON.stringify(json));
  const file = 'seq/testdata/encoder/tokenizer.json';
  t.save(file, false);
  return tk.Tokenizer.fromFile(file);
}

// Unigram (XLM-R, multilingual E5): trained by the package's Unigram
// trainer behind a Metaspace pre-tokenizer, XLM-R's special tokens put
// first (<s> 0, <pad> 1, </s> 2, <unk> 3) and its template; NFKC or no
// normalizer, the prefix ▁ always or first.
// (Its trainer's 8,000 pieces must hold every character it sees: fewer
// sentences of each script than the others are trained on.)
const unigramTrain = path.join(os.tmpdir(), 'tokenizer-train-unigram.txt');
fs.writeFileSync(unigramTrain, lines.slice(0, lines.length - scripts.length * 400)
  .concat(scripts.flatMap(([, ranges]) => Array.from({ length: 20 }, () => sentence(ranges)))).join('\n'));
function unigram(name, normalizer, prependScheme, editNormalizer) {
  const t = new tk.Tokenizer(tk.Unigram.empty());
  if (normalizer) t.setNormalizer(normalizer);
  t.setPreTokenizer(tk.metaspacePreTokenizer('▁', prependScheme, true));
  t.train([unigramTrain]);
  const file = path.join(out, `${name}.json`);
  t.save(file, false);
  const json = JSON.parse(fs.readFileSync(file, 'utf8'));
  const specials = ['<s>', '<pad>', '</s>', '<unk>'];
  json.model.vocab = specials.map((s) => [s, 0]).concat(json.model.vocab.filter(([p]) => !specials.includes(p)));
  json.model.unk_id = 3;
  if (editNormalizer) json.normalizer = editNormalizer(json.normalizer);
  json.added_tokens = specials.map((content, id) => ({ id, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true }));
  json.post_processor = {
    type: 'TemplateProcessing',
    single: [{ SpecialToken: { id: '<s>', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }, { SpecialToken: { id: '</s>', type_id: 0 } }],
    pair: [{ SpecialToken: { id: '<s>', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }, { SpecialToken: { id: '</s>', type_id: 0 } },
      { SpecialToken: { id: '</s>', type_id: 0 } }, { Sequence: { id: 'B', type_id: 0 } }, { SpecialToken: { id: '</s>', type_id: 0 } }],
    special_tokens: { '<s>': { id: '<s>', ids: [0], tokens: ['<s>'] }, '</s>': { id: '</s>', ids: [2], tokens: ['</s>'] } },
  };
  fs.writeFileSync(file, JSON.stringify(json));
  return [name, tk.Tokenizer.fromFile(file)];
}
// SentencePiece's nmt_nfkc charsmap (scripts/spm-charsmap.py): the
// Precompiled normalizer of XLM-R and most SentencePiece models.
const charsmap = Array.from(fs.readFileSync(path.join(out, 'nmt_nfkc.charsmap')));
const unigramTokenizers = [
  unigram('unigram-nfkc', tk.nfkcNormalizer(), 'always'),
  unigram('unigram-first', null, 'first'),
  unigram('unigram-precompiled', tk.precompiled(charsmap), 'always'),
  // XLM-R's normalizer: Precompiled, then runs of spaces made one.
  unigram('unigram-xlmr', tk.precompiled(charsmap), 'always',
    (precompiled) => ({ type: 'Sequence', normalizers: [precompiled, { type: 'Replace', pattern: { Regex: ' {2,}' }, content: ' ' }] })),
];

(async () => {
  const enc = encoderTokenizer();
  const texts = strings.filter((s) => s.pair === undefined).slice(0, 400).map((s) => s.text);
  const encoded = [];
  for (const text of texts) encoded.push((await enc.encode(text)).getIds());
  fs.writeFileSync('seq/testdata/encoder/texts.json', JSON.stringify({ texts, input_ids: encoded }));

  for (const [family, toks] of [['bert', tokenizers], ['bpe', bpeTokenizers], ['unigram', unigramTokenizers]]) {
    const golden = [];
    for (const s of strings) {
      const line = { text: s.text };
      if (s.pair !== undefined) line.pair = s.pair;
      for (const [name, t] of toks) {
        const e = await t.encode(s.text, s.pair ?? null);
        line[name] = { ids: e.getIds(), type_ids: e.getTypeIds(), offsets: e.getOffsets() };
      }
      golden.push(JSON.stringify(line));
    }
    fs.writeFileSync(path.join(out, `golden-${family}.jsonl.gz`), require('zlib').gzipSync(golden.join('\n') + '\n', { level: 9 }));
    console.log(`${family}: ${strings.length} strings, ${toks.length} tokenizers`);
  }
})();
