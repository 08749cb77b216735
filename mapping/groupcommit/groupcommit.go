// Package groupcommit batches concurrent durable writes into one database
// transaction per commit, so that N writers pay for one commit (one fsync)
// instead of N, while each keeps its own outcome.
//
// A [Committer] runs one committer goroutine. [Committer.Do] queues a write
// and waits; the committer takes every write queued so far (up to
// [Options.MaxBatch]), begins one transaction, runs each write under a
// savepoint of its own, commits, and answers the writers. Writes queued
// while a transaction commits form the next batch, so there is no
// artificial delay: a lone writer waits for exactly one commit, and under
// load the batches grow to the number of waiting writers. A batch of one
// write runs without a savepoint: its transaction is its savepoint.
//
// It guarantees:
//
//   - Durability: Do returns nil only after the transaction holding its
//     write has committed, as durably as the database's commit is.
//   - Isolation of outcomes: a write whose function returns an error is
//     rolled back to its savepoint and fails alone, with that error; the
//     other writes of the batch go on. A write sees the effects of the
//     writes before it in the same batch, as if they had committed.
//   - All or nothing on failure of the batch: if beginning the transaction,
//     a savepoint or the COMMIT fails, every write of the batch that did not
//     fail on its own returns that error, and none of the batch is applied.
//     (As for any transaction, a COMMIT cut off by a lost connection may
//     have taken effect without the database being able to say so.)
//   - A write that Do returned an error for has not changed anything, but
//     for that cut-off COMMIT. A caller whose context ends while
//     its write still waits in the queue withdraws it and gets the
//     context's error; once its batch has begun, Do waits for the batch's
//     outcome whatever the context says, since it could not take the write
//     back.
//   - Close drains: writes queued before Close are committed (or failed)
//     and answered; Do after Close returns [ErrClosed].
//
// Writes run one at a time on the committer goroutine, in queue order, with
// the committer's own context (not the caller's, which would abort the
// transaction of the whole batch if it ended).
package groupcommit

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// Tx is an open transaction of one batch. Savepoint marks the point that
// RollbackToSavepoint returns to; ReleaseSavepoint forgets it, keeping what
// was written after it. The committer never nests savepoints, so one name
// serves them all.
type Tx interface {
	Savepoint(ctx context.Context) error
	RollbackToSavepoint(ctx context.Context) error
	ReleaseSavepoint(ctx context.Context) error
	Commit(ctx context.Context) error
	Rollback(ctx context.Context) error
}

// Write is one durable write, run inside the batch's transaction. It must
// leave no change behind that its savepoint could not undo (it does not
// commit or roll back tx itself).
type Write[T Tx] func(ctx context.Context, tx T) error

// DefaultMaxBatch is the batch bound when Options.MaxBatch is not positive.
const DefaultMaxBatch = 256

// Options tunes a Committer.
type Options struct {
	// MaxBatch bounds the writes of one transaction (DefaultMaxBatch if
	// not positive).
	MaxBatch int
}

// ErrClosed is returned by Do after Close.
var ErrClosed = errors.New("group commit: closed")

// Committer batches writes into transactions begun by its begin function.
type Committer[T Tx] struct {
	begin    func(ctx context.Context) (T, error)
	maxBatch int
	// ctx is the committer's lifetime context: batches outlive the
	// requests that queued their writes, on purpose.
	ctx context.Context

	mu      sync.Mutex
	queue   []*request[T]
	closed  bool
	wake    chan struct{} // capacity 1: a write was queued or Close was called
	stopped chan struct{} // closed when the committer goroutine has drained and ended
}

// request is one queued write.
type request[T Tx] struct {
	write Write[T]
	// taken is set (under Committer.mu) when a batch takes the request;
	// until then its caller may withdraw it.
	taken bool
	done  chan error // capacity 1
}

// New starts a committer whose batches are transactions begun by begin.
// The caller must Close it.
func New[T Tx](begin func(ctx context.Context) (T, error), opts Options) *Committer[T] {
	c := &Committer[T]{
		begin:    begin,
		maxBatch: opts.MaxBatch,
		// The committer's goroutine is not a request path: its batches
		// belong to the store's lifetime, which Close ends.
		ctx:     context.Background(),
		wake:    make(chan struct{}, 1),
		stopped: make(chan struct{}),
	}
	if c.maxBatch <= 0 {
		c.maxBatch = DefaultMaxBatch
	}
	go c.run()
	return c
}

