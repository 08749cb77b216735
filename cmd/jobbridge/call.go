package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jobbridge/jobbridge/internal/spelling"
	"github.com/jobbridge/jobbridge/lifecycle"
	"github.com/jobbridge/jobbridge/taskclient"
)

const callUsage = `usage: jobbridge call [--url URL] [--no-wait] [--poll] [--timeout D] [--header 'K: V']... TOOL [JSON_ARGS]

Calls TOOL with JSON_ARGS (a JSON object, default {}) over MCP 2026-07-28,
declaring the tasks extension and form elicitation.

If the server needs input first, or a task stops in input_required, each field
is asked for on the terminal: booleans take y/n, numbers and integers are
checked, a choice takes its value or its number, a multi-select takes a
comma-separated list. An empty answer skips an optional field or takes the
default. Type !decline to decline the whole request, !cancel to dismiss it.

As soon as the server creates a task its ID is printed on stderr, so that
"jobbridge task watch ID" can follow it again later. Without --no-wait the
task is followed until it ends, with its status on stderr: by the server's
push stream of task notifications (subscriptions/listen), so that each change
shows at once and nothing is polled, or by polling tasks/get when the server
does not stream. --poll always polls: for servers, and proxies in front of
them, that cannot keep a streamed response open. When the server cannot be
reached (a restart, a proxy answering 502, 503 or 504) it is retried with
backoff, up to 30s apart, for as long as the task lives and at most
--timeout in a row, and the stream is opened again once the server is back.
Ctrl-C asks the server to cancel the task and keeps following it for up to
--timeout. The result's text goes to stdout; the exit
status is 1 when the tool reports an error or the task fails or is
cancelled, 2 for a usage error.

Example:

  jobbridge call --url http://127.0.0.1:8080/mcp build_report '{"report": "sales"}'

Flags:
`

// maxInputRounds bounds the multi round-trip exchanges of one tools/call.
const maxInputRounds = 10

// cancelSendTimeout bounds the tasks/cancel request sent after an interrupt.
const cancelSendTimeout = 10 * time.Second

// defaultURL is the endpoint the client commands talk to by default.
const defaultURL = "http://127.0.0.1:8080/mcp"

// runCall implements `jobbridge call`.
func runCall(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	cmd := newCommand("call", callUsage, stdout, stderr)
	cf := addClientFlags(cmd.fs)
	cf.addPollFlag(cmd.fs)
	noWait := cmd.fs.Bool("no-wait", false, "print the task handle as JSON and exit instead of waiting")
	positional, err := cmd.parse(args)
	if err != nil {
		return err
	}
	switch {
	case len(positional) < 1:
		return cmd.usageErrorf("missing the TOOL to call")
	case len(positional) > 2:
		return cmd.usageErrorf("unexpected argument %q after TOOL and JSON_ARGS", positional[2])
	}
	tool := positional[0]
	arguments := json.RawMessage(`{}`)
	if len(positional) == 2 {
		if arguments, err = parseArguments(positional[1]); err != nil {
			return cmd.usageErrorf("%v", err)
		}
	}
	c := cf.caller(stdin, stdout, stderr)
	defer c.close()
	c.announce = true
	return c.run(ctx, tool, arguments, *noWait)
}

// parseArguments checks that s is a JSON object and says why when it is not.
func parseArguments(s string) (json.RawMessage, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal([]byte(s), &obj); err != nil {
		var syn *json.SyntaxError
		if errors.As(err, &syn) {
			return nil, fmt.Errorf("JSON_ARGS is not valid JSON: %v (at byte %d of %s)", err, syn.Offset, s)
		}
		var typ *json.UnmarshalTypeError
		if errors.As(err, &typ) {
			return nil, fmt.Errorf("JSON_ARGS must be a JSON object, not a JSON %s: %s", typ.Value, s)
		}
		return nil, fmt.Errorf("JSON_ARGS: %v: %s", err, s)
	}
	if obj == nil {
		return nil, fmt.Errorf("JSON_ARGS must be a JSON object, not %s", s)
	}
	return json.RawMessage(s), nil
}

// clientFlags are the flags of the commands that talk to a server.
type clientFlags struct {
	url     *string
	timeout *time.Duration
	headers headerFlag
	// poll is --poll, for the commands that follow a task (nil: no flag).
	poll *bool
}

