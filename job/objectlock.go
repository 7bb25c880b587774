package job

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/drainpipe/drainpipe/storage"
)

// ErrLocked reports an output that a running job holds.
var ErrLocked = errors.New("job: output in use by a running job")

// ErrLockLost reports a job whose lock on its output another job took
// over (--break-lock) while it ran: it stops before committing anything
// more, so the output never mixes two jobs' parts.
var ErrLockLost = errors.New("job: the output's lock was taken over by another job")

// ErrLockRelease reports a lock that could not be released at the end of
// a run: until it is removed, the next run needs --break-lock.
var ErrLockRelease = errors.New("job: the output's lock could not be released")

// locker is a job's hold on its output: check, before each commit, that
// it still holds it; release it, under ctx, at the end of the run.
type locker interface {
	check() error
	release(ctx context.Context) error
}

// lockOutput takes the output's lock, or reports the job holding it: an
// flock for a local output; for an object, a lock object beside it,
// taken under ctx, then checked and released under tidy (which the run's
// cancellation does not end at once: the lock is released after it).
// With breakLock, a lock object left by a job that died is taken over.
func lockOutput(ctx, tidy context.Context, store *storage.Opener, output string, breakLock bool) (locker, error) {
	if !storage.IsURL(output) {
		return lockFile(output)
	}
	dir, elem := storage.Split(output)
	host, _ := os.Hostname()
	token := make([]byte, 16)
	rand.Read(token)
	me := lockHolder{Host: host, PID: os.Getpid(), Started: time.Now().UTC().Truncate(time.Second), Token: hex.EncodeToString(token)}
	l := &objectLock{ctx: tidy, store: store, name: storage.Join(dir, "."+elem+".lock"), me: me}
	if err := l.take(ctx, breakLock); err != nil {
		if ctx.Err() != nil {
			// Cancelled under way: a write the store carried out leaves
			// our lock, which goes (if it is ours).
			l.release(tidy)
		}
		return nil, err
	}
	return l, nil
}

// objectLock holds an output on object storage as a lock with a token
// (not a lease: it never expires): an object
// made by a conditional write (If-None-Match), which of two jobs only one
// makes, naming the job that holds it and a token of its own. A job that
// dies leaves it: no server frees it, so the next job says whose it is
// and takes it over only when told to (breakLock), by a write conditional
// on the version it read, which of two breakers only one wins. The
// holder checks, before each commit, that the lock is still its own
// (stopping with ErrLockLost if not), and releases it by a delete
// conditional on its own version. A write whose answer was lost, retried
// and refused as if another job held the lock, is known by the token.
type objectLock struct {
	ctx     context.Context
	store   *storage.Opener
	name    string
	me      lockHolder
	version storage.Version // of our lock object
}

// lockHolder is what a lock object says of the job holding it.
type lockHolder struct {
	Host    string    `json:"host"`
	PID     int       `json:"pid"`
	Started time.Time `json:"started"`
	Token   string    `json:"token,omitempty"`
}

func (h lockHolder) String() string {
	return fmt.Sprintf("host %s, pid %d, since %s", h.Host, h.PID, h.Started.Format(time.RFC3339))
}

// lockAttempts bounds the rounds of take: a lock released between our
// refused write and our read of it is made again.
const lockAttempts = 3

func (l *objectLock) take(ctx context.Context, breakLock bool) error {
	me, err := json.Marshal(l.me)
	if err != nil {
		return err
	}
	for range lockAttempts {
		err := l.store.WriteFile(ctx, l.name, me, false)
		if err == nil {
			return l.confirm(ctx)
		}
		if !errors.Is(err, storage.ErrExists) {
			return fmt.Errorf("job: lock: %w", err)
		}
		held, v, err := l.read(ctx)
		if errors.Is(err, storage.ErrNotFound) {
			continue // released meanwhile
		}
		if err != nil {
			return fmt.Errorf("job: lock: %w", err)
		}
		if held.Token == l.me.Token {
			l.version = v // our own write, its answer lost and its retry refused
			return nil
		}
		if !breakLock {
			return fmt.Errorf("%w (%s): %s; if that job is gone, --resume --break-lock takes its lock over", ErrLocked, held, lockedOutput(l.name))
		}
		// Taken over by a write on the version read: of two jobs breaking
		// it at once, only one writes it.
		err = l.store.ReplaceFile(ctx, l.name, me, v)
		if err != nil && !errors.Is(err, storage.ErrChanged) {
			return fmt.Errorf("job: break the lock of %s: %w", held, err)
		}
		return l.confirm(ctx)
	}
	return fmt.Errorf("%w: the lock %s kept changing hands", ErrLocked, lockedOutput(l.name))
}

// confirm reads the lock back after our write: ours, or another job's
// that won (a refused take-over, or a store that ignores conditions on
// writes, where both writers are told they won and the last one has it).
func (l *objectLock) confirm(ctx context.Context) error {
	held, v, err := l.read(ctx)
	if err != nil {
		return fmt.Errorf("job: lock: %w", err)
	}
	if held.Token != l.me.Token {
		return fmt.Errorf("%w (%s): another job took the lock first: %s", ErrLocked, held, lockedOutput(l.name))
	}
	l.version = v
	return nil
}

// read returns the lock's holder and version; a lock it cannot parse
// names no holder.
func (l *objectLock) read(ctx context.Context) (lockHolder, storage.Version, error) {
	data, v, err := l.store.ReadVersion(ctx, l.name)
	if err != nil {
		return lockHolder{}, v, err
	}
	var held lockHolder
	if json.Unmarshal(data, &held) != nil {
		held.Host = "(a lock it cannot read)"
	}
	return held, v, nil
}

// check reports ErrLockLost unless the lock is still ours.
func (l *objectLock) check() error {
	held, _, err := l.read(l.ctx)
	if errors.Is(err, storage.ErrNotFound) {
		return fmt.Errorf("%w: the lock %s is gone", ErrLockLost, l.name)
	}
	if err != nil {
		return fmt.Errorf("job: checking the lock: %w", err)
	}
	if held.Token != l.me.Token {
		return fmt.Errorf("%w (%s): stopped before committing more of %s", ErrLockLost, held, lockedOutput(l.name))
	}
	return nil
}

// lockedOutput names the output a lock is for, without the lock's own name.
func lockedOutput(lockName string) string {
	dir, elem := storage.Split(lockName)
	return storage.Join(dir, elem[1:len(elem)-len(".lock")])
}

// release deletes the lock if it is still ours, by a delete conditional
// on our version of it (the read before it is for stores that ignore the
// condition): never another job's lock.
func (l *objectLock) release(ctx context.Context) error {
	held, _, err := l.read(ctx)
	switch {
	case errors.Is(err, storage.ErrNotFound):
		return fmt.Errorf("%w: %w: the lock %s is gone", ErrLockRelease, ErrLockLost, l.name)
	case err != nil:
		return fmt.Errorf("%w: %w", ErrLockRelease, err)
	case held.Token != l.me.Token:
		return fmt.Errorf("%w: %w (%s)", ErrLockRelease, ErrLockLost, held)
	}
	if err := l.store.RemoveVersion(ctx, l.name, l.version); err != nil {
		return fmt.Errorf("%w: %w; delete it once no job runs, or the next run needs --break-lock", ErrLockRelease, err)
	}
	return nil
}
