package batchfake

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/jobbridge/jobbridge/internal/fakes/exchanges"
)

// OpEventDelivery is the operation name of a recorded event delivery (the
// fake's request to an API destination). It is not a Batch API operation,
// and [Server.Calls] does not count it.
const OpEventDelivery = "EventDelivery"

// The envelope values of a job state change, as Batch sends them.
const (
	eventSource     = "aws.batch"
	eventDetailType = "Batch Job State Change"
)

// The headers an EventBridge API destination sends with every request,
// besides its connection's credential, Host and Content-Length.
const (
	eventUserAgent      = "Amazon/EventBridge/ApiDestinations"
	eventContentType    = "application/json; charset=utf-8"
	eventRange          = "bytes=0-1048575"
	eventAcceptEncoding = "gzip,deflate"
)

// Defaults of [EventsOptions].
const (
	defaultEventTimeout  = 5 * time.Second // an API destination's response deadline
	defaultEventInterval = time.Second
)

// EventsOptions makes the server send its jobs' state changes the way AWS
// Batch and an EventBridge API destination do: a rule matching
// {"source": ["aws.batch"], "detail-type": ["Batch Job State Change"]}
// whose target is an API destination at URL, with a connection whose
// authorization is an API key.
type EventsOptions struct {
	// URL is the API destination's endpoint. Required.
	URL string
	// KeyHeader and Key are the connection's API key authorization: the
	// header sent with every delivery and its value. Required.
	KeyHeader string
	Key       string
	// Client sends the deliveries. Default: a client that follows no
	// redirect and gives up after 5 seconds, an API destination's deadline.
	Client *http.Client
	// Interval is how often the loop that [Server.Start] runs looks for
	// state changes to send. Default 1s.
	Interval time.Duration
}

// Event is one job state change event the server sent, or is to send.
type Event struct {
	// ID is the envelope's id, a random UUID; a redelivery keeps it.
	ID string
	// JobID and Status are the job and the status it changed to.
	JobID  string
	Status string
	// Time is the moment of the change; the envelope's time is it in whole
	// seconds.
	Time time.Time
	// Body is the envelope as posted.
	Body []byte
	// Deliveries counts the requests that carried the event, redeliveries
	// included; Answer is the HTTP status of the last (0 when it got none:
	// a transport error or a timeout).
	Deliveries int
	Answer     int
}

// eventEnvelope is an EventBridge event as an API destination posts it.
type eventEnvelope struct {
	Version    string    `json:"version"`
	ID         string    `json:"id"`
	DetailType string    `json:"detail-type"`
	Source     string    `json:"source"`
	Account    string    `json:"account"`
	Time       string    `json:"time"`
	Region     string    `json:"region"`
	Resources  []string  `json:"resources"`
	Detail     jobDetail `json:"detail"`
}

// collectEvents returns the state changes of every job since the last
// call, up to now, oldest first. It runs with s.mu held.
func (s *Server) collectEvents(now time.Time) ([]*Event, error) {
	var out []*Event
	for _, j := range s.order {
		// An array's children first: the parent ends once they have.
		for _, jj := range append(slices.Clone(j.children), j) {
			evs, err := s.jobEvents(jj, now)
			if err != nil {
				return nil, err
			}
			out = append(out, evs...)
		}
	}
	slices.SortStableFunc(out, func(a, b *Event) int { return a.Time.Compare(b.Time) })
	return out, nil
}

