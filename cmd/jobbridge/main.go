// Command jobbridge serves a YAML catalog of job-backed tools over MCP, with
// the Tasks extension, and offers a demo, a catalog validator and a small
// client.
//
//	jobbridge serve --config FILE [--listen HOST:PORT] [--store sqlite:PATH] [--stdio]
//	jobbridge demo [--config FILE] [--listen HOST:PORT]
//	jobbridge validate FILE...
//	jobbridge call [--url URL] [--no-wait] TOOL [JSON_ARGS]
//	jobbridge try [--fake] [--yes] --config FILE TOOL [JSON_ARGS]
//	jobbridge version
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
)

// version is set at build time with -ldflags "-X main.version=v1.2.3"; it
// falls back to the module version recorded in the binary.
var version = ""

func buildVersion() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}

const usage = `jobbridge: MCP tasks for existing job systems

Usage:
  jobbridge serve --config FILE [--listen HOST:PORT] [--store sqlite:PATH] [--stdio]
  jobbridge demo [--config FILE] [--listen HOST:PORT]
  jobbridge validate FILE...
  jobbridge call [--url URL] [--no-wait] TOOL [JSON_ARGS]
  jobbridge try [--fake] [--yes] --config FILE TOOL [JSON_ARGS]
  jobbridge version

Run "jobbridge COMMAND -h" for a command's flags.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	var exit exitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		os.Exit(int(exit))
	default:
		fmt.Fprintln(os.Stderr, "jobbridge:", err)
		os.Exit(1)
	}
}

// exitError ends the program with a status and no further message (the
// command has already said what went wrong).
type exitError int

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitError(2)
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "serve":
		return runServe(ctx, rest, stdout, stderr)
	case "demo":
		return runDemo(ctx, rest, stdout, stderr)
	case "validate":
		return runValidate(rest, stdout, stderr)
	case "call":
		return runCall(ctx, rest, stdin, stdout, stderr)
	case "try":
		return runTry(ctx, rest, stdin, stdout, stderr)
	case "version":
		fmt.Fprintln(stdout, "jobbridge", buildVersion())
		return nil
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprintf(stderr, "jobbridge: unknown command %q\n\n%s", cmd, usage)
	return exitError(2)
}
