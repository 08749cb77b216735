// Command jobbridge serves a YAML catalog of job-backed tools over MCP, with
// the Tasks extension, and offers a demo, a catalog validator and a small
// client.
//
//	jobbridge serve --config FILE [--listen HOST:PORT] [--store sqlite:PATH] [--stdio]
//	jobbridge demo [--config FILE] [--listen HOST:PORT] [--auth] [--check]
//	jobbridge validate FILE...
//	jobbridge call [--url URL] [--no-wait] TOOL [JSON_ARGS]
//	jobbridge task get|watch|answer|cancel [--url URL] ID
//	jobbridge tools [--url URL]
//	jobbridge tasks list|cancel --store URL ...
//	jobbridge try [--fake] [--yes] --config FILE TOOL [JSON_ARGS]
//	jobbridge version
//	jobbridge completion bash|zsh|fish
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

const usage = `jobbridge: MCP tasks for existing job systems

Usage:
  jobbridge serve --config FILE [--listen HOST:PORT] [--store sqlite:PATH] [--stdio]
  jobbridge demo [--config FILE] [--listen HOST:PORT] [--auth] [--check]
  jobbridge validate FILE...
  jobbridge call [--url URL] [--no-wait] TOOL [JSON_ARGS]
  jobbridge task get|watch|answer|cancel [--url URL] ID
  jobbridge tools [--url URL]
  jobbridge tasks list|cancel --store URL ...
  jobbridge try [--fake] [--yes] --config FILE TOOL [JSON_ARGS]
  jobbridge version
  jobbridge completion bash|zsh|fish

Run "jobbridge COMMAND -h" for what a command does, its flags and an example.
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
	err := dispatch(ctx, args, stdin, stdout, stderr)
	if errors.Is(err, errHelped) {
		return nil
	}
	return err
}

func dispatch(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, "jobbridge: missing a command\n\n"+usage)
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
	case "task":
		return runTask(ctx, rest, stdin, stdout, stderr)
	case "tools":
		return runTools(ctx, rest, stdout, stderr)
	case "tasks":
		return runTasks(ctx, rest, stdout, stderr)
	case "try":
		return runTry(ctx, rest, stdin, stdout, stderr)
	case "completion":
		return runCompletion(ctx, rest, stdout, stderr)
	case "version":
		cmd := newCommand("version", versionUsage, stdout, stderr)
		if pos, err := cmd.parse(rest); err != nil {
			return err
		} else if len(pos) > 0 {
			return cmd.usageErrorf("unexpected argument %q", pos[0])
		}
		printVersion(stdout, readBuildInfo())
		return nil
	case "--version":
		printVersion(stdout, readBuildInfo())
		return nil
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprintf(stderr, "jobbridge: unknown command %q\n\n%s", cmd, usage)
	return exitError(2)
}

// errHelped is returned by a command that printed its usage on request
// (-h, --help); the program exits 0.
var errHelped = errors.New("usage printed on request")

// command is a subcommand's flag set and usage text (a description, an
// example and "Flags:"; the flags follow).
type command struct {
	name           string
	fs             *flag.FlagSet
	usage          string
	stdout, stderr io.Writer
	// idArgs makes an argument that starts with "-" but names no flag
	// positional: task IDs may start with "-".
	idArgs bool
}

func newCommand(name, usage string, stdout, stderr io.Writer) *command {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	// The flag package's own messages are folded into the one-line usage
	// error (see parse).
	fs.SetOutput(io.Discard)
	fs.Usage = func() {} // printed by parse, to stdout when asked for
	return &command{name: name, fs: fs, usage: usage, stdout: stdout, stderr: stderr}
}

func (c *command) printUsage(w io.Writer) {
	fmt.Fprint(w, c.usage)
	c.fs.SetOutput(w)
	c.fs.PrintDefaults()
	c.fs.SetOutput(io.Discard)
}

// parse parses flags anywhere among the positional arguments and returns
// those. -h or --help prints the usage on stdout and returns errHelped; a
// bad flag prints the problem in one line on stderr (see usageErrorf) and
// returns exit status 2.
func (c *command) parse(args []string) ([]string, error) {
	var (
		positional []string
		err        error
	)
	if c.idArgs {
		positional, err = c.parseWithIDs(args)
	} else {
		positional, err = parseInterspersed(c.fs, args)
	}
	if errors.Is(err, flag.ErrHelp) {
		c.printUsage(c.stdout)
		return nil, errHelped
	}
	if err != nil {
		return nil, c.usageErrorf("%v", err)
	}
	return positional, nil
}

// usageErrorf prints on stderr, as the go command does, one line that says
// what is wrong, the command's synopsis and where the help is, and returns
// exit status 2.
func (c *command) usageErrorf(format string, args ...any) error {
	synopsis, _, _ := strings.Cut(c.usage, "\n")
	fmt.Fprintf(c.stderr, "jobbridge %s: %s\n%s\nRun \"jobbridge %s -h\" for details.\n", c.name, fmt.Sprintf(format, args...), synopsis, c.name)
	return exitError(2)
}

// parseWithIDs parses the arguments that name a flag (or -h, --help) as
// flags and keeps every other one positional, even one starting with "-".
func (c *command) parseWithIDs(args []string) ([]string, error) {
	var flags, positional []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			positional = append(positional, args[i+1:]...)
			break
		}
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		f := c.fs.Lookup(name)
		switch {
		case !strings.HasPrefix(a, "-") || (f == nil && name != "h" && name != "help"):
			positional = append(positional, a)
		case f != nil && !hasValue && !isBoolFlag(f) && i+1 < len(args):
			flags = append(flags, a, args[i+1])
			i++
		default:
			flags = append(flags, a)
		}
	}
	if err := c.fs.Parse(flags); err != nil {
		return nil, err
	}
	return positional, nil
}

func isBoolFlag(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}
