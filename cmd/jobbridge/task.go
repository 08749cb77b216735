package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/jobbridge/jobbridge/taskclient"
)

const taskUsage = `usage: jobbridge task get|watch|answer|cancel [--url URL] [--poll] [--timeout D] [--header 'K: V']... ID

Works on a task that already exists, by its ID (as "jobbridge call" prints
it, or a client's handle):

  get     prints the task as tasks/get returns it (JSON, on stdout) and a
          one-line summary on stderr; exit status 0
  watch   follows the task to its end as "jobbridge call" does: by the
          server's push stream (or polls of tasks/get when it does not
          stream, or with --poll), the same status line, prompts for its
          input requests, retries while the server cannot be reached,
          Ctrl-C cancels, and the same exit status (1 when the tool reports
          an error or the task fails or is cancelled)
  answer  asks the task's open input requests once and sends the answers
  cancel  sends tasks/cancel and follows the task for up to --timeout to
          its outcome; exit status 0 when the task ends cancelled, 1 when it
          ended otherwise (its result is printed) or is still running

--poll follows by polling tasks/get only: for servers, and proxies in front
of them, that cannot keep a streamed response open.

Example:

  jobbridge task watch --url http://127.0.0.1:8080/mcp 3q2Qx...

Flags:
`

// runTask implements `jobbridge task`.
func runTask(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	cmd := newCommand("task", taskUsage, stdout, stderr)
	cmd.idArgs = true
	cf := addClientFlags(cmd.fs)
	cf.addPollFlag(cmd.fs)
	positional, err := cmd.parse(args)
	if err != nil {
		return err
	}
	switch {
	case len(positional) == 0:
		return cmd.usageErrorf("missing the action (get, watch, answer or cancel) and the task ID")
	case len(positional) == 1:
		return cmd.usageErrorf("missing the task ID after %q", positional[0])
	case len(positional) > 2:
		return cmd.usageErrorf("unexpected argument %q after the task ID", positional[2])
	}
	verb, id := positional[0], positional[1]
	switch verb {
	case "get", "watch", "answer", "cancel":
	default:
		return cmd.usageErrorf("unknown action %q (want get, watch, answer or cancel)", verb)
	}
	c := cf.caller(stdin, stdout, stderr)
	defer c.close()
	c.taskID = id
	t, err := c.client.GetTask(ctx, id)
	if err != nil {
		return fmt.Errorf("reading task: %w", c.explain(ctx, err, ""))
	}
	switch verb {
	case "get":
		if err := printJSON(c.stdout, t.Raw); err != nil {
			return err
		}
		fmt.Fprintln(c.stderr, taskSummary(t, time.Now()))
		return nil
	case "watch":
		return c.followTask(ctx, t)
	case "answer":
		return c.answerOnce(ctx, t)
	default:
		return c.cancelTask(ctx, t)
	}
}

// taskSummary is one line about a task: its status and message, age, time
// left and poll interval.
func taskSummary(t *taskclient.Task, now time.Time) string {
	s := &statusLine{}
	line := s.text(t, 0, false)
	if created := taskStart(t, now); created.Before(now) {
		line += fmt.Sprintf("; created %s ago", now.Sub(created).Round(time.Second))
	}
	if exp := taskExpiry(t); !exp.IsZero() {
		if left := exp.Sub(now); left > 0 {
			line += fmt.Sprintf(", expires in %s", left.Round(time.Second))
		} else {
			line += ", expired"
		}
	}
	if !t.Terminal() {
		line += fmt.Sprintf(", poll every %s", t.PollInterval())
	}
	if len(t.InputRequests) > 0 {
		line += fmt.Sprintf("; %d open input request(s): jobbridge task answer", len(t.InputRequests))
	}
	return line
}

// answerOnce asks the task's open input requests and sends the answers.
func (c *caller) answerOnce(ctx context.Context, t *taskclient.Task) error {
	if t.Status != taskclient.StatusInputRequired || len(t.InputRequests) == 0 {
		return fmt.Errorf("task is %s: it asks for nothing", sanitize(t.Status))
	}
	c.status.start = taskStart(t, time.Now())
	c.status.show(t)
	return c.answerTask(ctx, t, map[string]bool{})
}

// cancelTask cancels t and waits for its outcome; it succeeds when the task
// ends cancelled.
func (c *caller) cancelTask(ctx context.Context, t *taskclient.Task) error {
	c.status.start = taskStart(t, time.Now())
	if t.Terminal() {
		c.status.show(t)
		c.status.finish()
		if t.Status == taskclient.StatusCancelled {
			return nil
		}
		fmt.Fprintf(c.stderr, "the task had already ended: %s\n", sanitize(t.Status))
		if err := c.outcome(t); err != nil {
			return err
		}
		return exitError(1)
	}
	final, err := c.cancelAndWait(ctx, t)
	if err != nil {
		return err
	}
	if final.Status == taskclient.StatusCancelled {
		return nil
	}
	fmt.Fprintf(c.stderr, "the task ended before the cancel reached it: %s\n", sanitize(final.Status))
	if err := c.outcome(final); err != nil {
		return err
	}
	return exitError(1)
}
