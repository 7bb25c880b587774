package job

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/drainpipe/drainpipe/storage"
)

// ErrLocked reports an output that a running job holds.
var ErrLocked = errors.New("job: output in use by a running job")

// locker is a job's hold on its output, let go at the end of the run.
type locker interface{ release() }

// lockOutput takes the output's lock, or reports the job holding it: an
// flock for a local output; for an object, a lock object beside it. With
// breakLock, a lock object left by a job that died is taken over.
func lockOutput(ctx context.Context, store *storage.Opener, output string, breakLock bool) (locker, error) {
	if !storage.IsURL(output) {
		return lockFile(output)
	}
	dir, elem := storage.Split(output)
	l := &objectLock{ctx: context.WithoutCancel(ctx), store: store, name: storage.Join(dir, "."+elem+".lock")}
	return l, l.take(breakLock)
}

// objectLock holds an output on object storage: an object created with a
// conditional write (If-None-Match), which of two jobs only one makes,
// naming the job that holds it. A job that dies leaves it: no server
// frees it, so the next job says whose it is and takes it over only when
// told to (breakLock).
type objectLock struct {
	ctx   context.Context
	store *storage.Opener
	name  string
}

// lockHolder is what a lock object says of the job holding it.
type lockHolder struct {
	Host    string    `json:"host"`
	PID     int       `json:"pid"`
	Started time.Time `json:"started"`
}

func (h lockHolder) String() string {
	return fmt.Sprintf("host %s, pid %d, since %s", h.Host, h.PID, h.Started.Format(time.RFC3339))
}

func (l *objectLock) take(breakLock bool) error {
	host, _ := os.Hostname()
	me, err := json.Marshal(lockHolder{Host: host, PID: os.Getpid(), Started: time.Now().UTC().Truncate(time.Second)})
	if err != nil {
		return err
	}
	err = l.store.WriteFile(l.ctx, l.name, me, false)
	if !errors.Is(err, storage.ErrExists) {
		if err != nil {
			return fmt.Errorf("job: lock: %w", err)
		}
		return nil
	}
	var held lockHolder
	data, rerr := l.store.ReadFile(l.ctx, l.name)
	if rerr == nil {
		rerr = json.Unmarshal(data, &held)
	}
	whose := held.String()
	if rerr != nil {
		whose = "a holder it does not name"
	}
	if !breakLock {
		return fmt.Errorf("%w (%s): %s; if that job is gone, --resume --break-lock takes its lock over", ErrLocked, whose, lockedOutput(l.name))
	}
	// Taken over: the stale lock goes, and ours is made as any other, so
	// of two jobs breaking it at once only one holds it.
	if err := l.store.Remove(l.ctx, l.name); err != nil {
		return fmt.Errorf("job: break the lock of %s: %w", whose, err)
	}
	if err := l.store.WriteFile(l.ctx, l.name, me, false); err != nil {
		if errors.Is(err, storage.ErrExists) {
			return fmt.Errorf("%w: another job took the lock first: %s", ErrLocked, lockedOutput(l.name))
		}
		return fmt.Errorf("job: lock: %w", err)
	}
	return nil
}

// lockedOutput names the output a lock is for, without the lock's own name.
func lockedOutput(lockName string) string {
	dir, elem := storage.Split(lockName)
	return storage.Join(dir, elem[1:len(elem)-len(".lock")])
}

func (l *objectLock) release() { l.store.Remove(l.ctx, l.name) }
