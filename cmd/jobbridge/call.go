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
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jobbridge/jobbridge/taskclient"
)

const callUsage = `usage: jobbridge call [--url URL] [--no-wait] [--timeout D] [--header 'K: V']... TOOL [JSON_ARGS]

Calls TOOL with JSON_ARGS (a JSON object, default {}) over MCP 2026-07-28,
declaring the tasks extension and form elicitation.

If the server needs input first, or a task stops in input_required, each field
is asked for on the terminal: booleans take y/n, numbers and integers are
checked, a choice takes its value or its number, a multi-select takes a
comma-separated list. An empty answer skips an optional field or takes the
default. Type !decline to decline the whole request, !cancel to dismiss it.

Without --no-wait the task is polled until it ends, with its status on stderr.
Ctrl-C asks the server to cancel the task and keeps polling for up to
--timeout. The result's text goes to stdout; the exit status is non-zero when
the tool reports an error or the task fails or is cancelled.

Flags:
`

// maxInputRounds bounds the multi round-trip exchanges of one tools/call.
const maxInputRounds = 10

// cancelSendTimeout bounds the tasks/cancel request sent after an interrupt.
const cancelSendTimeout = 10 * time.Second

// runCall implements `jobbridge call`.
func runCall(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("call", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, callUsage)
		fs.PrintDefaults()
	}
	url := fs.String("url", "http://127.0.0.1:8080/mcp", "MCP endpoint `URL`")
	noWait := fs.Bool("no-wait", false, "print the task handle as JSON and exit instead of waiting")
	timeout := fs.Duration("timeout", 30*time.Second, "after a cancel request, how long to keep polling for the final state")
	var headers headerFlag
	fs.Var(&headers, "header", "extra HTTP header `'Name: value'` (repeatable), e.g. an Authorization header")

	positional, err := parseInterspersed(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return exitError(2)
	}
	if len(positional) < 1 || len(positional) > 2 {
		fs.Usage()
		return exitError(2)
	}
	tool := positional[0]
	arguments := json.RawMessage(`{}`)
	if len(positional) == 2 {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal([]byte(positional[1]), &obj); err != nil || obj == nil {
			return fmt.Errorf("JSON_ARGS must be a JSON object: %s", positional[1])
		}
		arguments = json.RawMessage(positional[1])
	}

	lines := newLineReader(stdin)
	defer lines.stop()
	c := &caller{
		client: &taskclient.Client{
			URL: *url, Tasks: true, Elicitation: true, Header: headers.header(),
			ClientName: "jobbridge", ClientVersion: buildVersion(),
		},
		lines:      lines,
		stdout:     stdout,
		stderr:     stderr,
		status:     &statusLine{w: stderr, tty: isTerminal(stderr)},
		cancelWait: *timeout,
	}
	return c.run(ctx, tool, arguments, *noWait)
}

// caller carries one `jobbridge call` invocation.
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
	// taskID is the task the call created, once it has one.
	taskID string
}