func addClientFlags(fs *flag.FlagSet) *clientFlags {
	f := &clientFlags{}
	f.url = fs.String("url", envOr("JOBBRIDGE_URL", defaultURL), "MCP endpoint `URL` (default: $JOBBRIDGE_URL, else "+defaultURL+")")
	f.timeout = fs.Duration("timeout", time.Minute, "how long to keep retrying a server that cannot be reached, and to keep polling after a cancel request")
	fs.Var(&f.headers, "header", "extra HTTP header `'Name: value'` (repeatable); $JOBBRIDGE_TOKEN, when set, is sent as a bearer token unless an Authorization header is given")
	return f
}

// addPollFlag adds --poll, for the commands that follow a task.
func (f *clientFlags) addPollFlag(fs *flag.FlagSet) {
	f.poll = fs.Bool("poll", false, "follow the task by polling tasks/get instead of its push stream: for servers, or proxies in front of them, that cannot stream")
}

func (f *clientFlags) client() *taskclient.Client {
	return &taskclient.Client{
		URL: *f.url, Tasks: true, Elicitation: true, Header: withEnvToken(f.headers.header()),
		ClientName: "jobbridge", ClientVersion: buildVersion(),
	}
}

// caller returns a caller for the flags; close it when done.
func (f *clientFlags) caller(stdin io.Reader, stdout, stderr io.Writer) *caller {
	status := newStatusLine(stderr)
	return &caller{
		client:     f.client(),
		lines:      newLineReader(stdin),
		stdout:     stdout,
		stderr:     status,
		status:     status,
		cancelWait: *f.timeout,
		pollOnly:   f.poll != nil && *f.poll,
	}
}

// caller carries one `jobbridge call` (or `jobbridge task`) invocation.
type caller struct {
	client     *taskclient.Client
	lines      *lineReader
	stdout     io.Writer
	stderr     io.Writer
	status     *statusLine
	cancelWait time.Duration
	// autoAnswer, when set, answers an input request without asking (its
	// key); ok false asks the user.
	autoAnswer func(key string) (res taskclient.ElicitResult, ok bool)
	// announce prints the task ID as soon as the task exists.
	announce bool
	// retryBase and retryMax bound the backoff between requests to a
	// server that cannot be reached (zero: 500ms and 30s).
	retryBase, retryMax time.Duration
	// pollOnly follows tasks by polling tasks/get, never by their push
	// stream (--poll).
	pollOnly bool
	// taskID is the task the call created, once it has one.
	taskID string
}

// close stops reading stdin.
func (c *caller) close() { c.lines.stop() }

func (c *caller) run(ctx context.Context, tool string, arguments json.RawMessage, noWait bool) error {
	var opts *taskclient.CallOptions
	for round := 0; ; round++ {
		res, err := c.client.CallTool(ctx, tool, arguments, opts)
		if err != nil {
			return fmt.Errorf("calling tool %s: %w", tool, c.explain(ctx, err, tool))
		}
		switch {
		case res.Result != nil:
			return c.printResult(res.Result)
		case res.Task != nil:
			c.taskID = res.Task.TaskID
			if c.announce {
				hint := "jobbridge task watch " + c.taskID
				if c.client.URL != defaultURL {
					hint += " --url " + c.client.URL
				}
				fmt.Fprintf(c.stderr, "task ID: %s; follow it with %s\n", c.taskID, hint)
			}
			if noWait {
				return printJSON(c.stdout, res.Task.Raw)
			}
			return c.followTask(ctx, res.Task)
		}
		if round >= maxInputRounds {
			return fmt.Errorf("calling tool %s: the server still asks for input after %d rounds", tool, maxInputRounds)
		}
		responses, err := c.answer(ctx, res.Input.InputRequests)
		if err != nil {
			return fmt.Errorf("asking for input: %w", err)
		}
		if len(responses) == 0 && len(res.Input.InputRequests) > 0 {
			return fmt.Errorf("calling tool %s: the server asks for input this client cannot give", tool)
		}
		opts = &taskclient.CallOptions{InputResponses: responses, RequestState: res.Input.RequestState}
	}
}

// explain adds what a user needs to a request's error: whether the server
// runs at all, and for an unknown tool the nearest tool name (tool "" for
// requests that name none).
func (c *caller) explain(ctx context.Context, err error, tool string) error {
	if errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("%w: is the server running at %s?", err, c.client.URL)
	}
	var rpcErr *taskclient.RPCError
	if tool == "" || !errors.As(err, &rpcErr) || rpcErr.Code != taskclient.CodeInvalidParams || !strings.HasPrefix(rpcErr.Message, "unknown tool") {
		return err
	}
	listCtx, cancel := context.WithTimeout(ctx, cancelSendTimeout)
	defer cancel()
	tools, lerr := c.client.ListTools(listCtx)
	if lerr != nil {
		return err
	}
	names := make([]string, len(tools))
	for i, t := range tools {
		names[i] = t.Name
	}
	if near := nearest(tool, names); near != "" {
		return fmt.Errorf("%w; did you mean %q? (jobbridge tools lists them)", err, near)
	}
	return fmt.Errorf("%w (jobbridge tools lists the server's tools)", err)
}

