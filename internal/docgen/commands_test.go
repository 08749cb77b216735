package docgen

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseHelp(t *testing.T) {
	tests := []struct {
		name    string
		help    string
		want    Command
		wantErr string
	}{{
		name: "usage, description, example and flags",
		help: "usage: jobbridge tasks list --store URL\n" +
			"       jobbridge tasks cancel --store URL --correlation ID\n" +
			"\n" +
			"Reads the store\ndirectly.\n" +
			"\n" +
			"  list    prints the tasks\n  cancel  cancels one\n" +
			"\n" +
			"Example:\n\n  jobbridge tasks list --store sqlite:x.db\n\n" +
			"Flags:\n" +
			"  -limit N\n    \tprint at most N tasks (0: all) (default 200)\n" +
			"  -store URL\n    \ttask store URL\n    \tsecond line (default \"sqlite:jobbridge.db\")\n" +
			"  -poll\n    \tpoll instead of streaming\n" +
			"  -x\tone-letter flag\n",
		want: Command{
			Name:        "tasks",
			Usage:       []string{"jobbridge tasks list --store URL", "jobbridge tasks cancel --store URL --correlation ID"},
			Description: []string{"Reads the store\ndirectly.", "  list    prints the tasks\n  cancel  cancels one"},
			Examples:    []string{"jobbridge tasks list --store sqlite:x.db"},
			Flags: []Flag{
				{Name: "limit", Arg: "N", Usage: "print at most N tasks (0: all)", Default: "200"},
				{Name: "store", Arg: "URL", Usage: "task store URL\nsecond line", Default: `"sqlite:jobbridge.db"`},
				{Name: "poll", Usage: "poll instead of streaming"},
				{Name: "x", Usage: "one-letter flag"},
			},
		},
	}, {
		name: "no flags",
		help: "usage: jobbridge version\n\nPrints the version.\n\nExample:\n\n  jobbridge version\n",
		want: Command{Name: "version", Usage: []string{"jobbridge version"}, Description: []string{"Prints the version."}, Examples: []string{"jobbridge version"}},
	}, {
		name:    "help without a synopsis",
		help:    "Prints the version.\n",
		wantErr: `help does not start with "usage: "`,
	}, {
		name:    "a line the flag package does not print",
		help:    "usage: jobbridge x\n\nFlags:\n  -a\n    \tA\nstray\n",
		wantErr: `unexpected line among the flags: "stray"`,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseHelp(tt.want.Name, tt.help)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ParseHelp mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRenderCommands(t *testing.T) {
	cmds := []Command{{
		Name:        "call",
		Usage:       []string{"jobbridge call [--header 'K: V'] TOOL"},
		Description: []string{"Calls a tool\nand waits.", "  get   prints it\n  watch follows it"},
		Examples:    []string{"jobbridge call build_report"},
		Flags:       []Flag{{Name: "log-format", Arg: "format", Usage: "text | json", Default: `"text"`}},
	}, {Name: "version", Usage: []string{"jobbridge version"}}}
	var b strings.Builder
	if err := RenderCommands(&b, "usage: jobbridge COMMAND\n", cmds, "make docs"); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"Regenerate with: make docs",
		"```text\nusage: jobbridge COMMAND\n```",
		"| [`call`](#jobbridge-call) | `jobbridge call [--header 'K: V'] TOOL` |",
		"## jobbridge call\n",
		"Calls a tool and waits.\n",                       // a paragraph is joined into one line
		"```text\nget   prints it\nwatch follows it\n```", // an indented block stays as laid out
		"```sh\njobbridge call build_report\n```",
		"| `--log-format` | `format` | `\"text\"` | text \\| json |", // pipes escaped in a table
		"## jobbridge version\n\n```text\njobbridge version\n```\n\nNo flags.",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("rendered commands lack %q; got:\n%s", want, out)
		}
	}
}
