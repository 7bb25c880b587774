package testbin

import (
	"context"
	"flag"
	"sync"
	"testing"
)

// A Build makes, once a machine, something tests need: a server's binary
// or an npm package (Binary, Tool or NPM with their arguments). It
// returns at once when the thing is made already.
type Build func(ctx context.Context) error

// Prepared is a test binary's tests with builds going on beside them.
type Prepared struct {
	m      interface{ Run() int }
	cancel context.CancelFunc
	builds sync.WaitGroup
}

// Prepare starts builds, each on its own goroutine, and returns m
// wrapped: its Run runs the tests, then stops the builds no test waited
// for and returns once they have stopped. TestMain calls it first, so on
// a new machine the minutes the servers take to build pass while the
// tests before the first one that needs them run, side by side rather
// than one after another inside go test's timeout (ten minutes for a
// whole test binary, by default). A test that needs a server still asks
// for it (Binary waits for the build under way, in this process or
// another) and reports its error. Under -short, where the tests that run
// servers skip, Prepare starts nothing.
func Prepare(m interface{ Run() int }, builds ...Build) *Prepared {
	if !flag.Parsed() {
		flag.Parse()
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Prepared{m: m, cancel: cancel}
	if testing.Short() {
		return p
	}
	for _, b := range builds {
		// An error is the test's to report, when it asks again.
		p.builds.Go(func() { b(ctx) })
	}
	return p
}

// Run runs the tests, then stops the builds still going and waits for
// them. It returns the tests' exit code.
func (p *Prepared) Run() int {
	code := p.m.Run()
	p.cancel()
	p.builds.Wait()
	return code
}