// nearest returns the name closest to word, if one is close enough to be
// a likely misspelling.
func nearest(word string, names []string) string {
	best, bestD := "", -1
	for _, n := range names {
		d := spelling.Distance(strings.ToLower(word), strings.ToLower(n))
		if bestD < 0 || d < bestD {
			best, bestD = n, d
		}
	}
	if bestD < 0 || bestD > max(2, len(word)/3) {
		return ""
	}
	return best
}

// followTask follows a task to its end, answering its input requests; on an
// interrupt it asks the server to cancel the task and waits for the outcome.
func (c *caller) followTask(ctx context.Context, task *taskclient.Task) error {
	c.status.start = taskStart(task, time.Now())
	final, err := c.follow(ctx, task, true)
	if err != nil && ctx.Err() == nil {
		return err
	}
	if err != nil {
		// Interrupted: the task outlives this request's context on purpose,
		// so cancelling and the last polls run on a fresh bounded context.
		if final, err = c.cancelAndWait(context.WithoutCancel(ctx), final); err != nil {
			return err
		}
	}
	return c.outcome(final)
}

// cancelAndWait sends tasks/cancel and follows the task for up to
// cancelWait to its final state. base bounds it all (a Ctrl-C of `task cancel`).
func (c *caller) cancelAndWait(base context.Context, task *taskclient.Task) (*taskclient.Task, error) {
	c.status.finish()
	sendCtx, stop := context.WithTimeout(base, cancelSendTimeout)
	err := c.client.CancelTask(sendCtx, task.TaskID)
	stop()
	if err != nil {
		return task, fmt.Errorf("cancelling task: %w", c.explain(base, err, ""))
	}
	fmt.Fprintln(c.stderr, "cancel requested; waiting for the backend…")
	waitCtx, stop := context.WithTimeout(base, c.cancelWait)
	defer stop()
	final, err := c.follow(waitCtx, task, false)
	if err != nil {
		c.status.finish()
		if waitCtx.Err() != nil && base.Err() == nil {
			return final, fmt.Errorf("task still not finished %s after the cancel request; giving up", c.cancelWait)
		}
		return final, err
	}
	return final, nil
}

// outcome prints a terminal task's result and turns a failure into the
// command's error.
func (c *caller) outcome(final *taskclient.Task) error {
	switch final.Status {
	case taskclient.StatusCompleted:
		if final.Result == nil {
			return errors.New("completed task carries no result")
		}
		return c.printResult(final.Result)
	case taskclient.StatusFailed:
		if final.Error == nil {
			return fmt.Errorf("task failed: %s", sanitize(final.StatusMessage))
		}
		return fmt.Errorf("task failed: %s (code %d)", sanitize(final.Error.Message), final.Error.Code)
	default:
		return errors.New("task cancelled")
	}
}

// taskStart is when the task was created, for the elapsed time; now when it
// does not say or says a time to come.
func taskStart(t *taskclient.Task, now time.Time) time.Time {
	created, err := time.Parse(time.RFC3339Nano, t.CreatedAt)
	if err != nil || created.After(now) {
		return now
	}
	return created
}

// taskExpiry is when the task's TTL ends; zero when it has none.
func taskExpiry(t *taskclient.Task) time.Time {
	created, err := time.Parse(time.RFC3339Nano, t.CreatedAt)
	if err != nil || t.TTLMs == nil {
		return time.Time{}
	}
	return created.Add(time.Duration(*t.TTLMs) * time.Millisecond)
}

