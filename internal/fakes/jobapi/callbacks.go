package jobapi

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jobbridge/jobbridge/internal/fakes/exchanges"
)

// The signature schemes of [Callbacks].
const (
	SchemeStandardWebhooks = "standard_webhooks"
	SchemeHexHMAC          = "hmac_sha256_hex"
	SchemeBase64HMAC       = "hmac_sha256_base64"
)

// exchangeBackend is the backend name of recorded callbacks (see package
// exchanges); the record's Operation names the signature scheme.
const exchangeBackend = "jobapi-callbacks"

// Callbacks makes a [Server] call a URL back on each change of a job's
// state, as a job API with webhooks does: it POSTs the job document (the
// body of GET /jobs/<id> at that moment) as JSON, signed. A change is a new
// status, or a new set of outstanding questions. The server does not retry
// a failed delivery on its own; [Server.Redeliver] sends one again.
type Callbacks struct {
	// URL receives the callbacks.
	URL string
	// Secret is the signing secret. For standard_webhooks it is written as
	// Standard Webhooks shows secrets, "whsec_" and the base64 of the key;
	// for the hmac schemes it is the key's text.
	Secret string
	// Scheme is standard_webhooks (the default), hmac_sha256_hex or
	// hmac_sha256_base64.
	//
	// standard_webhooks sends webhook-id (the delivery's ID, the same on a
	// redelivery), webhook-timestamp (Unix seconds of the attempt) and
	// webhook-signature ("v1," and the base64 HMAC-SHA256 of
	// "<id>.<timestamp>.<body>"). The hmac schemes send the hex or base64
	// HMAC-SHA256 of the body (of "<timestamp>.<body>" with
	// TimestampHeader) after Prefix in SignatureHeader, and the delivery's
	// ID in IDHeader.
	Scheme string
	// SignatureHeader names the signature header. Default
	// webhook-signature for standard_webhooks, X-Signature otherwise.
	SignatureHeader string
	// Prefix, for the hmac schemes, goes before the signature ("sha256=").
	Prefix string
	// TimestampHeader, for the hmac schemes, names a header with the Unix
	// seconds of the attempt, which is then signed too. Standard Webhooks
	// always sends webhook-timestamp.
	TimestampHeader string
	// IDHeader names the delivery ID's header. Default webhook-id.
	IDHeader string
	// Client sends the callbacks. Default: a client with a 15 s timeout.
	Client *http.Client
	// Interval is how often the server looks for changes that time alone
	// made (a job that has finished running); it also looks after each
	// request it handles. A goroutine does this from [New] until
	// [Server.Close]. Default 100 ms. Negative: no goroutine; callbacks are
	// sent only when the test calls [Server.SendCallbacks], which keeps a
	// test with a fake clock deterministic.
	Interval time.Duration
}

// Delivery is one callback the server sent.
type Delivery struct {
	// ID identifies the delivery; a redelivery keeps it.
	ID string
	// JobID and Status are the job's and the status it reported.
	JobID  string
	Status string
	// Body is the job document sent, as signed.
	Body []byte
	// Header holds the request headers of the last attempt.
	Header http.Header
	// Answer is the HTTP status the receiver answered the last attempt
	// with; 0 when it did not answer (then Err says why).
	Answer int
	Err    error
}

// callbacker sends a server's callbacks.
type callbacker struct {
	cfg    Callbacks
	prefix string // of delivery IDs, random per server

	// sendMu serialises collecting and sending, so that the deliveries
	// about one job go out in the order of its changes.
	sendMu sync.Mutex

	mu         sync.Mutex
	deliveries []*Delivery

	kick chan struct{}
	stop chan struct{}
	done chan struct{}
}

func newCallbacker(cfg Callbacks) *callbacker {
	if cfg.Scheme == "" {
		cfg.Scheme = SchemeStandardWebhooks
	}
	if cfg.SignatureHeader == "" {
		cfg.SignatureHeader = "X-Signature"
		if cfg.Scheme == SchemeStandardWebhooks {
			cfg.SignatureHeader = "webhook-signature"
		}
	}
	if cfg.Scheme == SchemeStandardWebhooks {
		cfg.TimestampHeader = "webhook-timestamp"
	}
	if cfg.IDHeader == "" {
		cfg.IDHeader = "webhook-id"
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: 15 * time.Second}
	}
	if cfg.Interval == 0 {
		cfg.Interval = 100 * time.Millisecond
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b) // never fails
	return &callbacker{
		cfg:    cfg,
		prefix: "msg_" + hex.EncodeToString(b),
		kick:   make(chan struct{}, 1),
		stop:   make(chan struct{}),
		done:   make(chan struct{}),
	}
}

