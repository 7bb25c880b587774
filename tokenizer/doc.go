// Package tokenizer reads a Hugging Face tokenizer.json and encodes text
// to token ids, type ids, an attention mask and offsets, exactly as
// Hugging Face's Rust tokenizers do, so a text column goes straight to a
// sequence model (package seq).
//
// # What it implements
//
// The BERT family: the BertNormalizer (clean_text, handle_chinese_chars,
// strip_accents null/true/false, lowercase), the BertPreTokenizer, the
// WordPiece model (continuing_subword_prefix, max_input_chars_per_word,
// unk_token), TemplateProcessing and BertProcessing post-processors.
// Byte-level BPE (RoBERTa, GTE, ModernBERT): the ByteLevel pre-tokenizer
// (GPT-2's pattern, add_prefix_space, use_regex), the BPE model with its
// merges in both formats ([a, b] pairs and "a b" strings), RobertaProcessing
// and the ByteLevel post-processor (trim_offsets). Unigram (XLM-R,
// multilingual E5, T5): the Precompiled normalizer (SentencePiece's
// charsmap, applied by grapheme cluster as the Rust package applies it)
// and NFKC, the Metaspace pre-tokenizer
// (prepend_scheme always, first, never) and the Unigram model's Viterbi
// path, its scores read as the Rust package reads them. All: added tokens
// (special tokens such as [MASK] matched in the raw text) and truncation.
// Normalizers also come in a Sequence, and Replace (a string or a regular
// expression RE2 can read). A component it does not implement is a load
// error naming it ([ErrUnsupported]): never a tokenization that differs.
//
// # Exactness
//
// The golden corpus in testdata was made by the Rust tokenizers (the npm
// package tokenizers 0.23.2, scripts/tokenizer-golden.js): 4,935 strings
// — edge cases, prose, seeded random strings, 11 scripts, pairs — each
// encoded by four WordPiece (one written by hand, with BertProcessing
// and truncation), three byte-level BPE and four Unigram tokenizers, all
// but one made by the package's own trainers (two with SentencePiece's
// nmt_nfkc charsmap, scripts/spm-charsmap.py, one of them with XLM-R's
// Sequence of Precompiled and Replace). Every id, type id and
// offset is compared.
//
// Characters are classified as the Rust tokenizers classify them: white
// space by the current Unicode, punctuation, controls and nonspacing marks
// by Unicode 9.0's categories (the tables of the crate they use; newer.go,
// made from Unicode's DerivedAge.txt by internal/genage, lists what was
// assigned since), and unassigned code points are kept, as there.
//
// Offsets count characters (Unicode code points) of the input, as the
// Rust package's bindings give them; special tokens have (0, 0). Text that
// is not valid UTF-8 (which a Rust string cannot be) has each invalid byte
// read as U+FFFD, which the BERT normalizer's clean_text removes.
package tokenizer

//go:generate sh -c "go run ./internal/genage /usr/share/unicode/DerivedAge.txt > newer.go"