// follow shows the task's status and follows it until it is terminal: by
// its push stream, or by polling tasks/get when the server does not stream
// or --poll asked for polls (taskclient.Follow). With interactive set it
// asks the user for each input request once and sends the answers with
// tasks/update. A request that cannot reach the server is retried with
// backoff while the task lives, for at most cancelWait in a row. It
// returns the last task seen (never nil) with any error.
func (c *caller) follow(ctx context.Context, t *taskclient.Task, interactive bool) (*taskclient.Task, error) {
	answered := map[string]bool{}
	defer c.status.setNote("")
	c.status.show(t)
	if t.Terminal() {
		c.status.finish()
		return t, nil
	}
	if interactive && t.Status == taskclient.StatusInputRequired {
		if err := c.answerTask(ctx, t, answered); err != nil {
			return t, err
		}
	}
	last := t
	var since time.Time // of the first failure in a row
	opts := taskclient.FollowOptions{
		Last: t,
		Poll: c.pollOnly,
		OnUpdate: func(next *taskclient.Task) error {
			last = next
			c.status.setNote("")
			c.status.show(next)
			if next.Terminal() {
				c.status.finish()
				return nil
			}
			if interactive && next.Status == taskclient.StatusInputRequired {
				return c.answerTask(ctx, next, answered)
			}
			return nil
		},
		Retry: func(err error, tries int) (time.Duration, error) {
			if !taskclient.Unreachable(err) {
				c.status.finish()
				return 0, fmt.Errorf("polling task: %w", err)
			}
			now := time.Now()
			if tries == 1 {
				since = now
			}
			expiry := taskExpiry(last)
			if now.Sub(since) >= c.cancelWait || (!expiry.IsZero() && now.After(expiry)) {
				c.status.finish()
				return 0, fmt.Errorf("polling task: server unreachable for %s (%d tries), giving up (the task may still run; follow it later with jobbridge task watch %s): %w",
					now.Sub(since).Round(time.Second), tries, last.TaskID, c.explain(ctx, err, ""))
			}
			c.status.setNote(fmt.Sprintf("server unreachable, retrying (%d)", tries))
			c.status.show(last)
			return c.backoff(tries), nil
		},
	}
	if c.status.tty {
		// Keeps the elapsed time ticking while nothing changes.
		opts.Tick = func() { c.status.show(last) }
	}
	final, err := taskclient.Follow(ctx, c.client, t.TaskID, opts)
	if final == nil {
		final = last
	}
	return final, err
}

// backoff is the jittered wait before the n-th retry (1-based): doubling
// from retryBase, at most retryMax.
func (c *caller) backoff(n int) time.Duration {
	base, ceil := c.retryBase, c.retryMax
	if base <= 0 {
		base = 500 * time.Millisecond
	}
	if ceil <= 0 {
		ceil = 30 * time.Second
	}
	d := base
	for i := 1; i < n && d < ceil; i++ {
		d *= 2
	}
	d = min(d, ceil)
	// Full jitter over the upper half, so that clients of one restarted
	// server do not come back in step.
	return d/2 + rand.N(d/2+1)
}

// answerTask prompts for the task's input requests not yet answered and sends
// the answers.
func (c *caller) answerTask(ctx context.Context, t *taskclient.Task, answered map[string]bool) error {
	pending := map[string]taskclient.InputRequest{}
	for key, req := range t.InputRequests {
		if !answered[key] {
			pending[key] = req
		}
	}
	if len(pending) == 0 {
		return nil
	}
	c.status.park(t)
	responses, err := c.answer(ctx, pending)
	c.status.unpark()
	if err != nil {
		return err
	}
	defer c.status.repeat()
	for key := range pending {
		answered[key] = true
	}
	if len(responses) == 0 {
		return nil
	}
	if err := c.client.UpdateTask(ctx, t.TaskID, responses); err != nil {
		return fmt.Errorf("sending answers: %w", err)
	}
	fmt.Fprintln(c.stderr, "answers sent; waiting for the task to continue")
	return nil
}

// printResult writes the tool result to stdout; a result flagged isError
// becomes the command's error.
func (c *caller) printResult(r *taskclient.ToolResult) error {
	for _, block := range r.Content {
		switch block.Type {
		case "text":
			writeLine(c.stdout, block.Text)
		case "image", "audio":
			fmt.Fprintf(c.stdout, "[%s %s, %d bytes]\n", block.Type, block.MimeType, base64.StdEncoding.DecodedLen(len(block.Data)))
		case "resource_link":
			fmt.Fprintf(c.stdout, "[link %s %s]\n", block.Name, block.URI)
		case "resource":
			if block.Resource != nil && block.Resource.Text != "" {
				writeLine(c.stdout, block.Resource.Text)
			} else if block.Resource != nil {
				fmt.Fprintf(c.stdout, "[resource %s %s]\n", block.Resource.URI, block.Resource.MimeType)
			}
		default:
			writeLine(c.stdout, string(block.Raw))
		}
	}
	if len(r.StructuredContent) > 0 && string(r.StructuredContent) != "null" && !mirroredEnvelope(r.StructuredContent) {
		if err := printJSON(c.stdout, r.StructuredContent); err != nil {
			return err
		}
	}
	if r.IsError {
		return errors.New("tool reported an error")
	}
	return nil
}

