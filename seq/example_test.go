package seq_test

import (
	"fmt"

	"github.com/drainpipe/drainpipe/seq"
)

// A window of ten rows of token lengths planned into sub-batches: sorted
// by length, padded to declared buckets, within a budget of 64 token
// slots. Rows of one bucket run together; the long row runs alone.
func ExamplePlanner_Plan() {
	p := seq.Planner{Buckets: []int{8, 16, 64}, MaxTokens: 64}
	lengths := []int{5, 12, 3, 40, 7, 15, 2, 9, 6, 8}
	plan, err := p.Plan(lengths)
	if err != nil {
		panic(err)
	}
	for _, sb := range plan {
		fmt.Printf("%-5s rows %v\n", sb.Shape, sb.Rows)
	}
	// Output:
	// 4×8   rows [6 2 0 8]
	// 2×8   rows [4 9]
	// 2×16  rows [7 1]
	// 1×16  rows [5]
	// 1×64  rows [3]
}
