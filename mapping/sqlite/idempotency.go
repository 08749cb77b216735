package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jobbridge/jobbridge/mapping"
)

var _ mapping.IdempotencyStore = (*Store)(nil)

// claimIdempotencyQuery inserts a key's row (?1–?8), or takes over the row
// of the same principal and key when it expired at ?9 or names the task
// ?10 (NULL: none). It changes no row when the key is held.
const claimIdempotencyQuery = `INSERT INTO idempotency_keys
	(principal, key_hash, args_digest, task_key, sealed_id, created_at, expires_at, window_ms)
	VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
	ON CONFLICT (principal, key_hash) DO UPDATE SET
		args_digest = excluded.args_digest, task_key = excluded.task_key,
		sealed_id = excluded.sealed_id, created_at = excluded.created_at,
		expires_at = excluded.expires_at, window_ms = excluded.window_ms
	WHERE idempotency_keys.expires_at <= ?9 OR idempotency_keys.task_key = ?10`

const getIdempotencyQuery = `SELECT args_digest, task_key, sealed_id, created_at, expires_at, window_ms
	FROM idempotency_keys WHERE principal = ? AND key_hash = ? AND expires_at > ?`

// claimAttempts bounds the rounds of a claim whose holder vanished (was
// released or expired) between the claim and the read of the holder.
const claimAttempts = 8

// ClaimIdempotencyKey binds rec's key to its task unless the key is held
// (see mapping.IdempotencyStore). The claim is one statement on the writer,
// sharing its commit with the store's other writes; the writer begins
// IMMEDIATE, so that the check and the insert are one step, also for
// several processes on the file.
func (s *Store) ClaimIdempotencyKey(ctx context.Context, rec *mapping.IdempotencyRecord, replace *mapping.Key, now time.Time) (*mapping.IdempotencyRecord, error) {
	var rep any
	if replace != nil {
		rep = replace[:]
	}
	for range claimAttempts {
		var won bool
		err := s.commits.Do(ctx, func(ctx context.Context, tx *writeTx) error {
			res, err := tx.ExecContext(ctx, claimIdempotencyQuery,
				rec.Principal, rec.KeyHash[:], rec.ArgsDigest, rec.TaskKey[:], blob(rec.SealedID),
				rec.CreatedAt.UnixMilli(), rec.ExpiresAt.UnixMilli(), rec.Window.Milliseconds(),
				now.UnixMilli(), rep)
			if err != nil {
				return err
			}
			n, err := res.RowsAffected()
			won = n > 0
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("claiming an idempotency key: %w", err)
		}
		if won {
			return nil, nil
		}
		held, err := s.GetIdempotencyKey(ctx, rec.Principal, rec.KeyHash, now)
		if errors.Is(err, mapping.ErrNotFound) {
			continue // released meanwhile: claim again
		}
		return held, err
	}
	return nil, fmt.Errorf("claiming an idempotency key: its holder kept changing (%d attempts)", claimAttempts)
}

// GetIdempotencyKey returns principal's unexpired row for keyHash.
func (s *Store) GetIdempotencyKey(ctx context.Context, principal string, keyHash mapping.Key, now time.Time) (*mapping.IdempotencyRecord, error) {
	rec := &mapping.IdempotencyRecord{Principal: principal, KeyHash: keyHash}
	var (
		taskKey                    []byte
		sealed                     nullBlob
		created, expires, windowMs int64
	)
	err := s.reader.QueryRowContext(ctx, getIdempotencyQuery, principal, keyHash[:], now.UnixMilli()).
		Scan(&rec.ArgsDigest, &taskKey, &sealed, &created, &expires, &windowMs)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, mapping.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("reading an idempotency key: %w", err)
	}
	if len(taskKey) != len(rec.TaskKey) {
		return nil, fmt.Errorf("reading an idempotency key: stored task key has %d bytes, want %d", len(taskKey), len(rec.TaskKey))
	}
	copy(rec.TaskKey[:], taskKey)
	rec.SealedID = sealed.b
	rec.CreatedAt = timeOf(created)
	rec.ExpiresAt = timeOf(expires)
	rec.Window = time.Duration(windowMs) * time.Millisecond
	return rec, nil
}

// ReleaseIdempotencyKey deletes principal's row for keyHash if it names
// taskKey.
func (s *Store) ReleaseIdempotencyKey(ctx context.Context, principal string, keyHash, taskKey mapping.Key) (bool, error) {
	var deleted bool
	err := s.commits.Do(ctx, func(ctx context.Context, tx *writeTx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM idempotency_keys WHERE principal = ? AND key_hash = ? AND task_key = ?`,
			principal, keyHash[:], taskKey[:])
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		deleted = n > 0
		return err
	})
	if err != nil {
		return false, fmt.Errorf("releasing an idempotency key: %w", err)
	}
	return deleted, nil
}

// PurgeIdempotencyKeys deletes the rows expired at now, along the
// idempotency_keys_expires index.
func (s *Store) PurgeIdempotencyKeys(ctx context.Context, now time.Time) (int, error) {
	res, err := s.writer.ExecContext(ctx, `DELETE FROM idempotency_keys WHERE expires_at <= ?`, now.UnixMilli())
	if err != nil {
		return 0, fmt.Errorf("purging idempotency keys: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("purging idempotency keys: %w", err)
	}
	return int(n), nil
}
