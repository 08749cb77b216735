package taskclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"syscall"
	"time"
)

// Wait polls tasks/get for taskID until the task is terminal and returns it.
// The first poll is immediate; later polls wait the interval the last answer
// asked for ([Task.PollInterval]). onUpdate, if not nil, sees every task
// observed, including the terminal one; it runs on Wait's goroutine, so it may
// call [Client.UpdateTask] to answer input requests.
//
// On a tasks/get error or when ctx ends, Wait returns the last task observed
// (nil if none) together with the error. [Follow] prefers the server's push
// stream and retries a server that cannot be reached.
func Wait(ctx context.Context, c *Client, taskID string, onUpdate func(*Task)) (*Task, error) {
	var last *Task
	for {
		t, err := c.GetTask(ctx, taskID)
		if err != nil {
			return last, err
		}
		last = t
		if onUpdate != nil {
			onUpdate(t)
		}
		if t.Terminal() {
			return t, nil
		}
		timer := time.NewTimer(t.PollInterval())
		select {
		case <-ctx.Done():
			timer.Stop()
			return last, ctx.Err()
		case <-timer.C:
		}
	}
}

// FollowOptions tune [Follow]. The zero value follows the task by its push
// stream where the server has one and gives up on the first failed request.
type FollowOptions struct {
	// Last is the task as the caller last saw it (from tools/call or
	// tasks/get), or nil. Follow does not report it again unchanged and,
	// when polling, waits its poll interval before the first tasks/get.
	Last *Task
	// Poll makes Follow poll tasks/get and never listen: for servers, and
	// proxies in front of them, that cannot stream.
	Poll bool
	// OnUpdate, if not nil, sees each new state of the task, pushed or
	// polled, ending with the terminal one. A state equal to the last one
	// it saw is not shown again, except the first one after failed
	// requests (the server is reachable again). It runs on Follow's
	// goroutine, so it may prompt and call [Client.UpdateTask]: the next
	// state then comes the way Follow is following, by the stream or a
	// poll. An error it returns ends Follow with that error.
	OnUpdate func(*Task) error
	// Retry, if not nil, is asked after a request failed, tries being the
	// number of failures in a row (from 1): it returns how long to wait
	// before trying again, or an error to end Follow with. A nil Retry ends
	// Follow with the first failure. A listen refused by the server is no
	// failure: Follow polls then.
	Retry func(err error, tries int) (time.Duration, error)
	// Tick, if not nil, is called about once a second while Follow waits
	// (for a pushed state, between polls, before a retry), on Follow's
	// goroutine: to keep an elapsed time on a display up to date.
	Tick func()
}

// listenAckTimeout bounds the wait for a listen's acknowledgement. A server,
// or a proxy holding streams back, that sends none by then is polled.
const listenAckTimeout = 30 * time.Second

// tickEvery is the period of [FollowOptions.Tick].
const tickEvery = time.Second

// errNoAck is a listen that was never acknowledged.
var errNoAck = fmt.Errorf("subscriptions/listen: no acknowledgement within %s", listenAckTimeout)

// Follow follows the task taskID until it is terminal and returns it.
//
// It prefers the push stream: it listens to the task (subscriptions/listen)
// and reports each state the server pushes, sending no tasks/get at all
// while the stream works. When the server ends the stream gracefully or the
// connection breaks, Follow listens again at once (the first message of a
// stream is the task's current state, so nothing is missed, and a state
// already seen is not reported twice). When that listen cannot reach the
// server, Follow polls tasks/get as [FollowOptions.Retry] allows and
// listens again once a poll is answered.
//
// A server that does not stream the task is polled for the rest of the
// task's life, at the interval each answer asks for: one that refuses the
// listen (a JSON-RPC error such as -32601 or -32021, an HTTP error other
// than 502, 503 and 504, an answer that is not a stream, no
// acknowledgement within 30s, an acknowledgement without this task), ends
// it with an error, breaks three streams in a row before they brought
// anything new, or cannot be reached for a listen right after it answered
// a poll.
//
// Follow returns the last state seen (opts.Last when there was none, which
// may be nil) with any error, ctx.Err() when ctx ended.
func Follow(ctx context.Context, c *Client, taskID string, opts FollowOptions) (*Task, error) {
	f := &follower{c: c, id: taskID, opts: opts, last: opts.Last}
	if f.last != nil {
		f.lastKey = stateKey(f.last)
	}
	err := f.run(ctx)
	var s stopped
	if errors.As(err, &s) {
		err = s.err
	}
	return f.last, err
}

// follower carries one Follow.
type follower struct {
	c    *Client
	id   string
	opts FollowOptions
	// last is the last state seen, lastKey its comparable form.
	last    *Task
	lastKey string
	// tries counts failed requests in a row; failed is set from a failure
	// until the next state is reported.
	tries  int
	failed bool
}

