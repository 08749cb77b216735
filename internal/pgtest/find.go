package pgtest

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// debianBinGlob matches the binary directories of Debian's PostgreSQL
// packages, one per major version.
const debianBinGlob = "/usr/lib/postgresql/*/bin"

// findBinaries returns the directory holding initdb and postgres: the newest
// version among the directories matching glob, or else the directory of
// initdb on PATH (found with lookPath). The error wraps ErrNotInstalled.
func findBinaries(glob string, lookPath func(string) (string, error)) (string, error) {
	dirs, err := filepath.Glob(glob)
	if err != nil {
		return "", fmt.Errorf("searching %s: %w", glob, err)
	}
	dirs = slices.DeleteFunc(dirs, func(dir string) bool { return !hasServer(dir) })
	if len(dirs) > 0 {
		return slices.MaxFunc(dirs, func(a, b string) int {
			return compareVersions(filepath.Base(filepath.Dir(a)), filepath.Base(filepath.Dir(b)))
		}), nil
	}
	if initdb, err := lookPath("initdb"); err == nil {
		if dir := filepath.Dir(initdb); hasServer(dir) {
			return dir, nil
		}
	}
	return "", fmt.Errorf("%w: no initdb and postgres in %s or on PATH; install PostgreSQL (Debian: apt-get install postgresql) or set %s=1 to skip the tests that need it",
		ErrNotInstalled, glob, SkipEnv)
}

// hasServer reports whether dir holds the initdb and postgres executables.
func hasServer(dir string) bool {
	for _, name := range []string{"initdb", "postgres"} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
			return false
		}
	}
	return true
}

// compareVersions compares dotted version numbers such as "9.6" and "15"
// numerically; a part that is not a number sorts before any number.
func compareVersions(a, b string) int {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := range max(len(as), len(bs)) {
		x, y := versionPart(as, i), versionPart(bs, i)
		if c := cmp.Compare(x, y); c != 0 {
			return c
		}
	}
	return 0
}

// versionPart returns parts[i] as a number: -1 when it is not one, 0 when
// there is no such part.
func versionPart(parts []string, i int) int {
	if i >= len(parts) {
		return 0
	}
	n, err := strconv.Atoi(parts[i])
	if err != nil {
		return -1
	}
	return n
}
