package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"

	migrationpkg "github.com/jobbridge/jobbridge/mapping/migration"
)

// migrationFiles holds the schema, one file per version, named
// NNNN_description.sql. A released file is never edited; a change is a new
// file with the next version.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

// schemaStep is one schema version.
type schemaStep = migrationpkg.Step

// loadMigrations returns the embedded migrations in version order.
func loadMigrations(fsys fs.FS) ([]schemaStep, error) { return migrationpkg.Load(fsys, "migrations") }

// migrate brings the schema of db up to the newest of ms in one transaction:
// either every pending migration is applied or none is. It refuses a database
// whose schema is newer than ms, which an older build must not write to.
func migrate(ctx context.Context, db *sql.DB, ms []schemaStep) (err error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("beginning migration: %w", err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()

	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER NOT NULL PRIMARY KEY,
		applied_at INTEGER NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000 AS INTEGER))
	)`); err != nil {
		return fmt.Errorf("creating schema_migrations: %w", err)
	}
	var current int
	if err := tx.QueryRowContext(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&current); err != nil {
		return fmt.Errorf("reading schema version: %w", err)
	}
	if newest := ms[len(ms)-1].Version; current > newest {
		return fmt.Errorf("database schema version %d is newer than this build supports (%d)", current, newest)
	}
	for _, m := range ms {
		if m.Version <= current {
			continue
		}
		if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
			return fmt.Errorf("applying migration %s: %w", m.Name, err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version) VALUES (?)`, m.Version); err != nil {
			return fmt.Errorf("recording migration %s: %w", m.Name, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("committing migrations: %w", err)
	}
	return nil
}

// checkSchema checks, without changing anything, that db has the schema of
// the newest of ms: a Shared store opened while the server of another
// build (the process pid, 0 if unknown) holds the file must not migrate it
// under that server, nor write to a schema it does not know.
func checkSchema(ctx context.Context, db *sql.DB, ms []schemaStep, pid int) error {
	var current int
	err := db.QueryRowContext(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&current)
	if err != nil {
		return fmt.Errorf("reading schema version: %w", err)
	}
	if newest := ms[len(ms)-1].Version; current != newest {
		server := "the server that holds it"
		if pid > 0 {
			server = fmt.Sprintf("the server that holds it (pid %d)", pid)
		}
		return fmt.Errorf("database schema version %d is not this build's (%d), and %s migrates it: use the jobbridge build of that server, or stop it and run this one again",
			current, newest, server)
	}
	return nil
}
