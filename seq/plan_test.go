package seq

import (
	"bufio"
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"testing"
)

// lengths reads the committed long-tail length distribution.
func lengths(t testing.TB) []int {
	t.Helper()
	f, err := os.Open("testdata/lengths.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []int
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		n, err := strconv.Atoi(sc.Text())
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, n)
	}
	return out
}

// waste plans lengths in windows of w rows and returns the fraction of
// token slots that hold padding.
func waste(t testing.TB, p Planner, lens []int, w int) (float64, map[Shape]int) {
	t.Helper()
	var real, slots int
	shapes := map[Shape]int{}
	for start := 0; start < len(lens); start += w {
		win := lens[start:min(start+w, len(lens))]
		plan, err := p.Plan(win)
		if err != nil {
			t.Fatal(err)
		}
		for _, sb := range plan {
			slots += sb.Shape.Slots()
			shapes[sb.Shape]++
			for _, r := range sb.Rows {
				real += p.Length(win[r])
			}
		}
	}
	return 1 - float64(real)/float64(slots), shapes
}

func TestDefaultBuckets(t *testing.T) {
	got := DefaultBuckets(512)
	want := []int{8, 16, 24, 32, 40, 48, 56, 64, 72, 88, 96, 104, 120, 128, 144, 168, 184, 208, 232, 256, 288, 328, 368, 408, 464, 512}
	if !slices.Equal(got, want) {
		t.Fatalf("DefaultBuckets(512) = %v, want %v", got, want)
	}
	if got := DefaultBuckets(100); got[len(got)-1] != 100 || got[len(got)-2] != 96 {
		t.Fatalf("DefaultBuckets(100) = %v", got)
	}
}

func TestParseBuckets(t *testing.T) {
	if b, err := ParseBuckets("none"); err != nil || b != nil {
		t.Fatalf("none: %v %v", b, err)
	}
	if b, err := ParseBuckets("16, 32,64"); err != nil || !slices.Equal(b, []int{16, 32, 64}) {
		t.Fatalf("16,32,64: %v %v", b, err)
	}
	for _, bad := range []string{"", "16,x", "32,16", "0,8", "8,8"} {
		if _, err := ParseBuckets(bad); err == nil {
			t.Errorf("ParseBuckets(%q) took it", bad)
		}
	}
}

// TestPaddingWaste pins the padding waste on the committed long-tail
// distribution (median 14, p99 ≈ 640, truncated at 512) against input
// order padded to the longest of 32 rows.
func TestPaddingWaste(t *testing.T) {
	lens := lengths(t)
	buckets, err := Planner{Buckets: DefaultBuckets(512)}.check()
	if err != nil {
		t.Fatal(err)
	}
	got, shapes := waste(t, buckets, lens, 4096)
	if got > 0.095 { // 0.092, the figure the docs give
		t.Errorf("default buckets: padding waste %.3f, want ≤ 0.095", got)
	}
	none, _ := waste(t, Planner{MaxLength: 512}, lens, 4096)
	if none > 0.05 {
		t.Errorf("no buckets: padding waste %.3f, want ≤ 0.05", none)
	}
	// Input order, 32 rows padded to their longest: what a plain loop does.
	var real, slots int
	for i := 0; i < len(lens); i += 32 {
		longest := 0
		for _, n := range lens[i:min(i+32, len(lens))] {
			longest = max(longest, min(n, 512))
			real += min(n, 512)
		}
		slots += 32 * longest
	}
	inOrder := 1 - float64(real)/float64(slots)
	t.Logf("padding waste: buckets %.3f (%d shapes run), none %.3f, input order ×32 %.3f", got, len(shapes), none, inOrder)
	if inOrder < 0.5 {
		t.Errorf("input order wastes %.3f: the distribution is not long-tailed", inOrder)
	}
}

// checkProperties checks a plan against the properties every plan has.
func checkProperties(t testing.TB, p Planner, lens []int) {
	t.Helper()
	plan, err := p.Plan(lens)
	if err != nil {
		t.Fatal(err)
	}
	full, err := p.check()
	if err != nil {
		t.Fatal(err)
	}
	shapes, err := p.Shapes()
	if err != nil {
		t.Fatal(err)
	}
	if err := checkPlan(plan, lens, full, shapes, true); err != nil {
		t.Fatalf("lengths %v: %v", lens, err)
	}
	again, err := p.Plan(lens)
	if err != nil || !samePlan(plan, again) {
		t.Fatalf("the same lengths planned twice differ (%v)", err)
	}
	length := func(row int) int { return max(p.Length(lens[row]), 1) }
	for _, sb := range plan {
		// Sorted: a sub-batch's rows ascend in length, equal lengths in
		// window order.
		for i := 1; i < len(sb.Rows); i++ {
			a, b := length(sb.Rows[i-1]), length(sb.Rows[i])
			if a > b || (a == b && sb.Rows[i-1] > sb.Rows[i]) {
				t.Fatalf("sub-batch rows %v are not in length order", sb.Rows)
			}
		}
		// Padded no further than it must be: with buckets, each row to
		// the smallest bucket that holds it; without, the sub-batch to
		// its longest row, rounded up to the multiple.
		for _, row := range sb.Rows {
			want := full.round(length(sb.Rows[len(sb.Rows)-1]))
			if len(full.Buckets) > 0 {
				i, _ := slices.BinarySearch(full.Buckets, length(row))
				want = full.Buckets[i]
			}
			if sb.Shape.Tokens != want {
				t.Fatalf("row %d of %d tokens runs at %d, want %d", row, lens[row], sb.Shape.Tokens, want)
			}
		}
	}
}

