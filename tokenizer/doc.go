// Package tokenizer reads a Hugging Face tokenizer.json and encodes text
// to token ids, type ids, an attention mask and offsets, exactly as
// Hugging Face's Rust tokenizers do, so a text column goes straight to a
// sequence model (package seq). Decode turns ids back into text.
//
// # What it implements
//
// The files people download load: BERT and its kin (WordPiece), RoBERTa,
// GTE and ModernBERT (byte-level BPE), XLM-R, multilingual E5, bge-m3
// and T5 (Unigram), Qwen2/Qwen3 and their embedding models, Llama 3 and
// the embedders built on it, Gemma 3 and EmbeddingGemma (BPE with byte
// fallback). The components:
//
//   - normalizers: BertNormalizer, NFC, NFD, NFKC, NFKD, Lowercase,
//     Strip, StripAccents, Prepend, Replace, Precompiled (SentencePiece's
//     charsmap, applied by grapheme cluster), ByteLevel, and Sequence;
//   - pre-tokenizers: BertPreTokenizer, ByteLevel, Metaspace, Split (a
//     string or a regular expression; every behaviour; invert),
//     Whitespace, WhitespaceSplit, Punctuation, Digits,
//     CharDelimiterSplit, UnicodeScripts, and Sequence;
//   - models: WordPiece, WordLevel, BPE (merges in both formats,
//     byte_fallback, ignore_merges, fuse_unk, continuing_subword_prefix,
//     end_of_word_suffix; a word cache), Unigram (byte_fallback; scores
//     read as serde_json reads them);
//   - post-processors: TemplateProcessing, BertProcessing,
//     RobertaProcessing, ByteLevel, and Sequence;
//   - decoders: ByteLevel, ByteFallback, Fuse, Strip, Replace,
//     Metaspace, WordPiece, BPEDecoder, and Sequence;
//   - added tokens with lstrip, rstrip, single_word, normalized (matched
//     in the normalized text) and special, matched leftmost-longest in
//     one pass through a trie, and ids as the crate assigns them;
//   - truncation (SetTruncation, or the file's): LongestFirst, OnlyFirst,
//     OnlySecond, either direction, each text tokenized only up to
//     max_length first as the crate does; from the right, a long text
//     is read only as far as a head that holds max_length, cut at a
//     space between ASCII letters or digits, where every step ends its
//     pieces there (EncodeWithin bounds what is read).
//
// A component it does not implement is a load error naming it
// ([ErrUnsupported]): FixedLength and CTC among them,
// BPE dropout (random by design), and regular expressions the engine
// cannot read. Never a tokenization that differs.
//
// Split and Replace patterns are Oniguruma's syntax in the Rust
// tokenizers; here they run on regexp2 (a backtracking engine with
// lookahead, (?i:…) and \p{…}), except the patterns of GPT-2, Llama 3
// and Qwen, which hand-written matchers run (regexp2 pays a
// backtracking stack a character; they also read \p{L} and \p{N} as of
// Unicode 16.0, as Oniguruma does, where regexp2 reads Go's tables, of
// 15.0). A match that has not finished after
// two seconds fails the encoding with [ErrPattern], where Oniguruma
// stops at ten million steps.
//
// # Exactness
//
// The tests hold every id, type id and offset (and every decoded text)
// to the Rust tokenizers (the npm package tokenizers 0.23.2, run by the
// tests): the golden corpus in testdata (4,935 strings, made by
// scripts/tokenizer-golden.js, through eleven tokenizers the package's
// trainers made); the tokenizer.json files of Qwen3, Gemma 3 and Llama 3
// as npm packages ship them, on the corpus and long documents; seeded
// hostile strings across every plane (combining marks, ZWJ sequences,
// controls, every white space, what Unicode 15.1 and 16.0 added,
// invalid UTF-8); RoBERTa's and XLM-R's added-token settings; and
// truncation of pairs by every strategy.
//
// Characters are classified with the tables of the crate's dependencies,
// each written from that version's data (package internal/uniprops and
// its generators), since categories move between versions: the BERT
// categories (punctuation, format characters, nonspacing marks) are
// Unicode 8.0's (unicode_categories); the normalization forms, the marks
// StripAccents removes and UnicodeScripts' scripts are 9.0's
// (unicode-normalization-alignments, SentencePiece's script table: a
// character assigned since has no decomposition and class 0);
// Oniguruma's \p{L} and \p{N} and the regex crate's \w are 16.0's;
// Rust's is_numeric and to_lowercase are 17.0's. A test scans every
// code point in use through each of them.

// Offsets count characters (Unicode code points) of the input, as the
// Rust package's bindings give them; special tokens have (0, 0). Text
// that is not valid UTF-8 (which a Rust string cannot be) is read as
// Rust's from_utf8_lossy and node read bytes: each maximal invalid
// subpart one U+FFFD.
//
// Where the crate fails the tokenizer fails: a character a Unigram
// model without unk_id cannot encode, a WordLevel piece without an
// unknown token ([ErrEncode]). Where the crate would quietly do
// otherwise, this package refuses instead: a truncation max_length
// below the special tokens (the crate's unsigned subtraction wraps and
// it truncates nothing), a stride the kept tokens leave no room for (it
// panics), ids past int32 (an id column would wrap them), files nested
// past serde_json's 128 levels, data after the JSON object.
package tokenizer
