package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/jobbridge/jobbridge/catalog"
)

// runValidate checks catalogs and reports every problem as
// file:line:col: path: message. It exits 1 if any catalog has a problem.
// References to environment variables that are unset here are reported as
// warnings: the catalog may be validated on a machine without the secrets.
func runValidate(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "usage: jobbridge validate FILE...")
		return exitError(2)
	}
	failed := false
	for _, path := range args {
		cat, err := catalog.Load(path)
		if err != nil {
			failed = true
			var errs catalog.Errors
			if errors.As(err, &errs) {
				for _, e := range errs {
					fmt.Fprintln(stderr, e)
				}
				continue
			}
			fmt.Fprintf(stderr, "%s: %v\n", path, err)
			continue
		}
		for _, name := range cat.EnvRefs() {
			if _, ok := os.LookupEnv(name); !ok {
				fmt.Fprintf(stderr, "%s: warning: environment variable %s is not set here; serve will need it\n", path, name)
			}
		}
		fmt.Fprintf(stdout, "%s: ok (%d backends, %d tools, revision %s)\n", path, len(cat.Backends), len(cat.Tools), cat.Revision)
	}
	if failed {
		return exitError(1)
	}
	return nil
}