// jobEvents returns the job's state changes after the last moment already
// looked at, up to now: one event each time its status, or the number of
// its finished attempts, changes. Batch sends no event for the submission
// itself, and a phase of no length (a script's runnable=0s) sends none.
func (s *Server) jobEvents(j *job, now time.Time) ([]*Event, error) {
	if j.ev.done {
		return nil, nil
	}
	if j.ev.status == "" {
		// Submitted (an array's children are created PENDING): no event.
		j.ev.status = statusSubmitted
		if j.parent != nil {
			j.ev.status = statusPending
		}
	}
	var out []*Event
	for _, t := range j.moments() {
		if t.Before(j.created) || !j.ev.at.IsZero() && !t.After(j.ev.at) || t.After(now) {
			continue
		}
		st := j.at(t)
		if st.status == j.ev.status && len(st.attempts) == j.ev.attempts {
			continue
		}
		j.ev.status, j.ev.attempts = st.status, len(st.attempts)
		e, err := s.newEvent(j, t, st.status)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	j.ev.at = now
	j.ev.done = j.ev.status == statusSucceeded || j.ev.status == statusFailed
	return out, nil
}

// moments returns, in order, every moment at which the job's status may
// change.
func (j *job) moments() []time.Time {
	if j.size > 0 {
		ts := []time.Time{j.created, j.created.Add(j.script.submitted)}
		if j.stop != nil {
			ts = append(ts, j.stop.at)
		}
		for _, c := range j.children {
			end, _ := c.final()
			ts = append(ts, end)
		}
		slices.SortFunc(ts, time.Time.Compare)
		return slices.Compact(ts)
	}
	p := j.plan()
	ts := []time.Time{j.created, p.submittedEnd, p.readyAt, p.depsEnd, p.end}
	for _, a := range p.attempts {
		ts = append(ts, a.runnableAt, a.startingAt, a.start, a.end)
	}
	if j.stop != nil {
		end, _ := j.final()
		ts = append(ts, j.stop.at, end)
	}
	slices.SortFunc(ts, time.Time.Compare)
	return slices.Compact(ts)
}

// newEvent builds the event of a change of the job to status at t.
func (s *Server) newEvent(j *job, t time.Time, status string) (*Event, error) {
	env := eventEnvelope{
		Version:    "0",
		ID:         newRequestID(),
		DetailType: eventDetailType,
		Source:     eventSource,
		Account:    s.account,
		Time:       t.UTC().Truncate(time.Second).Format(time.RFC3339),
		Region:     s.region,
		Resources:  []string{j.arn},
		Detail:     j.detail(t),
	}
	body, err := json.Marshal(env)
	if err != nil {
		return nil, fmt.Errorf("encoding the event of job %s: %w", j.id, err)
	}
	return &Event{ID: env.ID, JobID: j.id, Status: status, Time: t, Body: body}, nil
}

// SendEvents sends every job state change since the last call, up to the
// server's clock, oldest first, one POST each, as an API destination does.
// It returns how many events it delivered. An event whose delivery gets
// 429, a 5xx or no answer stays queued, with those after it, and is sent
// again (with the same id) by the next call, as EventBridge retries it;
// any other answer ends its delivery (EventBridge retries no other 4xx).
// The error says why the first such event was not delivered.
//
// Tests with a manual clock call it after advancing the clock; the loop
// [Server.Start] runs calls it every [EventsOptions.Interval].
func (s *Server) SendEvents(ctx context.Context) (int, error) {
	switch {
	case s.events == nil:
		return 0, errors.New("batchfake: the server has no Options.Events")
	case s.events.URL == "" || s.events.KeyHeader == "" || s.events.Key == "":
		return 0, errors.New("batchfake: Options.Events needs a URL, a KeyHeader and a Key")
	}
	s.evMu.Lock()
	defer s.evMu.Unlock()
	s.mu.Lock()
	evs, err := s.collectEvents(s.now())
	s.mu.Unlock()
	if err != nil {
		return 0, err
	}
	s.evQueue = append(s.evQueue, evs...)
	var n int
	for len(s.evQueue) > 0 {
		e := s.evQueue[0]
		status, err := s.deliver(ctx, e)
		if err == nil && status != http.StatusTooManyRequests && status < 500 {
			s.evQueue = s.evQueue[1:]
			s.evSent = append(s.evSent, e)
			n++
			continue
		}
		if err == nil {
			err = fmt.Errorf("answered %d", status)
		}
		return n, fmt.Errorf("batchfake: delivering event %s (job %s %s): %w; %d events wait", e.ID, e.JobID, e.Status, err, len(s.evQueue))
	}
	return n, nil
}

// Redeliver sends an event that was delivered before once more, with the
// same id and body, as EventBridge may. It returns the answer's HTTP
// status.
func (s *Server) Redeliver(ctx context.Context, id string) (int, error) {
	s.evMu.Lock()
	defer s.evMu.Unlock()
	for _, e := range s.evSent {
		if e.ID == id {
			return s.deliver(ctx, e)
		}
	}
	return 0, fmt.Errorf("batchfake: no event %s was delivered", id)
}

// Events returns copies of the events delivered so far (in the order they
// were delivered) followed by those still queued.
func (s *Server) Events() []Event {
	s.evMu.Lock()
	defer s.evMu.Unlock()
	out := make([]Event, 0, len(s.evSent)+len(s.evQueue))
	for _, e := range append(slices.Clone(s.evSent), s.evQueue...) {
		c := *e
		c.Body = slices.Clone(e.Body)
		out = append(out, c)
	}
	return out
}

// deliver posts one event and records the exchange. It runs with s.evMu
// held.
func (s *Server) deliver(ctx context.Context, e *Event) (int, error) {
	o := s.events
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, o.URL, bytes.NewReader(e.Body))
	if err != nil {
		return 0, fmt.Errorf("batchfake: the events URL: %w", err)
	}
	h := req.Header
	h.Set("Content-Type", eventContentType)
	h.Set("User-Agent", eventUserAgent)
	h.Set("Range", eventRange)
	h.Set("Accept-Encoding", eventAcceptEncoding)
	h.Set("Connection", "close")
	h.Set(o.KeyHeader, o.Key)
	req.Close = true

	e.Deliveries++
	e.Answer = 0
	ex := exchanges.Exchange{Backend: "batch", Method: req.Method, Path: req.URL.Path, Query: req.URL.RawQuery, Operation: OpEventDelivery}
	if s.exchanges != "" {
		rh := exchanges.RedactHeaders(h, exchanges.KeepScheme)
		rh.Set(o.KeyHeader, "[redacted]")
		rh.Set("Host", req.URL.Host)
		rh.Set("Content-Length", strconv.Itoa(len(e.Body)))
		ex.RequestHeaders = rh
		ex.RequestBody, ex.Truncated = exchanges.Body(e.Body)
		defer func() {
			if err := exchanges.Append(s.exchanges, ex); err != nil {
				fmt.Fprintf(os.Stderr, "batchfake: recording an event delivery: %v\n", err)
			}
		}()
	}
	resp, err := s.eventClient().Do(req)
	if err != nil {
		return 0, fmt.Errorf("posting to %s: %w", redactURL(req.URL), err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, exchanges.MaxBody+1)) // a cut answer is still an answer
	e.Answer = resp.StatusCode
	ex.Status, ex.ResponseHeaders = resp.StatusCode, resp.Header.Clone()
	var cut bool
	ex.ResponseBody, cut = exchanges.Body(body)
	ex.Truncated = ex.Truncated || cut
	return resp.StatusCode, nil
}