// Do queues write, waits until the transaction holding it has committed,
// and returns nil; or it returns the write's own error (the write rolled
// back, the batch went on), the batch's error (nothing of the batch
// applied), ctx's error if ctx ended before a batch took the write, or
// ErrClosed.
func (c *Committer[T]) Do(ctx context.Context, write Write[T]) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	r := &request[T]{write: write, done: make(chan error, 1)}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return ErrClosed
	}
	c.queue = append(c.queue, r)
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}

	select {
	case err := <-r.done:
		return err
	case <-ctx.Done():
	}
	c.mu.Lock()
	if !r.taken {
		for i, q := range c.queue {
			if q == r {
				c.queue = append(c.queue[:i], c.queue[i+1:]...)
				break
			}
		}
		c.mu.Unlock()
		return ctx.Err()
	}
	c.mu.Unlock()
	return <-r.done
}

// Queued returns how many writes wait for a batch (not counting those of
// the batch under way).
func (c *Committer[T]) Queued() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.queue)
}

// Close stops taking writes, waits until every write queued before it has
// been committed or failed and answered, and ends the committer. Further
// calls wait likewise and return nil.
func (c *Committer[T]) Close() error {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
	<-c.stopped
	return nil
}

// run is the committer goroutine: it runs batches until Close was called and
// the queue is empty.
func (c *Committer[T]) run() {
	defer close(c.stopped)
	for {
		batch, closed := c.take()
		if len(batch) > 0 {
			c.commit(batch)
			continue
		}
		if closed {
			return
		}
		<-c.wake
	}
}

// take removes up to maxBatch requests from the queue, marking them taken.
func (c *Committer[T]) take() ([]*request[T], bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := min(len(c.queue), c.maxBatch)
	batch := make([]*request[T], n)
	copy(batch, c.queue[:n])
	rest := copy(c.queue, c.queue[n:])
	clear(c.queue[rest:])
	c.queue = c.queue[:rest]
	for _, r := range batch {
		r.taken = true
	}
	return batch, c.closed
}

// commit runs batch in one transaction and answers its requests.
func (c *Committer[T]) commit(batch []*request[T]) {
	ctx := c.ctx
	// own[i] is the error of batch[i]'s write when it failed alone.
	own := make([]error, len(batch))
	answer := func(batchErr error) {
		for i, r := range batch {
			if own[i] != nil {
				r.done <- own[i]
			} else {
				r.done <- batchErr
			}
		}
	}

	tx, err := c.begin(ctx)
	if err != nil {
		answer(fmt.Errorf("beginning transaction: %w", err))
		return
	}
	if len(batch) == 1 {
		// A lone write needs no savepoint: if it fails, the whole
		// (one-write) transaction rolls back.
		if err := batch[0].write(ctx, tx); err != nil {
			_ = tx.Rollback(ctx)
			own[0] = err
			answer(nil)
			return
		}
	} else {
		for i, r := range batch {
			if err := c.runSaved(ctx, tx, r.write, &own[i]); err != nil {
				_ = tx.Rollback(ctx)
				answer(err)
				return
			}
		}
	}
	if err := tx.Commit(ctx); err != nil {
		answer(fmt.Errorf("committing: %w", err))
		return
	}
	answer(nil)
}

// runSaved runs write under a savepoint, rolling back to it and setting
// *own to the write's error if it fails. It returns an error only when the
// savepoint itself fails, which leaves tx unusable.
func (c *Committer[T]) runSaved(ctx context.Context, tx T, write Write[T], own *error) error {
	if err := tx.Savepoint(ctx); err != nil {
		return fmt.Errorf("setting savepoint: %w", err)
	}
	if err := write(ctx, tx); err != nil {
		*own = err
		if err := tx.RollbackToSavepoint(ctx); err != nil {
			return fmt.Errorf("rolling back to savepoint: %w", err)
		}
	}
	if err := tx.ReleaseSavepoint(ctx); err != nil {
		return fmt.Errorf("releasing savepoint: %w", err)
	}
	return nil
}