// mirroredEnvelope reports whether structured content is jobbridge's result
// envelope (summary, outcome, ...), which the text block already carries in
// full (bridge/results.go): printing it again would say everything twice.
func mirroredEnvelope(raw json.RawMessage) bool {
	var env struct {
		Summary *string `json:"summary"`
		Outcome *string `json:"outcome"`
	}
	return json.Unmarshal(raw, &env) == nil && env.Summary != nil && env.Outcome != nil
}

func printJSON(w io.Writer, raw json.RawMessage) error {
	var out bytes.Buffer
	if err := json.Indent(&out, raw, "", "  "); err != nil {
		return fmt.Errorf("formatting JSON: %w", err)
	}
	writeLine(w, out.String())
	return nil
}

func writeLine(w io.Writer, s string) {
	if strings.HasSuffix(s, "\n") {
		fmt.Fprint(w, s)
		return
	}
	fmt.Fprintln(w, s)
}

// answer asks the user for each input request (in key order) and returns
// the responses. Requests this client cannot answer are reported and left
// out.
func (c *caller) answer(ctx context.Context, reqs map[string]taskclient.InputRequest) (map[string]any, error) {
	responses := map[string]any{}
	for _, key := range slices.Sorted(maps.Keys(reqs)) {
		if c.autoAnswer != nil {
			if res, ok := c.autoAnswer(key); ok {
				responses[key] = res
				continue
			}
		}
		req := reqs[key]
		params, err := req.Elicitation()
		if err != nil {
			fmt.Fprintf(c.stderr, "cannot answer input request %q: %v\n", key, err)
			continue
		}
		elicit := c.elicit
		if key == lifecycle.ConfirmKey {
			elicit = c.confirm
		}
		res, err := elicit(ctx, params)
		if err != nil {
			return nil, err
		}
		responses[key] = res
	}
	return responses, nil
}

// errDismissed is returned by a prompt when the user declines or dismisses
// the whole request (or input ends).
type errDismissed struct{ action string }

func (e errDismissed) Error() string { return "request " + e.action + "d" }

// confirm asks the bridge's confirmation of a tool: y submits the job, n
// declines it (the task ends cancelled and no job is started).
func (c *caller) confirm(ctx context.Context, p *taskclient.ElicitParams) (taskclient.ElicitResult, error) {
	fmt.Fprintf(c.stderr, "\n%s\n", sanitize(p.Message))
	for {
		answer, err := c.ask(ctx, "  y submits the job, n declines it (no job is started): ")
		if err != nil {
			return resultFor(err, nil)
		}
		switch strings.ToLower(answer) {
		case "y", "yes":
			return taskclient.ElicitResult{Action: taskclient.ActionAccept, Content: map[string]any{"confirm": true}}, nil
		case "n", "no":
			return taskclient.ElicitResult{Action: taskclient.ActionDecline}, nil
		}
		fmt.Fprintln(c.stderr, "  answer y or n")
	}
}

// elicit runs one elicitation at the terminal.
func (c *caller) elicit(ctx context.Context, p *taskclient.ElicitParams) (taskclient.ElicitResult, error) {
	fmt.Fprintf(c.stderr, "\n%s\n", sanitize(p.Message))
	if p.Mode == "url" {
		fmt.Fprintf(c.stderr, "  open %s\n", sanitize(p.URL))
		_, err := c.ask(ctx, "  press Enter when done (or !decline, !cancel): ")
		return resultFor(err, nil)
	}
	if p.RequestedSchema == nil {
		_, err := c.ask(ctx, "  press Enter to accept (or !decline, !cancel): ")
		return resultFor(err, nil)
	}
	content := map[string]any{}
	for _, prop := range p.RequestedSchema.Properties {
		required := p.RequestedSchema.IsRequired(prop.Name)
		v, ok, err := c.askField(ctx, prop, required)
		if err != nil {
			return resultFor(err, nil)
		}
		if ok {
			content[prop.Name] = v
		}
	}
	return taskclient.ElicitResult{Action: taskclient.ActionAccept, Content: content}, nil
}

// resultFor turns a prompt's outcome into an elicitation result; errors other
// than a dismissal (such as an interrupt) are passed on.
func resultFor(err error, content map[string]any) (taskclient.ElicitResult, error) {
	var d errDismissed
	switch {
	case err == nil:
		return taskclient.ElicitResult{Action: taskclient.ActionAccept, Content: content}, nil
	case errors.As(err, &d):
		return taskclient.ElicitResult{Action: d.action}, nil
	default:
		return taskclient.ElicitResult{}, err
	}
}

