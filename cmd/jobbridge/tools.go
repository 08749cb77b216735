package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"github.com/jobbridge/jobbridge/taskclient"
)

const toolsUsage = `usage: jobbridge tools [--url URL] [--header 'K: V']...

Lists the tools a server offers the caller: name, task mode and title (or
the first line of the description), one line each, cut to the terminal's
width ($COLUMNS or 80 when stdout is not a terminal).

The task mode says whether a call becomes a task: required, optional or
never. 2026-07-28 tool listings carry no task mode, so it is read from the
server's 2025-11-25 listing (execution.taskSupport); "?" means the server
did not say.

Example:

  jobbridge tools --url http://127.0.0.1:8080/mcp

Flags:
`

// runTools implements `jobbridge tools`.
func runTools(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cmd := newCommand("tools", toolsUsage, stdout, stderr)
	cf := addClientFlags(cmd.fs)
	positional, err := cmd.parse(args)
	if err != nil {
		return err
	}
	if len(positional) > 0 {
		return cmd.usageErrorf("unexpected argument %q", positional[0])
	}
	c := &caller{client: cf.client()}
	tools, err := c.client.ListTools(ctx)
	if err != nil {
		return fmt.Errorf("listing tools: %w", c.explain(ctx, err, ""))
	}
	modes := taskModes(ctx, c.client)
	width := 0
	if f, ok := stdout.(*os.File); ok && isTerminal(f) {
		width, _ = terminalSize(f)
	}
	if width <= 0 {
		width = columnsFromEnv()
	}
	writeToolTable(stdout, tools, modes, width)
	return nil
}

// taskModes reads each tool's task mode from the server's 2025-11-25 tools
// listing, where execution.taskSupport says it; nil when the server does
// not answer that revision.
func taskModes(ctx context.Context, c *taskclient.Client) map[string]string {
	legacy := &taskclient.Client{URL: c.URL, HTTPClient: c.HTTPClient, Header: c.Header, ClientName: c.ClientName, ClientVersion: c.ClientVersion}
	header := http.Header{"MCP-Protocol-Version": {"2025-11-25"}}
	modes := map[string]string{}
	cursor := ""
	for range 100 {
		params := map[string]any{"_meta": map[string]any{
			"io.modelcontextprotocol/protocolVersion":    nil,
			"io.modelcontextprotocol/clientCapabilities": nil,
			"io.modelcontextprotocol/clientInfo":         nil,
		}}
		if cursor != "" {
			params["cursor"] = cursor
		}
		raw, _, err := legacy.Raw(ctx, "tools/list", params, header)
		if err != nil {
			return modes
		}
		var res struct {
			Tools      []taskclient.Tool `json:"tools"`
			NextCursor string            `json:"nextCursor"`
		}
		if err := json.Unmarshal(raw, &res); err != nil {
			return modes
		}
		for _, t := range res.Tools {
			if t.Execution == nil {
				continue
			}
			switch t.Execution.TaskSupport {
			case "required", "optional":
				modes[t.Name] = t.Execution.TaskSupport
			case "forbidden":
				modes[t.Name] = "never"
			}
		}
		if res.NextCursor == "" {
			break
		}
		cursor = res.NextCursor
	}
	return modes
}

// writeToolTable writes one line per tool, cut to width columns.
func writeToolTable(w io.Writer, tools []taskclient.Tool, modes map[string]string, width int) {
	nameW := len("NAME")
	for _, t := range tools {
		nameW = max(nameW, min(len([]rune(sanitize(t.Name))), 40))
	}
	const modeW = len("optional")
	line := func(name, mode, about string) {
		l := fmt.Sprintf("%-*s  %-*s  %s", nameW, cut(name, nameW), modeW, mode, about)
		fmt.Fprintln(w, strings.TrimRight(cut(l, width-1), " "))
	}
	line("NAME", "TASK", "DESCRIPTION")
	for _, t := range tools {
		mode, ok := modes[t.Name]
		if !ok {
			mode = "?"
		}
		about := strings.TrimSpace(t.Title)
		if about == "" {
			about, _, _ = strings.Cut(strings.TrimSpace(t.Description), "\n")
		}
		line(sanitize(t.Name), mode, strings.Join(strings.Fields(sanitize(about)), " "))
	}
}