// run sends the changes it finds every Interval and when kicked, until
// stopped.
func (c *callbacker) run(s *Server) {
	defer close(c.done)
	t := time.NewTicker(c.cfg.Interval)
	defer t.Stop()
	ctx, cancel := context.WithCancel(context.Background()) // the fake's own lifetime, ended by Close
	defer cancel()
	go func() {
		<-c.stop
		cancel()
	}()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
		case <-c.kick:
		}
		_, _ = s.SendCallbacks(ctx) // failures are in Deliveries
	}
}

// notify asks the sender to look for changes, without waiting.
func (c *callbacker) notify() {
	if c.cfg.Interval < 0 {
		return
	}
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// close stops the sender and waits for it.
func (c *callbacker) close() {
	if c.cfg.Interval < 0 {
		return
	}
	select {
	case <-c.stop:
	default:
		close(c.stop)
	}
	<-c.done
}

// SendCallbacks sends a callback for each job whose state has changed since
// its last callback (a new job counts as changed), in job order, and
// returns them. Its error joins the failures: a delivery the receiver did
// not answer with a 2xx status. It does nothing without [Options.Callbacks].
func (s *Server) SendCallbacks(ctx context.Context) ([]Delivery, error) {
	c := s.callbacks
	if c == nil {
		return nil, nil
	}
	c.sendMu.Lock()
	defer c.sendMu.Unlock()
	pending := s.changes()
	var errs []error
	out := make([]Delivery, 0, len(pending))
	for _, d := range pending {
		c.send(ctx, d, s.now())
		if err := d.failure(); err != nil {
			errs = append(errs, err)
		}
		out = append(out, c.snapshot(d))
	}
	return out, errors.Join(errs...)
}

// changes lists the deliveries due: one per job whose state differs from
// what its last delivery reported.
func (s *Server) changes() []*Delivery {
	c := s.callbacks
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	jobs := make([]*job, 0, len(s.jobs))
	for _, j := range s.jobs {
		jobs = append(jobs, j)
	}
	slices.SortFunc(jobs, func(a, b *job) int { return a.seq - b.seq })
	var due []*Delivery
	for _, j := range jobs {
		doc := j.document(now)
		key := doc.Status
		for _, q := range doc.Questions {
			key += "\x00" + q.Key
		}
		if j.sent && key == j.sentKey {
			continue
		}
		j.sent, j.sentKey = true, key
		j.deliveries++
		body, _ := json.Marshal(doc) // a job document always encodes
		due = append(due, &Delivery{
			ID:     fmt.Sprintf("%s_%d_%d", c.prefix, j.seq, j.deliveries),
			JobID:  j.id,
			Status: doc.Status,
			Body:   body,
		})
	}
	c.mu.Lock()
	c.deliveries = append(c.deliveries, due...)
	c.mu.Unlock()
	return due
}

// Deliveries returns every callback sent so far, oldest first, each as its
// last attempt left it.
func (s *Server) Deliveries() []Delivery {
	c := s.callbacks
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]Delivery, len(c.deliveries))
	for i, d := range c.deliveries {
		out[i] = cloneDelivery(d)
	}
	return out
}

// Redeliver sends the delivery with the given ID again: the same ID and
// body, signed anew with timestamp at (zero: the server's clock now), as a
// sender's retry does; an old at makes a replay for a test. It returns the
// delivery as this attempt left it, and an error when the receiver did not
// answer 2xx.
func (s *Server) Redeliver(ctx context.Context, id string, at time.Time) (Delivery, error) {
	c := s.callbacks
	if c == nil {
		return Delivery{}, errors.New("the job API fake has no callbacks configured")
	}
	c.mu.Lock()
	i := slices.IndexFunc(c.deliveries, func(d *Delivery) bool { return d.ID == id })
	c.mu.Unlock()
	if i < 0 {
		return Delivery{}, fmt.Errorf("no delivery %q", id)
	}
	c.sendMu.Lock()
	defer c.sendMu.Unlock()
	c.mu.Lock()
	d := c.deliveries[i]
	c.mu.Unlock()
	if at.IsZero() {
		at = s.now()
	}
	c.send(ctx, d, at)
	return c.snapshot(d), d.failure()
}