// askField prompts for one property until the answer is valid. ok is false
// when an optional field was skipped.
func (c *caller) askField(ctx context.Context, p taskclient.Property, required bool) (v any, ok bool, err error) {
	label := p.Title
	if label == "" {
		label = p.Name
	}
	if p.Description != "" {
		fmt.Fprintf(c.stderr, "  %s\n", sanitize(p.Description))
	}
	hint := fieldHint(p)
	if !required {
		hint += ", optional"
	}
	prompt := fmt.Sprintf("  %s (%s)", sanitize(label), hint)
	if len(p.Default) > 0 {
		prompt += fmt.Sprintf(" [%s]", sanitize(string(p.Default)))
	}
	prompt += ": "
	for {
		answer, err := c.ask(ctx, prompt)
		if err != nil {
			return nil, false, err
		}
		if answer == "" {
			if len(p.Default) > 0 {
				var d any
				if json.Unmarshal(p.Default, &d) == nil {
					return d, true, nil
				}
			}
			if !required {
				return nil, false, nil
			}
			fmt.Fprintln(c.stderr, "  a value is required")
			continue
		}
		v, err := parseField(p, answer)
		if err != nil {
			fmt.Fprintf(c.stderr, "  %v; try again\n", err)
			continue
		}
		return v, true, nil
	}
}

// ask prints prompt and reads one answer. "!decline" and "!cancel", and the
// end of input (as "cancel"), come back as errDismissed.
func (c *caller) ask(ctx context.Context, prompt string) (string, error) {
	fmt.Fprint(c.stderr, prompt)
	line, err := c.lines.readLine(ctx)
	if errors.Is(err, io.EOF) {
		fmt.Fprintln(c.stderr)
		return "", errDismissed{taskclient.ActionCancel}
	}
	if err != nil {
		fmt.Fprintln(c.stderr)
		return "", err
	}
	if !c.lines.tty {
		fmt.Fprintln(c.stderr) // a terminal has echoed the newline already
	} else {
		c.status.echoed(line)
	}
	switch answer := strings.TrimSpace(line); answer {
	case "!decline":
		return "", errDismissed{taskclient.ActionDecline}
	case "!cancel":
		return "", errDismissed{taskclient.ActionCancel}
	default:
		return answer, nil
	}
}

func fieldHint(p taskclient.Property) string {
	choices := p.Choices()
	switch {
	case p.Type == "boolean":
		return "y/n"
	case p.Type == "array" && len(choices) > 0:
		return "comma-separated, any of: " + listChoices(choices)
	case p.Type == "array":
		return "comma-separated"
	case len(choices) > 0:
		return "one of: " + listChoices(choices)
	case p.Type == "number" || p.Type == "integer":
		return p.Type
	default:
		return "text"
	}
}

// listChoices lists choices for a prompt, numbered when a number picks one.
func listChoices(choices []string) string {
	out := sanitizeAll(choices)
	if numbersPick(choices) {
		for i, c := range out {
			out[i] = fmt.Sprintf("%d) %s", i+1, c)
		}
	}
	return strings.Join(out, ", ")
}

// numbersPick reports whether an answer may be a choice's 1-based number:
// only when no choice is itself a number, which would make it ambiguous.
func numbersPick(choices []string) bool {
	for _, c := range choices {
		if _, err := strconv.Atoi(strings.TrimSpace(c)); err == nil {
			return false
		}
	}
	return true
}

