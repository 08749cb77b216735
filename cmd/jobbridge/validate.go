package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/jobbridge/jobbridge/catalog"
)

// runValidate checks catalogs and reports every problem as
// file:line:col: path: message. It exits 1 if any catalog has a problem.
// The catalog's warnings are reported as "warning: file:line:col: path:
// message" and do not change the exit status; so are references to
// environment variables that are unset here, and to secret files missing
// here: the catalog may be validated on a machine without the secrets.
func runValidate(args []string, stdout, stderr io.Writer) error {
	cmd := newCommand("validate", validateUsage, stdout, stderr)
	files, err := cmd.parse(args)
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return cmd.usageErrorf("missing the catalog FILE to check (the built-in demo catalog: jobbridge demo --check)")
	}
	return validate(files, catalogTypes(), stdout, stderr)
}

const validateUsage = `usage: jobbridge validate FILE...

Checks catalogs without serving them and reports every problem at once, as
file:line:col: path: message. Doubtful but allowed settings are reported as
"warning: ...", and so are environment variables a catalog references that
are unset here and ${file:PATH} secrets missing here (serve will need
them). Exit status 1 when a catalog has a problem, 0 with warnings alone,
2 for a usage error. A file whose name starts with "-" follows "--".

Example:

  jobbridge validate configs/demo.yaml configs/github-actions.yaml

`

// validate checks the catalogs at paths, knowing the backend types given.
func validate(paths []string, types []catalog.BackendType, stdout, stderr io.Writer) error {
	failed := false
	for _, path := range paths {
		cat, err := catalog.Load(path, types...)
		if !reportValidation(path, cat, err, os.LookupEnv, stdout, stderr) {
			failed = true
		}
	}
	if failed {
		return exitError(1)
	}
	return nil
}

// reportValidation reports the outcome of loading the catalog named name:
// every problem on stderr, or its warnings (and the environment variables
// getenv lacks, the secret files missing here) on stderr and the summary
// line on stdout. It returns whether the catalog is valid.
func reportValidation(name string, cat *catalog.Catalog, err error, getenv func(string) (string, bool), stdout, stderr io.Writer) bool {
	if err != nil {
		var errs catalog.Errors
		if errors.As(err, &errs) {
			for _, e := range errs {
				fmt.Fprintln(stderr, e)
			}
			return false
		}
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return false
	}
	for _, w := range cat.Warnings {
		fmt.Fprintln(stderr, "warning: "+w.Error())
	}
	for _, env := range cat.EnvRefs() {
		if _, ok := getenv(env); !ok {
			fmt.Fprintf(stderr, "%s: warning: environment variable %s is not set here; serve will need it\n", name, env)
		}
	}
	for _, file := range cat.FileRefs() {
		if _, err := os.Stat(file); err != nil {
			fmt.Fprintf(stderr, "%s: warning: secret file %s cannot be read here (%v); serve will need it\n", name, file, statReason(err))
		}
	}
	fmt.Fprintf(stdout, "%s: ok (%d backends, %d tools, revision %s)\n", name, len(cat.Backends), len(cat.Tools), cat.Revision)
	return true
}

// statReason is the system's reason in a Stat error ("no such file or
// directory"), without the path it repeats.
func statReason(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