func (f *follower) run(ctx context.Context) error {
	stream := !f.opts.Poll
	var wait time.Duration // before the next tasks/get
	if f.last != nil {
		wait = f.last.PollInterval()
	}
	polledOK := false // the last request was a tasks/get that succeeded
	for {
		if f.last != nil && f.last.Terminal() {
			return nil
		}
		if stream && f.tries == 0 {
			opened, err := f.listen(ctx)
			switch {
			case err == nil:
				return nil // terminal
			case ctx.Err() != nil:
				return ctx.Err()
			case errors.Is(err, errStopped):
				return err
			case errors.Is(err, errRefused) || !Unreachable(err) || (!opened && polledOK):
				// Refused, or a listen that fails while tasks/get
				// works: this server (or the way to it) does not stream.
				stream, wait = false, 0
			default:
				d, err := f.retry(err)
				if err != nil {
					return err
				}
				wait = d
			}
		}
		if err := f.sleep(ctx, wait); err != nil {
			return err
		}
		t, err := f.c.GetTask(ctx, f.id)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			polledOK = false
			if wait, err = f.retry(err); err != nil {
				return err
			}
			continue
		}
		f.tries, polledOK = 0, true
		if err := f.report(t); err != nil {
			return err
		}
		wait = t.PollInterval()
	}
}

// errStopped is matched by a stopped: an error of OnUpdate or Retry, which
// ends Follow as it is.
var errStopped = errors.New("follow stopped")

// errRefused is matched by a refused: the server does not stream this
// task, though it may answer tasks/get.
var errRefused = errors.New("no push stream")

type refused struct{ err error }

func (r refused) Error() string        { return r.err.Error() }
func (r refused) Is(target error) bool { return target == errRefused }
func (r refused) Unwrap() error        { return r.err }

type stopped struct{ err error }

func (s stopped) Error() string        { return s.err.Error() }
func (s stopped) Is(target error) bool { return target == errStopped }
func (s stopped) Unwrap() error        { return s.err }

// brokenStreams is how many streams in a row may break without bringing
// a new state before Follow polls instead.
const brokenStreams = 3

// listen follows the task on streams, listening again after each one
// ends, until the task is terminal (nil), the server refuses to stream it
// (a refused, or an error that is not [Unreachable]), cannot be reached
// (that error), or OnUpdate stopped it (a stopped). opened tells whether a
// stream was opened at all.
func (f *follower) listen(ctx context.Context) (opened bool, err error) {
	broken := 0
	for {
		sub, err := f.subscribe(ctx)
		if err != nil {
			return opened, err
		}
		opened = true
		f.tries = 0
		if !slices.Contains(sub.stream.TaskIDs, f.id) {
			// Unknown, foreign or expired: tasks/get says which.
			sub.close()
			return opened, refused{errors.New("subscriptions/listen: the server does not push this task")}
		}
		news, end, err := f.drain(ctx, sub)
		sub.close()
		if err != nil || (f.last != nil && f.last.Terminal()) {
			return opened, err
		}
		var rpcErr *RPCError
		switch {
		case errors.Is(end, ErrStreamEnded):
			broken = 0
		case errors.As(end, &rpcErr):
			// The server ended the listen with an error: poll.
			return opened, refused{fmt.Errorf("subscriptions/listen: %w", end)}
		case news:
			broken = 0
		default:
			if broken++; broken >= brokenStreams {
				return opened, refused{fmt.Errorf("subscriptions/listen: %d streams in a row broke without news: %w", broken, end)}
			}
		}
		if !news {
			// A stream that brought nothing new is not opened again at
			// once, so that a server or proxy ending streams early costs
			// no more than polling would.
			if err := f.sleep(ctx, f.interval()); err != nil {
				return opened, err
			}
		}
	}
}

// drain reports the states pushed on sub until the stream ends (end: why)
// or the task is terminal, or returns ctx's error or OnUpdate's (a
// stopped). news tells whether a state was reported.
func (f *follower) drain(ctx context.Context, sub *subscription) (news bool, end, err error) {
	tick, stop := f.ticker()
	defer stop()
	for {
		select {
		case <-ctx.Done():
			return news, nil, ctx.Err()
		case <-tick:
			f.opts.Tick()
		case p, ok := <-sub.events:
			if !ok {
				return news, io.ErrUnexpectedEOF, nil
			}
			if p.err != nil {
				return news, p.err, nil
			}
			if p.task.TaskID != f.id {
				continue
			}
			reported, err := f.reportNew(p.task)
			news = news || reported
			if err != nil || p.task.Terminal() {
				return news, nil, err
			}
		}
	}
}

// subscription is an open stream read by its own goroutine.
type subscription struct {
	stream *Stream
	events chan pushed
	cancel context.CancelFunc
}

