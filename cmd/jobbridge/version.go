package main

import (
	"fmt"
	"io"
	"runtime/debug"
	"strings"
)

// buildInfo is what the Go toolchain recorded in the binary: the module
// version (set by `go install module@version`, or derived from the VCS by
// `go build` in a checkout) and the VCS revision, its time and whether the
// tree had uncommitted changes. Nothing here is kept by hand.
type buildInfo struct {
	version  string // module version, "(devel)" when the toolchain knew none
	revision string // vcs.revision
	time     string // vcs.time, RFC 3339
	modified bool   // vcs.modified
	goVer    string
}

// readBuildInfo reads the build information of the running binary.
func readBuildInfo() buildInfo {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return buildInfo{version: "(devel)"}
	}
	info := buildInfo{version: bi.Main.Version, goVer: bi.GoVersion}
	if info.version == "" {
		info.version = "(devel)"
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			info.revision = s.Value
		case "vcs.time":
			info.time = s.Value
		case "vcs.modified":
			info.modified = s.Value == "true"
		}
	}
	return info
}

// buildVersion is the version the server reports (serverInfo, tasks'
// build, traces): the module version, else the short VCS revision.
func buildVersion() string { return readBuildInfo().short() }

// short is the version in one word: the module version, else "devel-" and
// the short revision ("-dirty" when modified), else "devel".
func (info buildInfo) short() string {
	if info.version != "(devel)" {
		return info.version
	}
	if info.revision != "" {
		v := "devel-" + info.revision[:min(12, len(info.revision))]
		if info.modified {
			v += "-dirty"
		}
		return v
	}
	return "devel"
}

// printVersion writes the version lines of `jobbridge version`.
func printVersion(w io.Writer, info buildInfo) {
	var b strings.Builder
	fmt.Fprintf(&b, "jobbridge %s\n", info.version)
	if info.revision != "" {
		modified := ""
		if info.modified {
			modified = " (modified)"
		}
		fmt.Fprintf(&b, "revision %s%s\n", info.revision, modified)
	}
	if info.time != "" {
		fmt.Fprintf(&b, "time     %s\n", info.time)
	}
	if info.goVer != "" {
		fmt.Fprintf(&b, "go       %s\n", info.goVer)
	}
	io.WriteString(w, b.String())
}

const versionUsage = `usage: jobbridge version

Prints what the Go toolchain recorded in the binary: the module version (as
installed with "go install ...@VERSION", or derived from the checkout by "go
build"), the VCS revision and its time, whether the tree had uncommitted
changes, and the Go version. "jobbridge --version" prints the same.

Example:

  jobbridge version
`