func samePlan(a, b []SubBatch) bool {
	return slices.EqualFunc(a, b, func(x, y SubBatch) bool { return x.Shape == y.Shape && slices.Equal(x.Rows, y.Rows) })
}

// A plan is the same in another process (no map order, no seed of the
// process's own): the test binary plans the committed lengths again in a
// child and prints the plan, which must be this process's.
func TestPlanSameInAnotherProcess(t *testing.T) {
	p := Planner{Buckets: DefaultBuckets(512)}
	plan, err := p.Plan(lengths(t))
	if err != nil {
		t.Fatal(err)
	}
	if os.Getenv("SEQ_PLAN_CHILD") == "1" {
		if err := json.NewEncoder(os.Stdout).Encode(plan); err != nil {
			t.Fatal(err)
		}
		return
	}
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestPlanSameInAnotherProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), "SEQ_PLAN_CHILD=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the child: %v", err)
	}
	var child []SubBatch
	if err := json.NewDecoder(bytes.NewReader(out)).Decode(&child); err != nil {
		t.Fatalf("the child's plan: %v", err)
	}
	if len(child) == 0 || !samePlan(plan, child) {
		t.Fatalf("the child planned %d sub-batches, differing from this process's %d", len(child), len(plan))
	}
}

func TestPlanProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	planners := []Planner{
		{Buckets: DefaultBuckets(512)},
		{Buckets: DefaultBuckets(128), MaxTokens: 1024},
		{Buckets: []int{16, 64}, BatchSizes: []int{4, 8}, MaxTokens: 256},
		{MaxLength: 512},
		{MaxLength: 300, MaxTokens: 500, Multiple: 1},
		{Buckets: []int{32}, BatchSizes: []int{1}, MaxTokens: 8}, // every row over budget
	}
	for range 200 {
		lens := make([]int, rng.IntN(300))
		for i := range lens {
			lens[i] = int(rng.ExpFloat64() * 40)
		}
		for _, p := range planners {
			checkProperties(t, p, lens)
		}
	}
	for _, p := range planners {
		checkProperties(t, p, nil)
		checkProperties(t, p, []int{0, 0, 0})
		checkProperties(t, p, []int{100000})
	}
}

func TestPlanOverBudgetRowRunsAlone(t *testing.T) {
	p := Planner{Buckets: []int{8, 1024}, MaxTokens: 512}
	plan, err := p.Plan([]int{3, 900, 4, 1000})
	if err != nil {
		t.Fatal(err)
	}
	for _, sb := range plan {
		if sb.Shape.Tokens == 1024 && sb.Shape.Rows != 1 {
			t.Fatalf("an over-budget sub-batch of %d rows", sb.Shape.Rows)
		}
	}
	if len(plan) != 3 {
		t.Fatalf("plan %v, want the short rows together and each long row alone", plan)
	}
}

func TestPlannerRefusesBadConfiguration(t *testing.T) {
	for _, p := range []Planner{
		{},
		{Buckets: []int{64, 32}},
		{Buckets: []int{32}, BatchSizes: []int{8, 4}},
		{MaxLength: 16, MaxTokens: -1},
	} {
		if _, err := p.Plan([]int{1}); err == nil {
			t.Errorf("%+v planned", p)
		}
	}
}

func FuzzPlan(f *testing.F) {
	f.Add([]byte{3, 200, 14, 0, 90}, uint16(4096), uint8(0))
	f.Add([]byte{255, 255, 1}, uint16(64), uint8(1))
	f.Fuzz(func(t *testing.T, raw []byte, budget uint16, mode uint8) {
		lens := make([]int, len(raw))
		for i, b := range raw {
			lens[i] = int(b) * int(b) / 16 // long-tailed
		}
		p := Planner{MaxTokens: int(budget) + 1}
		switch mode % 3 {
		case 0:
			p.Buckets = DefaultBuckets(512)
		case 1:
			p.MaxLength = 512
		default:
			p.Buckets, p.BatchSizes = []int{8, 40, 200}, []int{3, 5, 7}
		}
		checkProperties(t, p, lens)
	})
}
