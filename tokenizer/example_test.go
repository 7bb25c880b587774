package tokenizer_test

import (
	"fmt"

	"github.com/drainpipe/drainpipe/tokenizer"
)

// A BERT tokenizer.json encodes a question and a passage: WordPiece
// tokens, the type ids of each text, and each token's characters.
func Example() {
	tok, err := tokenizer.LoadFile("testdata/bert-uncased.json")
	if err != nil {
		panic(err)
	}
	e, err := tok.EncodePair("Who may copy it?", "Everyone is permitted to copy.")
	if err != nil {
		panic(err)
	}
	for i, t := range e.Tokens {
		fmt.Printf("%-10s id %5d type %d chars %v\n", t, e.IDs[i], e.TypeIDs[i], e.Offsets[i])
	}
	// Output:
	// [CLS]      id 30002 type 0 chars [0 0]
	// who        id 10465 type 0 chars [0 3]
	// may        id 10238 type 0 chars [4 7]
	// copy       id 10183 type 0 chars [8 12]
	// it         id 10184 type 0 chars [13 15]
	// ?          id    26 type 0 chars [15 16]
	// [SEP]      id 30003 type 0 chars [0 0]
	// everyone   id 11140 type 1 chars [0 8]
	// is         id 10169 type 1 chars [9 11]
	// permitted  id 10784 type 1 chars [12 21]
	// to         id 10139 type 1 chars [22 24]
	// copy       id 10183 type 1 chars [25 29]
	// .          id     9 type 1 chars [29 30]
	// [SEP]      id 30003 type 1 chars [0 0]
}
