package seq

import "slices"

// Option configures a Model.
type Option func(*Model)

// WithTokens names the token-id column (default "input_ids").
func WithTokens(column string) Option { return func(m *Model) { m.tokens = column } }

// WithTypeIDs names a column of token type ids, one a token of the
// token column's row; without it they are zeros.
func WithTypeIDs(column string) Option { return func(m *Model) { m.typeIDs = column } }

// WithPlanner sets the buckets, batch sizes and token budget sub-batches
// are planned with.
func WithPlanner(p Planner) Option { return func(m *Model) { m.planner = p } }

// WithPlan replaces the planner's plan with another (lengths already
// cut at the longest sequence), for comparing strategies: no shapes are
// declared then, and the token budget is the plan's own affair.
func WithPlan(plan func(lengths []int) ([]SubBatch, error)) Option {
	return func(m *Model) { m.plan = plan }
}

// WithPadID sets the token id padding slots hold (the model's
// pad_token_id; 0 by default).
func WithPadID(id int64) Option { return func(m *Model) { m.padID = id } }

// WithVocab sets the vocabulary's size: an id at or past it is a row
// error naming the row, not a failed sub-batch.
func WithVocab(n int64) Option { return func(m *Model) { m.vocab = n } }

// WithLeftPadding pads rows at their start, as decoder models want;
// position ids then count from a row's first real token.
func WithLeftPadding() Option { return func(m *Model) { m.left = true } }

// WithRefuseLong makes a row longer than the longest sequence a row
// error (set aside where the runner sets rows aside) instead of truncating
// it at its end.
func WithRefuseLong() Option { return func(m *Model) { m.refuseLong = true } }

// WithPooling sets how per-token outputs are pooled (Mean by default).
func WithPooling(p Pooling) Option { return WithPoolings(p) }

// WithPoolings pools per-token outputs each of the ways given and
// concatenates the vectors in that order, as sentence-transformers'
// Pooling module does with several modes on.
func WithPoolings(ps ...Pooling) Option { return func(m *Model) { m.poolings = slices.Clone(ps) } }

// WithModules applies modules, in order, to the pooled vector of a
// per-token output (sentence-transformers' Dense and Normalize).
func WithModules(ms ...Module) Option { return func(m *Model) { m.modules = append(m.modules, ms...) } }

// WithNormalize scales pooled vectors to unit length: WithModules of
// Normalize.
func WithNormalize() Option { return WithModules(Normalize{}) }

// WithPositionStart numbers a row's tokens from start, and gives
// padding slots start − 1, as RoBERTa's family (RoBERTa, XLM-R,
// CamemBERT) makes position ids from padding_idx: start is
// padding_idx + 1. By default tokens count from 0.
func WithPositionStart(start int64) Option { return func(m *Model) { m.positionStart = start } }

// WithWarmUp has each session of an engine that is a WarmUpper run the
// largest declared shape once as it starts: a server's memory then
// reaches its peak before it takes traffic, and no request pays for
// the growth. A job leaves it off: the largest declared shape (a whole
// token budget of the longest rows) cost a MiniLM-sized text job of
// 8,000 texts a tenth of its wall time, and its windows' largest
// sub-batches, run first, grow the arena as far as the job needs.
func WithWarmUp() Option { return func(m *Model) { m.warmUp = true } }

// WithText makes the model read text from a string column and encode
// it to token ids itself (a tokenizer's Encode), instead of reading a
// token column: for a server that takes text. A job tokenizes on its
// input side instead (tokenizer.Tokens), ahead of the device. encode
// says whether it truncated the text: Stats.Truncated counts such rows
// with those the model cuts.
func WithText(column string, encode func(string) (ids []int64, truncated bool, err error)) Option {
	return func(m *Model) { m.text, m.encode = column, encode }
}

// WithTextPair makes a model that reads text (WithText) read a second
// text column too and encode each row's two texts as a pair — a
// cross-encoder's query and passage — into token ids and type ids.
func WithTextPair(column string, encode func(a, b string) (ids, types []int64, truncated bool, err error)) Option {
	return func(m *Model) { m.textPair, m.encodePair = column, encode }
}
