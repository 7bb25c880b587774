package seq

import "context"

// windowObserverKey keys a context's window observer.
type windowObserverKey struct{}

// ObserveWindows returns a context under which every window a Model
// runs reports its Stats to fn as it ends: what one call, such as an
// online batch, ran, where Model.Stats sums every session's. A batch
// split across replicas is several windows, run at once: fn may be
// called concurrently.
func ObserveWindows(ctx context.Context, fn func(Stats)) context.Context {
	return context.WithValue(ctx, windowObserverKey{}, fn)
}

// observeWindow tells ctx's window observer, if any, of a window's Stats.
func observeWindow(ctx context.Context, st Stats) {
	if fn, ok := ctx.Value(windowObserverKey{}).(func(Stats)); ok && fn != nil {
		fn(st)
	}
}
