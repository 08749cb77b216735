package mapping

import (
	"context"
	"crypto/sha256"
	"errors"
	"time"
)

// Idempotency keys. A caller may name a call with a key of its choosing (or
// the catalog derives one from the arguments); a second call with the same
// key from the same principal gets the first call's task instead of a
// second job. The store keeps one row per (principal, key): the hash of the
// key, never the key itself, and the task's ID only sealed by the bridge.
// The rows live in a table of their own, beside the tasks.

// IdempotencyStore is implemented by the stores that keep idempotency keys
// (both of this repository's). The bridge discovers it by type assertion;
// without it, calls with a key are refused rather than risk a second job.
//
// All methods are safe for concurrent use, also by processes sharing the
// store: ClaimIdempotencyKey's check and insert are one atomic step.
type IdempotencyStore interface {
	// ClaimIdempotencyKey binds rec's key to rec's task, unless the key is
	// held: it inserts rec when the principal has no row for rec.KeyHash,
	// or when the row there has expired at now, or when the row there
	// still names the task replace (non-nil) — the caller found that task
	// gone or past its window and takes the key over. It then returns nil.
	// Otherwise it changes nothing and returns the row that holds the key.
	// Of concurrent claims of one free key, exactly one wins; the others
	// get the winner's row.
	ClaimIdempotencyKey(ctx context.Context, rec *IdempotencyRecord, replace *Key, now time.Time) (held *IdempotencyRecord, err error)

	// GetIdempotencyKey returns principal's row for keyHash if it has not
	// expired at now, else ErrNotFound. Another principal's row reads like
	// a missing one.
	GetIdempotencyKey(ctx context.Context, principal string, keyHash Key, now time.Time) (*IdempotencyRecord, error)

	// ReleaseIdempotencyKey deletes principal's row for keyHash if it still
	// names the task taskKey (a claim whose task could not be created), and
	// reports whether it did.
	ReleaseIdempotencyKey(ctx context.Context, principal string, keyHash, taskKey Key) (bool, error)

	// PurgeIdempotencyKeys deletes the rows that have expired at now and
	// returns how many.
	PurgeIdempotencyKeys(ctx context.Context, now time.Time) (int, error)
}

// IdempotencyRecord is one row of the idempotency table.
type IdempotencyRecord struct {
	Principal string
	// KeyHash is IdempotencyKeyOf of the caller's key.
	KeyHash Key
	// ArgsDigest identifies the call the key was first used for (the tool
	// and its arguments); a reuse with another digest is refused.
	ArgsDigest string
	// TaskKey is the store key of the task the key names.
	TaskKey Key
	// SealedID is the task's ID sealed by the bridge (as Task.SealedID);
	// the store cannot open it.
	SealedID []byte
	// CreatedAt is when the key was claimed.
	CreatedAt time.Time
	// ExpiresAt is when the row stops counting: the task's own expiry, since
	// a key cannot name a task that is gone.
	ExpiresAt time.Time
	// Window is how long after its task ended the key still names it.
	Window time.Duration
}

// ErrIdempotencyUnsupported is returned (wrapped) by the bridge's lookups
// when the store keeps no idempotency keys.
var ErrIdempotencyUnsupported = errors.New("the task store keeps no idempotency keys")

// IdempotencyKeyOf returns the hash under which a caller's idempotency key
// is stored. It is domain-separated from KeyOf, so that a key equal to some
// task ID never hashes to that task's key.
func IdempotencyKeyOf(key string) Key {
	return sha256.Sum256([]byte("jobbridge idempotency key\x00" + key))
}