func (d *Delivery) failure() error {
	switch {
	case d.Err != nil:
		return fmt.Errorf("callback %s about job %s: %w", d.ID, d.JobID, d.Err)
	case d.Answer < 200 || d.Answer > 299:
		return fmt.Errorf("callback %s about job %s: answered HTTP %d", d.ID, d.JobID, d.Answer)
	}
	return nil
}

func (c *callbacker) snapshot(d *Delivery) Delivery {
	c.mu.Lock()
	defer c.mu.Unlock()
	return cloneDelivery(d)
}

func cloneDelivery(d *Delivery) Delivery {
	out := *d
	out.Body = slices.Clone(d.Body)
	out.Header = d.Header.Clone()
	return out
}

// send makes one attempt at delivery d, signed with timestamp at, and
// records its outcome in d (and, with exchanges.Env set, the exchange).
func (c *callbacker) send(ctx context.Context, d *Delivery, at time.Time) {
	h, err := c.sign(d.ID, d.Body, at)
	var answer int
	var respHeader http.Header
	var respBody []byte
	if err == nil {
		var req *http.Request
		req, err = http.NewRequestWithContext(ctx, http.MethodPost, c.cfg.URL, bytes.NewReader(d.Body))
		if err == nil {
			req.Header = h.Clone()
			var resp *http.Response
			resp, err = c.cfg.Client.Do(req)
			if err == nil {
				respBody, _ = io.ReadAll(io.LimitReader(resp.Body, 64<<10))
				resp.Body.Close()
				answer, respHeader = resp.StatusCode, resp.Header
			}
		}
	}
	c.mu.Lock()
	d.Header, d.Answer, d.Err = h, answer, err
	c.mu.Unlock()
	if dir := os.Getenv(exchanges.Env); dir != "" && err == nil {
		c.record(dir, d, h, answer, respHeader, respBody)
	}
}

// sign returns the headers of an attempt at delivering body as id at time
// at.
func (c *callbacker) sign(id string, body []byte, at time.Time) (http.Header, error) {
	cfg := c.cfg
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", "jobapi-fake-callbacks")
	ts := strconv.FormatInt(at.Unix(), 10)
	switch cfg.Scheme {
	case SchemeStandardWebhooks:
		key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(cfg.Secret, "whsec_"))
		if err != nil || len(key) == 0 {
			return h, errors.New("the callback secret is not whsec_ followed by base64")
		}
		mac := hmac.New(sha256.New, key)
		mac.Write([]byte(id + "." + ts + "."))
		mac.Write(body)
		h.Set(cfg.IDHeader, id)
		h.Set(cfg.TimestampHeader, ts)
		h.Set(cfg.SignatureHeader, "v1,"+base64.StdEncoding.EncodeToString(mac.Sum(nil)))
	case SchemeHexHMAC, SchemeBase64HMAC:
		if cfg.Secret == "" {
			return h, errors.New("the callback secret is empty")
		}
		mac := hmac.New(sha256.New, []byte(cfg.Secret))
		if cfg.TimestampHeader != "" {
			mac.Write([]byte(ts + "."))
			h.Set(cfg.TimestampHeader, ts)
		}
		mac.Write(body)
		sig := hex.EncodeToString(mac.Sum(nil))
		if cfg.Scheme == SchemeBase64HMAC {
			sig = base64.StdEncoding.EncodeToString(mac.Sum(nil))
		}
		h.Set(cfg.IDHeader, id)
		h.Set(cfg.SignatureHeader, cfg.Prefix+sig)
	default:
		return h, fmt.Errorf("unknown callback scheme %q", cfg.Scheme)
	}
	return h, nil
}

// record appends the exchange of one attempt, for the spec checks.
func (c *callbacker) record(dir string, d *Delivery, h http.Header, answer int, respHeader http.Header, respBody []byte) {
	u, err := url.Parse(c.cfg.URL)
	if err != nil {
		return
	}
	reqBody, reqCut := exchanges.Body(d.Body)
	resp, respCut := exchanges.Body(respBody)
	x := exchanges.Exchange{
		Backend:         exchangeBackend,
		Method:          http.MethodPost,
		Path:            u.EscapedPath(),
		Query:           u.RawQuery,
		RequestHeaders:  exchanges.RedactHeaders(h, exchanges.DropAuthorization),
		RequestBody:     reqBody,
		Status:          answer,
		ResponseHeaders: respHeader,
		ResponseBody:    resp,
		Operation:       c.cfg.Scheme,
		Truncated:       reqCut || respCut,
	}
	if x.ResponseHeaders == nil {
		x.ResponseHeaders = http.Header{}
	}
	_ = exchanges.Append(dir, x) // a test records what it can; the checks find gaps
}