func (c *caller) run(ctx context.Context, tool string, arguments json.RawMessage, noWait bool) error {
	var opts *taskclient.CallOptions
	for round := 0; ; round++ {
		res, err := c.client.CallTool(ctx, tool, arguments, opts)
		if err != nil {
			return fmt.Errorf("calling tool %s: %w", tool, err)
		}
		switch {
		case res.Result != nil:
			return c.printResult(res.Result)
		case res.Task != nil:
			c.taskID = res.Task.TaskID
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

// followTask polls a task to its end, answering its input requests; on an
// interrupt it asks the server to cancel the task and waits for the outcome.
func (c *caller) followTask(ctx context.Context, task *taskclient.Task) error {
	c.status.start = time.Now()
	final, err := c.poll(ctx, task, true)
	if err != nil && ctx.Err() == nil {
		return err
	}
	if err != nil {
		// Interrupted: the task outlives this request's context on purpose,
		// so cancelling and the last polls run on a fresh bounded context.
		c.status.finish()
		base := context.WithoutCancel(ctx)
		sendCtx, stop := context.WithTimeout(base, cancelSendTimeout)
		err := c.client.CancelTask(sendCtx, task.TaskID)
		stop()
		if err != nil {
			return fmt.Errorf("cancelling task: %w", err)
		}
		fmt.Fprintln(c.stderr, "cancel requested; waiting for the backend…")
		waitCtx, stop := context.WithTimeout(base, c.cancelWait)
		defer stop()
		final, err = c.poll(waitCtx, final, false)
		if err != nil {
			c.status.finish()
			if waitCtx.Err() != nil {
				return fmt.Errorf("task still not finished %s after the cancel request; giving up", c.cancelWait)
			}
			return err
		}
	}
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

// poll shows the task's status and polls tasks/get until the task is
// terminal. With interactive set it asks the user for each input request
// once and sends the answers with tasks/update. It returns the last task seen
// (never nil) with any error.
func (c *caller) poll(ctx context.Context, t *taskclient.Task, interactive bool) (*taskclient.Task, error) {
	answered := map[string]bool{}
	failures := 0
	for {
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
		if err := c.sleep(ctx, t); err != nil {
			return t, err
		}
		next, err := c.client.GetTask(ctx, t.TaskID)
		if err != nil {
			if ctx.Err() != nil {
				return t, ctx.Err()
			}
			var rpcErr *taskclient.RPCError
			if failures++; errors.As(err, &rpcErr) || failures > 3 {
				c.status.finish()
				return t, fmt.Errorf("polling task: %w", err)
			}
			continue
		}
		failures = 0
		t = next
	}
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
	c.status.finish()
	responses, err := c.answer(ctx, pending)
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

// sleep waits for the task's poll interval, refreshing the elapsed time on a
// terminal once a second.
func (c *caller) sleep(ctx context.Context, t *taskclient.Task) error {
	timer := time.NewTimer(t.PollInterval())
	defer timer.Stop()
	var tick <-chan time.Time
	if c.status.tty {
		ticker := time.NewTicker(time.Second)
		defer ticker.Stop()
		tick = ticker.C
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-timer.C:
			return nil
		case <-tick:
			c.status.show(t)
		}
	}
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
	if len(r.StructuredContent) > 0 && string(r.StructuredContent) != "null" {
		if err := printJSON(c.stdout, r.StructuredContent); err != nil {
			return err
		}
	}
	if r.IsError {
		return errors.New("tool reported an error")
	}
	return nil
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
		res, err := c.elicit(ctx, params)
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
		return "comma-separated, any of: " + strings.Join(sanitizeAll(choices), ", ")
	case p.Type == "array":
		return "comma-separated"
	case len(choices) > 0:
		return "one of: " + strings.Join(sanitizeAll(choices), ", ")
	case p.Type == "number" || p.Type == "integer":
		return p.Type
	default:
		return "text"
	}
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
	if n, err := strconv.Atoi(answer); err == nil && n >= 1 && n <= len(choices) {
		return choices[n-1], nil
	}
	return "", fmt.Errorf("%q is not one of the choices", answer)
}

// statusLine shows a task's status on stderr: rewritten in place on a
// terminal, otherwise one line per change of status or message.
type statusLine struct {
	w     io.Writer
	tty   bool
	start time.Time
	last  string
	drawn bool // a line without a newline is on the terminal
}

func (s *statusLine) show(t *taskclient.Task) {
	text := "[" + sanitize(t.Status) + "]"
	if msg := strings.Join(strings.Fields(sanitize(t.StatusMessage)), " "); msg != "" {
		text += " " + msg
	}
	if s.tty {
		elapsed := time.Since(s.start).Round(time.Second)
		fmt.Fprintf(s.w, "\r\x1b[K%s (%s)", text, elapsed)
		s.drawn = true
		return
	}
	if text == s.last {
		return
	}
	s.last = text
	fmt.Fprintf(s.w, "%s (%s)\n", text, time.Since(s.start).Round(time.Second))
}

// finish ends an in-place line so that what follows starts on its own line.
func (s *statusLine) finish() {
	if s.drawn {
		fmt.Fprintln(s.w)
		s.drawn = false
	}
}

// repeat makes the next show print even an unchanged status, after other
// output (such as prompts) came in between.
func (s *statusLine) repeat() { s.last = "" }

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
