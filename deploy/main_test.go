package deploy

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// jobbridgeBin is the jobbridge binary built once by TestMain from
// ../cmd/jobbridge: the server the deployment files deploy.
var jobbridgeBin string

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "jobbridge-deploy-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, "deploy tests:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	jobbridgeBin = filepath.Join(dir, "jobbridge")
	goCmd := os.Getenv("GO")
	if goCmd == "" {
		goCmd = "go"
	}
	build := exec.Command(goCmd, "build", "-o", jobbridgeBin, "../cmd/jobbridge")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "deploy tests: building jobbridge:", err)
		return 1
	}
	return m.Run()
}

// serveFlag is one flag of `jobbridge serve`, as its help lists it.
type serveFlag struct {
	name string
	// boolean flags take no value argument.
	boolean bool
}

var (
	serveFlagsOnce sync.Once
	serveFlagsSet  map[string]serveFlag
	serveFlagsErr  error
)

// flagLine matches a flag in the help of a Go flag.FlagSet: "  -name" for a
// boolean, "  -name type" for the others.
var flagLine = regexp.MustCompile(`^  -([A-Za-z0-9][A-Za-z0-9_-]*)( \S+)?$`)

// serveFlags returns the flags `jobbridge serve -h` lists.
func serveFlags(t *testing.T) map[string]serveFlag {
	t.Helper()
	serveFlagsOnce.Do(func() {
		out, err := exec.Command(jobbridgeBin, "serve", "-h").Output()
		if err != nil {
			serveFlagsErr = fmt.Errorf("jobbridge serve -h: %w", err)
			return
		}
		serveFlagsSet = map[string]serveFlag{}
		sc := bufio.NewScanner(bytes.NewReader(out))
		for sc.Scan() {
			if m := flagLine.FindStringSubmatch(sc.Text()); m != nil {
				serveFlagsSet[m[1]] = serveFlag{name: m[1], boolean: m[2] == ""}
			}
		}
		if len(serveFlagsSet) == 0 {
			serveFlagsErr = fmt.Errorf("jobbridge serve -h lists no flags:\n%s", out)
		}
	})
	if serveFlagsErr != nil {
		t.Fatal(serveFlagsErr)
	}
	return serveFlagsSet
}

// parseServeArgs reads the arguments of a `jobbridge serve` command line
// (after "serve") the way Go's flag package does, and returns the value of
// each flag ("true" for a boolean given alone). It fails on a flag serve
// does not have, a flag without its value, and a positional argument (serve
// takes none).
func parseServeArgs(flags map[string]serveFlag, args []string) (map[string]string, error) {
	out := map[string]string{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") || a == "-" || a == "--" {
			return nil, fmt.Errorf("argument %q: serve takes no positional arguments", a)
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		f, ok := flags[name]
		if !ok {
			return nil, fmt.Errorf("flag %q is not a flag of jobbridge serve", a)
		}
		switch {
		case hasValue:
		case f.boolean:
			value = "true"
		case i+1 < len(args):
			i++
			value = args[i]
		default:
			return nil, fmt.Errorf("flag %q has no value", a)
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("flag %q given twice", a)
		}
		out[name] = value
	}
	return out, nil
}

// portOf returns the port of a HOST:PORT listen address.
func portOf(addr string) (int, error) {
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(p)
}

func TestParseServeArgs(t *testing.T) {
	flags := map[string]serveFlag{
		"config": {name: "config"},
		"listen": {name: "listen"},
		"stdio":  {name: "stdio", boolean: true},
	}
	tests := []struct {
		name    string
		args    []string
		want    map[string]string
		wantErr string
	}{
		{"separate values", []string{"--config", "c.yaml", "-listen", ":80"}, map[string]string{"config": "c.yaml", "listen": ":80"}, ""},
		{"equals", []string{"--config=c.yaml", "--stdio"}, map[string]string{"config": "c.yaml", "stdio": "true"}, ""},
		{"unknown flag", []string{"--watch"}, nil, "not a flag"},
		{"missing value", []string{"--config"}, nil, "has no value"},
		{"positional", []string{"c.yaml"}, nil, "no positional"},
		{"twice", []string{"--config", "a", "--config", "b"}, nil, "twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseServeArgs(flags, tt.args)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("parseServeArgs(%q) error = %v, want one containing %q", tt.args, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("parseServeArgs(%q) = %v, want %v", tt.args, got, tt.want)
			}
		})
	}
}

func TestServeFlagsAreRead(t *testing.T) {
	flags := serveFlags(t)
	for _, want := range []serveFlag{{name: "config"}, {name: "listen"}, {name: "store"}, {name: "stdio", boolean: true}} {
		if got, ok := flags[want.name]; !ok || got != want {
			t.Errorf("serve -h: flag %q read as %+v (present %v), want %+v", want.name, got, ok, want)
		}
	}
}
