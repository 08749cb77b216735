package postgres

import (
	"context"
	"embed"
	"fmt"
	"io/fs"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	migrationpkg "github.com/jobbridge/jobbridge/mapping/migration"
)

// migrationFiles holds the schema, one file per version, named
// NNNN_description.sql. A released file is never edited; a change is a new
// file with the next version.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

// migrationLock is the key of the transaction-level advisory lock that
// serialises migrations, "jobbmigr" in ASCII. Advisory locks are per
// database, so stores in different databases do not wait for each other.
const migrationLock int64 = 0x6a6f62626d696772

// schemaStep is one schema version.
type schemaStep = migrationpkg.Step

// loadMigrations returns the embedded migrations in version order.
func loadMigrations(fsys fs.FS) ([]schemaStep, error) { return migrationpkg.Load(fsys, "migrations") }

// migrate brings the schema up to the newest of ms in one transaction, which
// first takes the migrationLock: replicas starting together apply each
// migration once, one after the other, and a replica that finds the schema
// current changes nothing. Either every pending migration is applied or none
// is. A database whose schema is newer than ms, which an older build must not
// write to, is refused.
func migrate(ctx context.Context, pool *pgxpool.Pool, ms []schemaStep) (err error) {
	// Read committed, whatever the connection's default, so that each
	// statement after the lock sees what the previous holder committed.
	tx, err := pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		return fmt.Errorf("beginning migration: %w", err)
	}
	defer func() {
		if err != nil {
			// If ctx is done, pgx closes the connection instead, which
			// rolls back too.
			_ = tx.Rollback(ctx)
		}
	}()

	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, migrationLock); err != nil {
		return fmt.Errorf("taking the migration lock: %w", err)
	}
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER     NOT NULL PRIMARY KEY,
		name       TEXT        NOT NULL,
		applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
	)`); err != nil {
		return fmt.Errorf("creating schema_migrations: %w", err)
	}
	var current int
	if err := tx.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&current); err != nil {
		return fmt.Errorf("reading schema version: %w", err)
	}
	if newest := ms[len(ms)-1].Version; current > newest {
		return fmt.Errorf("database schema version %d is newer than this build supports (%d)", current, newest)
	}
	for _, m := range ms {
		if m.Version <= current {
			continue
		}
		// Without arguments Exec uses the simple protocol, which runs a
		// file of several statements.
		if _, err := tx.Exec(ctx, m.SQL); err != nil {
			return fmt.Errorf("applying migration %s: %w", m.Name, err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, name) VALUES ($1, $2)`, m.Version, m.Name); err != nil {
			return fmt.Errorf("recording migration %s: %w", m.Name, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("committing migrations: %w", err)
	}
	return nil
}
