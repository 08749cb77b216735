package sqlite

import (
	"context"
	"fmt"
)

// StateKey returns the state key kept in the store. The first call on a
// store without one keeps generate's key; every later call, in this
// process or another on the same file, returns that key.
func (s *Store) StateKey(ctx context.Context, generate func() []byte) ([]byte, error) {
	var key []byte
	err := s.reader.QueryRowContext(ctx, `SELECT value FROM settings WHERE name = 'state_key'`).Scan(&key)
	if err == nil && len(key) > 0 {
		return key, nil
	}
	if _, err := s.writer.ExecContext(ctx, `INSERT INTO settings (name, value) VALUES ('state_key', ?) ON CONFLICT (name) DO NOTHING`, generate()); err != nil {
		return nil, fmt.Errorf("keeping the state key in the store: %w", err)
	}
	if err := s.writer.QueryRowContext(ctx, `SELECT value FROM settings WHERE name = 'state_key'`).Scan(&key); err != nil {
		return nil, fmt.Errorf("reading the state key from the store: %w", err)
	}
	return key, nil
}
