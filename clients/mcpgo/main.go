// Command mcpgo drives jobbridge with the MCP client of
// github.com/mark3labs/mcp-go (pinned in this directory's go.mod, a module
// of its own so that the server's module does not depend on it), as a Go
// agent built on it would: over Streamable HTTP, plain tools/call requests,
// no tasks extension and no elicitation. clients/run.sh builds it and
// test/mcpgo.test.mjs runs each scenario against a `jobbridge demo` of
// clients/catalog.yaml:
//
//	mcpgo -url MCP_URL -jobs JOB_API_URL SCENARIO
//
// The scenarios are those the other clients pass: long-job (a job longer
// than the tool's sync_budget answers the task's handle, and task_status
// then gives its result with its summary and link), failure (a failed job's
// reason), and confirmation (no job without an explicit true). Each checks
// what a model would be handed, the text blocks and the structured content
// alike, prints what it saw, and exits 1 with the reason when a check fails.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
)

func main() {
	url := flag.String("url", "", "the jobbridge MCP endpoint")
	jobs := flag.String("jobs", "", "the REST job API fake the demo runs (to count jobs)")
	flag.Parse()
	if *url == "" || *jobs == "" || flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: mcpgo -url MCP_URL -jobs JOB_API_URL long-job|failure|confirmation")
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Second)
	defer cancel()
	if err := run(ctx, *url, *jobs, flag.Arg(0)); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		os.Exit(1)
	}
	fmt.Println("PASS")
}

// agent is an mcp-go client with what its model sees of each result.
type agent struct {
	c    *client.Client
	jobs string
}