// pushed is one result of Stream.Next.
type pushed struct {
	task *Task
	err  error
}

// subscribe listens for the task and starts reading the stream, ticking
// while it waits for the acknowledgement.
func (f *follower) subscribe(ctx context.Context) (*subscription, error) {
	sctx, cancel := context.WithCancel(ctx)
	type opened struct {
		s   *Stream
		err error
	}
	result := make(chan opened, 1)
	go func() {
		s, err := f.c.Listen(sctx, []string{f.id})
		result <- opened{s, err}
	}()
	abandon := func() {
		cancel()
		go func() {
			if o := <-result; o.s != nil {
				o.s.Close()
			}
		}()
	}
	timeout := time.NewTimer(listenAckTimeout)
	defer timeout.Stop()
	tick, stop := f.ticker()
	defer stop()
	for {
		select {
		case o := <-result:
			if o.err != nil {
				cancel()
				return nil, o.err
			}
			sub := &subscription{stream: o.s, events: make(chan pushed), cancel: cancel}
			go sub.read(sctx)
			return sub, nil
		case <-tick:
			f.opts.Tick()
		case <-timeout.C:
			abandon()
			return nil, errNoAck
		case <-ctx.Done():
			abandon()
			return nil, ctx.Err()
		}
	}
}

// read passes the stream's messages on until it ends or sub is closed.
func (sub *subscription) read(ctx context.Context) {
	defer close(sub.events)
	for {
		t, err := sub.stream.Next()
		select {
		case sub.events <- pushed{t, err}:
		case <-ctx.Done():
			return
		}
		if err != nil {
			return
		}
	}
}

// close ends the stream and its reading goroutine.
func (sub *subscription) close() {
	sub.cancel()
	sub.stream.Close()
}

// report passes t to OnUpdate unless it is the state seen last.
func (f *follower) report(t *Task) error {
	_, err := f.reportNew(t)
	return err
}

// reportNew is report, also telling whether t was new.
func (f *follower) reportNew(t *Task) (bool, error) {
	key := stateKey(t)
	if f.last != nil && key == f.lastKey && !f.failed {
		return false, nil
	}
	f.last, f.lastKey, f.failed = t, key, false
	if f.opts.OnUpdate == nil {
		return true, nil
	}
	if err := f.opts.OnUpdate(t); err != nil {
		return true, stopped{err}
	}
	return true, nil
}

// retry counts a failed request and returns the wait before the next one,
// or the error that ends Follow (a stopped).
func (f *follower) retry(err error) (time.Duration, error) {
	f.tries++
	f.failed = true
	if f.opts.Retry == nil {
		return 0, stopped{err}
	}
	d, err := f.opts.Retry(err, f.tries)
	if err != nil {
		return 0, stopped{err}
	}
	return d, nil
}

// interval is the task's poll interval, or the default before any state.
func (f *follower) interval() time.Duration {
	if f.last == nil {
		return DefaultPollInterval
	}
	return f.last.PollInterval()
}

// sleep waits for d, ticking meanwhile.
func (f *follower) sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	tick, stop := f.ticker()
	defer stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-timer.C:
			return nil
		case <-tick:
			f.opts.Tick()
		}
	}
}

// ticker returns the channel of Tick's calls (nil without Tick) and its
// stop function.
func (f *follower) ticker() (<-chan time.Time, func()) {
	if f.opts.Tick == nil {
		return nil, func() {}
	}
	t := time.NewTicker(tickEvery)
	return t.C, t.Stop
}

// stateKey is a task's state in comparable form: its JSON without _meta
// (a notification's subscription) and resultType (which only results have).
func stateKey(t *Task) string {
	var fields map[string]json.RawMessage
	if json.Unmarshal(t.Raw, &fields) != nil {
		data, _ := json.Marshal(t)
		return string(data)
	}
	delete(fields, "_meta")
	delete(fields, "resultType")
	data, _ := json.Marshal(fields)
	return string(data)
}

// Unreachable reports whether a request failed because the server could
// not be reached, the connection broke, or a gateway in front of the
// server answered that it is away (HTTP 502, 503 or 504): worth trying
// again later. An answer of the server itself, such as a JSON-RPC error,
// is not.
func Unreachable(err error) bool {
	var rpcErr *RPCError
	if errors.As(err, &rpcErr) {
		return gatewayStatus(rpcErr.HTTPStatus)
	}
	var httpErr *HTTPError
	if errors.As(err, &httpErr) {
		return gatewayStatus(httpErr.StatusCode)
	}
	var urlErr *url.Error
	return errors.As(err, &urlErr) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED)
}

func gatewayStatus(code int) bool {
	return code == http.StatusBadGateway || code == http.StatusServiceUnavailable || code == http.StatusGatewayTimeout
}