func (s *Server) eventClient() *http.Client {
	if s.events.Client != nil {
		return s.events.Client
	}
	return defaultEventClient
}

// defaultEventClient follows no redirect and gives up after an API
// destination's deadline.
var defaultEventClient = &http.Client{
	Timeout:       defaultEventTimeout,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

// redactURL drops a URL's user information and query from error text.
func redactURL(u *url.URL) string {
	c := *u
	c.User, c.RawQuery = nil, ""
	return c.String()
}

// eventState is how far a job's events have been sent.
type eventState struct {
	at       time.Time // the changes up to this moment are sent; zero: none yet
	status   string    // the status last sent, or the one it was created in
	attempts int       // the number of finished attempts last sent
	done     bool      // the final status is sent
}

// startEvents runs the delivery loop until stopEvents, when the server
// has Options.Events.
func (s *Server) startEvents() {
	s.evLife.Lock()
	defer s.evLife.Unlock()
	if s.events == nil || s.evStop != nil {
		return
	}
	// The loop lives as long as the listener, not any request.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	s.evStop, s.evDone = cancel, done
	every := s.events.Interval
	if every <= 0 {
		every = defaultEventInterval
	}
	go func() {
		defer close(done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		var last string
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			_, err := s.SendEvents(ctx)
			switch {
			case err == nil:
				last = ""
			case ctx.Err() == nil && err.Error() != last:
				fmt.Fprintf(os.Stderr, "%v\n", err)
				last = err.Error()
			}
		}
	}()
}

// stopEvents ends the delivery loop and waits for it.
func (s *Server) stopEvents() {
	s.evLife.Lock()
	defer s.evLife.Unlock()
	if s.evStop == nil {
		return
	}
	s.evStop()
	<-s.evDone
	s.evStop, s.evDone = nil, nil
}