func run(ctx context.Context, url, jobs, scenario string) error {
	c, err := client.NewStreamableHttpClient(url)
	if err != nil {
		return fmt.Errorf("creating the client: %w", err)
	}
	defer c.Close()
	if err := c.Start(ctx); err != nil {
		return fmt.Errorf("starting the client: %w", err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ClientInfo = mcp.Implementation{Name: "jobbridge-clients-mcpgo", Version: "0.0.0"}
	if _, err := c.Initialize(ctx, init); err != nil {
		return fmt.Errorf("initializing: %w", err)
	}
	a := &agent{c: c, jobs: jobs}
	switch scenario {
	case "long-job":
		return a.longJob(ctx)
	case "failure":
		return a.failure(ctx)
	case "confirmation":
		return a.confirmation(ctx)
	}
	return fmt.Errorf("unknown scenario %q", scenario)
}

// seen is a result as a model is handed it: by a client that passes the
// text blocks, and by one that passes the structured content.
type seen struct {
	res        *mcp.CallToolResult
	text       string
	structured string
}

func (s seen) both(want ...string) error {
	for _, w := range want {
		if !strings.Contains(s.text, w) {
			return fmt.Errorf("the text %q lacks %q", s.text, w)
		}
		if !strings.Contains(s.structured, w) {
			return fmt.Errorf("the structured content %s lacks %q", s.structured, w)
		}
	}
	return nil
}

func (a *agent) call(ctx context.Context, tool string, args map[string]any) (seen, error) {
	req := mcp.CallToolRequest{}
	req.Params.Name = tool
	req.Params.Arguments = args
	res, err := a.c.CallTool(ctx, req)
	if err != nil {
		return seen{}, fmt.Errorf("calling %s: %w", tool, err)
	}
	var parts []string
	for _, c := range res.Content {
		if t, ok := mcp.AsTextContent(c); ok {
			parts = append(parts, t.Text)
		}
	}
	sc, _ := json.Marshal(res.StructuredContent)
	s := seen{res: res, text: strings.Join(parts, "\n"), structured: string(sc)}
	fmt.Printf("%s → isError=%v\n  text: %s\n  structuredContent: %s\n", tool, res.IsError, s.text, s.structured)
	return s, nil
}

var handleRE = regexp.MustCompile(`goes on as task (\S+?)\.`)

// handle is the task ID a handle names, as the model reads it.
func handle(s seen) (string, error) {
	m := handleRE.FindStringSubmatch(s.text)
	if m == nil {
		return "", fmt.Errorf("no task handle in %q", s.text)
	}
	return m[1], nil
}

// untilEnded calls task_status until the task has ended.
func (a *agent) untilEnded(ctx context.Context, id string) (seen, error) {
	for {
		s, err := a.call(ctx, "task_status", map[string]any{"task_id": id})
		if err != nil {
			return s, err
		}
		var env struct {
			Outcome string `json:"outcome"`
		}
		json.Unmarshal([]byte(s.structured), &env)
		if env.Outcome != "running" && env.Outcome != "input_required" {
			return s, nil
		}
		select {
		case <-ctx.Done():
			return s, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func (a *agent) longJob(ctx context.Context) error {
	first, err := a.call(ctx, "slow_report", map[string]any{"label": "go"})
	if err != nil {
		return err
	}
	if first.res.IsError {
		return errors.New("the handle is an error")
	}
	if err := first.both("still running", "task_status"); err != nil {
		return err
	}
	id, err := handle(first)
	if err != nil {
		return err
	}
	done, err := a.untilEnded(ctx, id)
	if err != nil {
		return err
	}
	if done.res.IsError {
		return errors.New("the result is an error")
	}
	var env struct {
		Job struct {
			URL string `json:"url"`
		} `json:"job"`
	}
	json.Unmarshal([]byte(done.structured), &env)
	if !strings.Contains(env.Job.URL, "/jobs/") {
		return fmt.Errorf("no job link in %s", done.structured)
	}
	return done.both("Report go is ready.", env.Job.URL, "1284")
}

func (a *agent) failure(ctx context.Context) error {
	first, err := a.call(ctx, "slow_failure", nil)
	if err != nil {
		return err
	}
	id, err := handle(first)
	if err != nil {
		return err
	}
	done, err := a.untilEnded(ctx, id)
	if err != nil {
		return err
	}
	if !done.res.IsError {
		return errors.New("a failed job's result is not an error")
	}
	if err := done.both("Export failed.", "export failed: disk quota exceeded"); err != nil {
		return err
	}
	quick, err := a.call(ctx, "broken_export", nil)
	if err != nil {
		return err
	}
	if !quick.res.IsError {
		return errors.New("broken_export is not an error")
	}
	return quick.both("disk quota exceeded")
}

func (a *agent) confirmation(ctx context.Context) error {
	before, err := a.jobCount(ctx)
	if err != nil {
		return err
	}
	// Without the handle mode, a confirmation this client cannot be asked
	// for refuses the call (-32021, which mcp-go reports as a missing
	// client capability).
	req := mcp.CallToolRequest{}
	req.Params.Name = "confirm_delete"
	req.Params.Arguments = map[string]any{"filename": "go.txt"}
	if _, err := a.c.CallTool(ctx, req); err == nil || !strings.Contains(strings.ToLower(err.Error()), "capability") {
		return fmt.Errorf("confirm_delete without elicitation: %v, want a missing capability error", err)
	}
	first, err := a.call(ctx, "confirm_purge", map[string]any{"target": "go"})
	if err != nil {
		return err
	}
	if err := first.both("Purge the go cache?", "Nothing has been submitted"); err != nil {
		return err
	}
	id, err := handle(first)
	if err != nil {
		return err
	}
	for _, answers := range []map[string]any{{"confirm": false}, {"jobbridge.confirm": map[string]any{"confirm": "yes"}}} {
		s, err := a.call(ctx, "task_answer", map[string]any{"task_id": id, "answers": answers})
		if err != nil {
			return err
		}
		if err := s.both("did not settle the question"); err != nil {
			return err
		}
	}
	if n, err := a.jobCount(ctx); err != nil || n != before {
		return fmt.Errorf("%d jobs before an explicit true, want %d (%v)", n, before, err)
	}
	if _, err := a.call(ctx, "task_answer", map[string]any{"task_id": id, "answers": map[string]any{"jobbridge.confirm": map[string]any{"confirm": true}}}); err != nil {
		return err
	}
	done, err := a.untilEnded(ctx, id)
	if err != nil {
		return err
	}
	if err := done.both("Purged the go cache."); err != nil {
		return err
	}
	if n, err := a.jobCount(ctx); err != nil || n != before+1 {
		return fmt.Errorf("%d jobs after the confirmation, want %d (%v)", n, before+1, err)
	}
	return nil
}

// jobCount is how many jobs the REST job API fake knows.
func (a *agent) jobCount(ctx context.Context) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.jobs+"/jobs", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("listing the fake's jobs: %w", err)
	}
	defer resp.Body.Close()
	var body struct {
		Jobs []json.RawMessage `json:"jobs"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return 0, fmt.Errorf("listing the fake's jobs: %w", err)
	}
	return len(body.Jobs), nil
}
