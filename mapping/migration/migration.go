// Package migration reads a store's versioned schema migrations: SQL files
// named NNNN_description.sql, one per schema version, embedded in the store's
// binary. Applying them is the store's business (each database has its own
// transaction and locking rules); reading and ordering them is shared here.
package migration

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"strings"
)

// Step is one schema version.
type Step struct {
	Version int
	Name    string // the file name
	SQL     string
}

// Load returns the migrations in dir of fsys in version order. A released
// file is never edited: a change is a new file with the next version. It
// fails on a file that is not named NNNN_description.sql, on a repeated or
// out-of-order version, and when there are none.
func Load(fsys fs.FS, dir string) ([]Step, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("reading migrations: %w", err)
	}
	var steps []Step
	for _, e := range entries { // ReadDir sorts by name
		name := e.Name()
		prefix, _, ok := strings.Cut(name, "_")
		if !ok || !strings.HasSuffix(name, ".sql") {
			return nil, fmt.Errorf("migration %s: name is not NNNN_description.sql", name)
		}
		v, err := strconv.Atoi(prefix)
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("migration %s: version %q is not a positive integer", name, prefix)
		}
		if n := len(steps); n > 0 && steps[n-1].Version >= v {
			return nil, fmt.Errorf("migration %s: version %d does not follow %d", name, v, steps[n-1].Version)
		}
		b, err := fs.ReadFile(fsys, path.Join(dir, name))
		if err != nil {
			return nil, fmt.Errorf("reading migration %s: %w", name, err)
		}
		steps = append(steps, Step{Version: v, Name: name, SQL: string(b)})
	}
	if len(steps) == 0 {
		return nil, errors.New("reading migrations: none embedded")
	}
	return steps, nil
}
