package postgres

import (
	"context"
	"fmt"
)

// StateKey returns the state key kept in the database. The first call on
// a database without one keeps generate's key; every later call, from any
// replica, returns that key: the insert does nothing when a concurrent
// replica's insert came first, and the read returns the one kept.
func (s *Store) StateKey(ctx context.Context, generate func() []byte) ([]byte, error) {
	var key []byte
	err := s.pool.QueryRow(ctx, `SELECT value FROM settings WHERE name = 'state_key'`).Scan(&key)
	if err == nil && len(key) > 0 {
		return key, nil
	}
	if _, err := s.pool.Exec(ctx, `INSERT INTO settings (name, value) VALUES ('state_key', $1) ON CONFLICT (name) DO NOTHING`, generate()); err != nil {
		return nil, fmt.Errorf("keeping the state key in the store: %w", err)
	}
	if err := s.pool.QueryRow(ctx, `SELECT value FROM settings WHERE name = 'state_key'`).Scan(&key); err != nil {
		return nil, fmt.Errorf("reading the state key from the store: %w", err)
	}
	return key, nil
}