// parseField converts an answer to the property's JSON type.
func parseField(p taskclient.Property, answer string) (any, error) {
	choices := p.Choices()
	switch p.Type {
	case "boolean":
		switch strings.ToLower(answer) {
		case "y", "yes", "true", "1":
			return true, nil
		case "n", "no", "false", "0":
			return false, nil
		}
		return nil, errors.New("answer y or n")
	case "integer":
		n, err := strconv.ParseInt(answer, 10, 64)
		if err != nil {
			return nil, errors.New("not an integer")
		}
		return n, nil
	case "number":
		f, err := strconv.ParseFloat(answer, 64)
		if err != nil {
			return nil, errors.New("not a number")
		}
		return f, nil
	case "array":
		var out []string
		for part := range strings.SplitSeq(answer, ",") {
			part = strings.TrimSpace(part)
			if part == "" {
				continue
			}
			v, err := pickChoice(choices, part)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	default:
		return pickChoice(choices, answer)
	}
}

// pickChoice accepts a choice by value or by its 1-based number; with no
// choices any answer is accepted.
func pickChoice(choices []string, answer string) (string, error) {
	if len(choices) == 0 || slices.Contains(choices, answer) {
		return answer, nil
	}
	if n, err := strconv.Atoi(answer); err == nil && n >= 1 && n <= len(choices) && numbersPick(choices) {
		return choices[n-1], nil
	}
	return "", fmt.Errorf("%q is not one of the choices", answer)
}

// statusLine shows a task's status on stderr: rewritten in place on a
// terminal, cut to its width, otherwise one line per change of status or
// message. Everything else written to stderr goes through it too (it is an
// io.Writer), so that while a prompt waits below the line it knows how far
// up the line is and keeps its elapsed time ticking.
type statusLine struct {
	mu  sync.Mutex
	w   io.Writer
	tty bool
	// size returns the terminal's columns and rows (nil or zeros: $COLUMNS
	// or 80 columns, 24 rows).
	size  func() (cols, rows int)
	start time.Time
	last  string
	drawn bool // a line without a newline is on the terminal
	note  string
	// While parked, the line stays on screen above a prompt: up rows above
	// the cursor, which is at column col.
	parked   *taskclient.Task
	up, col  int
	stopTick chan struct{}
	ticking  sync.WaitGroup
}

// newStatusLine returns the status line for w, in place when w is a
// terminal.
func newStatusLine(w io.Writer) *statusLine {
	s := &statusLine{w: w, tty: isTerminal(w)}
	if f, ok := w.(*os.File); ok && s.tty {
		s.size = func() (int, int) { return terminalSize(f) }
	}
	return s
}

// dims returns the terminal's columns and rows, with fallbacks.
func (s *statusLine) dims() (cols, rows int) {
	if s.size != nil {
		cols, rows = s.size()
	}
	if cols <= 0 {
		cols = columnsFromEnv()
	}
	if rows <= 0 {
		rows = 24
	}
	return cols, rows
}

// columnsFromEnv is $COLUMNS, or 80.
func columnsFromEnv() int {
	if n, err := strconv.Atoi(os.Getenv("COLUMNS")); err == nil && n > 0 {
		return n
	}
	return 80
}

// Write passes p on, counting the rows it takes while the line is parked.
func (s *statusLine) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.drawn && s.parked == nil {
		// Output in the middle of an in-place line starts on its own line.
		fmt.Fprintln(s.w)
		s.drawn = false
	}
	s.count(string(p))
	return s.w.Write(p)
}

// count advances the row and column of the cursor over text written while
// parked (wrapping at the terminal's width).
func (s *statusLine) count(text string) {
	if s.parked == nil {
		return
	}
	cols, _ := s.dims()
	for _, r := range text {
		switch {
		case r == '\n':
			s.up++
			s.col = 0
		case r == '\r':
			s.col = 0
		case r >= 0x20:
			if s.col >= cols {
				s.up++
				s.col = 0
			}
			s.col++
		}
	}
}

// echoed records a line a terminal echoed while the user typed it.
func (s *statusLine) echoed(line string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.count(line + "\n")
}

// setNote sets a remark shown after the task's message, such as a retry.
func (s *statusLine) setNote(note string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.note = note
}

// text is the line for t: "[status] message — note (elapsed)", its
// message cut so that the whole fits in width runes (0: no limit).
func (s *statusLine) text(t *taskclient.Task, width int, withElapsed bool) string {
	head := "[" + sanitize(t.Status) + "]"
	msg := strings.Join(strings.Fields(sanitize(t.StatusMessage)), " ")
	if s.note != "" {
		if msg != "" {
			msg += " — "
		}
		msg += s.note
	}
	tail := ""
	if withElapsed {
		tail = fmt.Sprintf(" (%s)", time.Since(s.start).Round(time.Second))
	}
	if msg == "" {
		return cut(head+tail, width)
	}
	if width > 0 {
		room := width - len([]rune(head)) - 1 - len([]rune(tail))
		if room < 4 {
			return cut(head+" "+msg+tail, width)
		}
		msg = cut(msg, room)
	}
	return head + " " + msg + tail
}

// cut shortens s to at most width runes, ending it with "…" when it was
// longer (0: no limit).
func cut(s string, width int) string {
	r := []rune(s)
	if width <= 0 || len(r) <= width {
		return s
	}
	if width == 1 {
		return "…"
	}
	return string(r[:width-1]) + "…"
}

func (s *statusLine) show(t *taskclient.Task) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tty {
		cols, _ := s.dims()
		// One column stays free: a line that fills the last one wraps on
		// some terminals, leaving a copy behind at the next redraw.
		fmt.Fprintf(s.w, "\r\x1b[K%s", s.text(t, cols-1, true))
		s.drawn = true
		return
	}
	text := s.text(t, 0, false)
	if text == s.last {
		return
	}
	s.last = text
	fmt.Fprintf(s.w, "%s (%s)\n", text, time.Since(s.start).Round(time.Second))
}

