package main

import (
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"runtime"
)

// stdioStorePath is the task store of `serve --stdio` when none is given:
// a desktop or IDE client starts the server in a working directory of its
// choosing, so the store lives in the user's state directory instead:
//
//	$XDG_STATE_HOME/jobbridge/tasks.db            when XDG_STATE_HOME is set
//	~/Library/Application Support/jobbridge/...   on macOS
//	%LocalAppData%\jobbridge\tasks.db             on Windows
//	~/.local/state/jobbridge/tasks.db             elsewhere
func stdioStorePath(getenv func(string) string, goos string) (string, error) {
	if d := getenv("XDG_STATE_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "jobbridge", "tasks.db"), nil
	}
	switch goos {
	case "windows":
		if d := getenv("LocalAppData"); d != "" {
			return filepath.Join(d, "jobbridge", "tasks.db"), nil
		}
		return "", errors.New("no task store: %LocalAppData% is not set; give --store")
	}
	home := getenv("HOME")
	if home == "" {
		return "", errors.New("no task store: $HOME is not set; give --store or set XDG_STATE_HOME")
	}
	if goos == "darwin" {
		return filepath.Join(home, "Library", "Application Support", "jobbridge", "tasks.db"), nil
	}
	return filepath.Join(home, ".local", "state", "jobbridge", "tasks.db"), nil
}

// defaultStdioStore is stdioStorePath for this machine.
func defaultStdioStore() (string, error) { return stdioStorePath(os.Getenv, runtime.GOOS) }

// newStateKey returns 32 random bytes.
func newStateKey() []byte {
	k := make([]byte, 32)
	rand.Read(k) // never fails
	return k
}