// finish ends an in-place line so that what follows starts on its own line.
func (s *statusLine) finish() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.drawn {
		fmt.Fprintln(s.w)
		s.drawn = false
	}
}

// park leaves the line on screen while prompts are written below it; on a
// terminal its elapsed time keeps ticking until unpark.
func (s *statusLine) park(t *taskclient.Task) {
	if !s.tty {
		s.finish()
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.drawn {
		fmt.Fprintln(s.w)
		s.drawn = false
	}
	s.parked, s.up, s.col = t, 1, 0
	s.stopTick = make(chan struct{})
	s.ticking.Add(1)
	go s.tick(s.stopTick)
}

func (s *statusLine) tick(stop <-chan struct{}) {
	defer s.ticking.Done()
	ticker := time.NewTicker(time.Second)
	defer ticker.Stop()
	for {
		select {
		case <-stop:
			return
		case <-ticker.C:
			s.redrawParked()
		}
	}
}

// redrawParked rewrites the parked line in place and puts the cursor back
// where the prompt left it (DEC save and restore cursor). A line scrolled
// off the screen is left alone.
func (s *statusLine) redrawParked() {
	s.mu.Lock()
	defer s.mu.Unlock()
	cols, rows := s.dims()
	if s.parked == nil || s.up <= 0 || s.up >= rows {
		return
	}
	fmt.Fprintf(s.w, "\x1b7\x1b[%dA\r\x1b[K%s\x1b8", s.up, s.text(s.parked, cols-1, true))
}

// unpark ends the ticking of a parked line.
func (s *statusLine) unpark() {
	s.mu.Lock()
	stop := s.stopTick
	s.stopTick, s.parked = nil, nil
	s.mu.Unlock()
	if stop != nil {
		close(stop)
		s.ticking.Wait()
	}
}

// repeat makes the next show print even an unchanged status, after other
// output (such as prompts) came in between.
func (s *statusLine) repeat() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.last = ""
}

// lineReader reads stdin one line at a time on request, so that a prompt can
// give up when the context ends without losing buffered input.
type lineReader struct {
	tty      bool // reading from a terminal
	requests chan struct{}
	results  chan lineResult
	pending  bool
}

type lineResult struct {
	line string
	err  error
}

func newLineReader(r io.Reader) *lineReader {
	l := &lineReader{requests: make(chan struct{}, 1), results: make(chan lineResult, 1)}
	if f, ok := r.(*os.File); ok {
		l.tty = isTerminal(f)
	}
	go func() {
		br := bufio.NewReader(r)
		var eof bool
		for range l.requests {
			if eof {
				l.results <- lineResult{err: io.EOF}
				continue
			}
			line, err := br.ReadString('\n')
			if errors.Is(err, io.EOF) && line != "" {
				eof, err = true, nil
			}
			l.results <- lineResult{line: strings.TrimRight(line, "\r\n"), err: err}
		}
	}()
	return l
}

func (l *lineReader) readLine(ctx context.Context) (string, error) {
	if !l.pending {
		l.requests <- struct{}{}
		l.pending = true
	}
	select {
	case r := <-l.results:
		l.pending = false
		return r.line, r.err
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// stop lets the reading goroutine end once any read in progress returns.
func (l *lineReader) stop() { close(l.requests) }

// headerFlag collects repeated --header 'Name: value' flags.
type headerFlag [][2]string

func (h *headerFlag) String() string { return "" }

func (h headerFlag) header() http.Header {
	out := http.Header{}
	for _, kv := range h {
		out.Add(kv[0], kv[1])
	}
	return out
}

func (h *headerFlag) Set(v string) error {
	name, value, ok := strings.Cut(v, ":")
	name = strings.TrimSpace(name)
	if !ok || name == "" {
		return errors.New("want 'Name: value'")
	}
	*h = append(*h, [2]string{name, strings.TrimSpace(value)})
	return nil
}

// parseInterspersed parses flags that may appear before, between or after
// the positional arguments.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return positional, nil
		}
		// A "--" terminator leaves everything after it positional.
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(positional, rest...), nil
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
}

// isTerminal reports whether w is a character device such as a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// sanitize drops control characters from server-supplied text shown on the
// terminal, so that it cannot move the cursor or rewrite the screen.
func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '\n' || r == '\t' {
			return r
		}
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return -1
		}
		return r
	}, s)
}

func sanitizeAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = sanitize(s)
	}
	return out
}
