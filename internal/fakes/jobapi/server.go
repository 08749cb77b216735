package jobapi

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jobbridge/jobbridge/internal/fakes/loopback"
)

// maxBodyBytes bounds a request body.
const maxBodyBytes = 1 << 20

// Options configures a [Server]. The zero value and a nil *Options select the
// defaults.
type Options struct {
	// Now is the server's clock; job progress is computed from it on each
	// request. Default time.Now.
	Now func() time.Time
	// ListingLag, when positive, leaves a job out of the listing
	// (GET /jobs) until it is this old, as job APIs whose listing lags
	// their submissions do; GET /jobs/{id} answers at once. Default 0.
	ListingLag time.Duration
	// Callbacks, when set, makes the server call a URL back, signed, on
	// each change of a job's state; see [Callbacks].
	Callbacks *Callbacks
}

// Server is the fake job API. Create one with [New]; it is an [http.Handler]
// and is safe for concurrent use.
type Server struct {
	now        func() time.Time
	listingLag time.Duration

	mu          sync.Mutex
	seq         int
	jobs        map[string]*job
	byIdemKey   map[string]*job
	requests    int
	submissions map[string]int
	cancels     map[string]int
	answers     map[string]map[string]int
	faults      []*Fault
	callbacks   *callbacker // nil without Options.Callbacks

	// lifeMu guards the listener started by Start.
	life loopback.Server
}

// New returns an empty server.
func New(opts *Options) *Server {
	s := &Server{
		now:         time.Now,
		jobs:        make(map[string]*job),
		byIdemKey:   make(map[string]*job),
		submissions: make(map[string]int),
		cancels:     make(map[string]int),
		answers:     make(map[string]map[string]int),
	}
	if opts != nil && opts.Now != nil {
		s.now = opts.Now
	}
	if opts != nil {
		s.listingLag = opts.ListingLag
	}
	if opts != nil && opts.Callbacks != nil {
		s.callbacks = newCallbacker(*opts.Callbacks)
		if s.callbacks.cfg.Interval > 0 {
			go s.callbacks.run(s)
		}
	}
	return s
}

// Start listens on addr (for example "127.0.0.1:0"; empty means that) and
// serves in the background until [Server.Close]. It returns the base URL,
// such as "http://127.0.0.1:41234".
func (s *Server) Start(addr string) (baseURL string, err error) {
	addr, err = s.life.Start("job API fake", addr, s)
	if err != nil {
		return "", err
	}
	return "http://" + addr, nil
}

// Close stops the listener started by [Server.Start] and closes its
// connections, and stops sending callbacks in the background (for good).
// Jobs are kept.
func (s *Server) Close() error {
	if s.callbacks != nil {
		s.callbacks.close()
	}
	return s.life.Close("job API fake")
}

// Submissions returns how many POST /jobs requests created a job with the
// given correlation ID. Idempotent repeats are not counted.
func (s *Server) Submissions(correlationID string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.submissions[correlationID]
}

// Cancels returns how many cancel requests for the job the server handled,
// whatever their answer (202, 409 or 404).
func (s *Server) Cancels(jobID string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cancels[jobID]
}

// Answers returns, per key, how many times an answer for the key was
// delivered in an answers request the server accepted (answered 200),
// counting ignored replays too, so that a duplicate delivery shows as 2.
func (s *Server) Answers(jobID string) map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.answers[jobID])
}

// Requests returns how many requests the server has received, including
// those answered by an injected fault.
func (s *Server) Requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests
}

// Purge forgets a job, as a backend does when it expires old jobs: later
// requests about it answer 404 and its idempotency key is free again.
// Counters are kept.
func (s *Server) Purge(jobID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	j, ok := s.jobs[jobID]
	if !ok {
		return
	}
	delete(s.jobs, jobID)
	if j.idemKey != "" {
		delete(s.byIdemKey, j.idemKey)
	}
}

// Fault is a scripted failure. Faults are kept in the order they were
// injected; each request consumes the first fault that matches it.
type Fault struct {
	// Method matches the request method exactly; empty matches any.
	Method string
	// Path matches a prefix of the request path; empty matches any.
	Path string
	// Times is how many matching requests the fault affects; 0 means 1.
	Times int
	// Status is the HTTP status to answer, for example 503, 429 or 500;
	// 0 means 503. The body is {"error": "injected fault"}.
	Status int
	// RetryAfter, when positive, is sent as a Retry-After header in whole
	// seconds (rounded up).
	RetryAfter time.Duration
	// AfterHandling handles the request normally first (creating the job,
	// cancelling it, ...) and only then answers Status: the client cannot
	// tell whether the request took effect.
	AfterHandling bool
	// Drop closes the connection without an answer (after handling the
	// request when AfterHandling is set).
	Drop bool
	// Body, when set, is the answer's body, written as is, instead of
	// {"error": "injected fault"}: for example `{}` for a 201 without a job
	// ID, or `{"message": "quota exceeded"}` for a refusal. Every "{id}" in
	// it is replaced by the ID of the job the request created or addressed
	// (empty when there is none, such as a start fault without
	// AfterHandling).
	Body string
	// ContentType, when set, is the answer's Content-Type instead of
	// application/json: for example "text/html" for a proxy's error page
	// in Body.
	ContentType string
	// Location, when set, is sent as the Location header, with "{id}"
	// replaced as in Body: for example "http://elsewhere.example/jobs/{id}".
	Location string

	// until is set by InjectUntil: the fault lasts until removed.
	until bool
}

// Inject adds a fault after those already waiting.
func (s *Server) Inject(f Fault) {
	if f.Times <= 0 {
		f.Times = 1
	}
	s.add(&f)
}

// InjectUntil adds a fault, after those already waiting, that answers every
// matching request (Times is ignored) until remove is called. For example
// InjectUntil(Fault{Status: 429, RetryAfter: 7 * time.Second}) throttles the
// whole API.
func (s *Server) InjectUntil(f Fault) (remove func()) {
	f.until = true
	p := &f
	s.add(p)
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if i := slices.Index(s.faults, p); i >= 0 {
			s.faults = slices.Delete(s.faults, i, i+1)
		}
	}
}

func (s *Server) add(f *Fault) {
	if f.Status == 0 {
		f.Status = http.StatusServiceUnavailable
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, f)
}

// takeFault consumes one use of the first fault matching the request.
func (s *Server) takeFault(method, path string) (Fault, bool) {
	for i, f := range s.faults {
		if (f.Method != "" && f.Method != method) || !strings.HasPrefix(path, f.Path) {
			continue
		}
		if f.until {
			return *f, true
		}
		f.Times--
		if f.Times == 0 {
			s.faults = slices.Delete(s.faults, i, i+1)
		}
		return *f, true
	}
	return Fault{}, false
}

// response is an answer computed under the lock and written after it.
type response struct {
	status      int
	contentType string // default application/json
	location    string
	allow       string
	body        any
	raw         []byte // written instead of body when set
}

func errorResponse(status int, format string, args ...any) response {
	return response{status: status, body: errorBody{Error: fmt.Sprintf(format, args...)}}
}

type errorBody struct {
	Error string `json:"error"`
}

// ServeHTTP implements the wire API described in the package documentation.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, readErr := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))

	s.mu.Lock()
	s.requests++
	fault, faulted := s.takeFault(r.Method, r.URL.Path)
	var resp response
	if !faulted || fault.AfterHandling {
		resp = s.handle(r, body, readErr)
	}
	s.mu.Unlock()

	switch {
	case faulted && fault.Drop:
		dropConnection(w)
	case faulted:
		if fault.RetryAfter > 0 {
			secs := (fault.RetryAfter + time.Second - 1) / time.Second
			w.Header().Set("Retry-After", fmt.Sprint(int64(secs)))
		}
		writeResponse(w, faultResponse(fault, resp, r.URL.Path))
	default:
		writeResponse(w, resp)
	}
	if s.callbacks != nil {
		s.callbacks.notify() // the request may have changed a job
	}
}

// faultResponse is the answer of an injected fault; handled is the normal
// answer when the request was handled first.
func faultResponse(f Fault, handled response, path string) response {
	resp := errorResponse(f.Status, "injected fault")
	id := strings.TrimPrefix(handled.location, "/jobs/")
	if id == "" {
		if rest, ok := strings.CutPrefix(path, "/jobs/"); ok {
			id, _, _ = strings.Cut(rest, "/")
		}
	}
	if f.Body != "" {
		resp.raw = []byte(strings.ReplaceAll(f.Body, "{id}", id))
	}
	if f.Location != "" {
		resp.location = strings.ReplaceAll(f.Location, "{id}", id)
	}
	resp.contentType = f.ContentType
	return resp
}

// handle routes one request. It runs with s.mu held.
func (s *Server) handle(r *http.Request, body []byte, readErr error) response {
	if readErr != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](readErr); ok {
			return errorResponse(http.StatusRequestEntityTooLarge, "request body is larger than %d bytes", maxBodyBytes)
		}
		return errorResponse(http.StatusBadRequest, "reading request body: %v", readErr)
	}
	path := r.URL.Path
	if path == "/jobs" {
		switch r.Method {
		case http.MethodPost:
			return s.create(r, body)
		case http.MethodGet:
			return s.find(r.URL.Query().Get("correlation_id"))
		}
		return methodNotAllowed("GET, POST")
	}
	rest, ok := strings.CutPrefix(path, "/jobs/")
	if !ok {
		return errorResponse(http.StatusNotFound, "not found")
	}
	id, action, _ := strings.Cut(rest, "/")
	if id == "" || strings.Contains(action, "/") {
		return errorResponse(http.StatusNotFound, "not found")
	}
	switch action {
	case "":
		if r.Method != http.MethodGet {
			return methodNotAllowed("GET")
		}
		return s.get(id)
	case "cancel":
		if r.Method != http.MethodPost {
			return methodNotAllowed("POST")
		}
		return s.cancel(id)
	case "answers":
		if r.Method != http.MethodPost {
			return methodNotAllowed("POST")
		}
		return s.answer(r, id, body)
	}
	return errorResponse(http.StatusNotFound, "not found")
}

func methodNotAllowed(allow string) response {
	resp := errorResponse(http.StatusMethodNotAllowed, "method not allowed")
	resp.allow = allow
	return resp
}

// decodeJSON checks the content type and decodes a JSON object body, turning
// problems into 415, 400 or 422 answers.
func decodeJSON(r *http.Request, body []byte, v any) (response, bool) {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
			return errorResponse(http.StatusUnsupportedMediaType, "content type %q is not JSON", ct), false
		}
	}
	if err := decodeObject(body, v); err != nil {
		if errors.Is(err, errInvalidJSON) {
			return errorResponse(http.StatusBadRequest, "%v", err), false
		}
		return errorResponse(http.StatusUnprocessableEntity, "%v", err), false
	}
	return response{}, true
}

func (s *Server) create(r *http.Request, body []byte) response {
	var sc script
	if resp, ok := decodeJSON(r, body, &sc); !ok {
		return resp
	}
	if err := sc.validate(); err != nil {
		return errorResponse(http.StatusUnprocessableEntity, "%v", err)
	}
	if sc.CorrelationID == "" {
		sc.CorrelationID = r.Header.Get("X-Correlation-ID")
	}
	now := s.now()
	key := r.Header.Get("Idempotency-Key")
	if j, ok := s.byIdemKey[key]; ok && key != "" {
		return response{status: http.StatusOK, location: "/jobs/" + j.id, body: j.document(now)}
	}
	s.seq++
	j := &job{
		id:        fmt.Sprintf("job-%06d", s.seq),
		seq:       s.seq,
		idemKey:   key,
		script:    sc,
		createdAt: now,
		answered:  make(map[string]bool),
	}
	s.jobs[j.id] = j
	if key != "" {
		s.byIdemKey[key] = j
	}
	s.submissions[sc.CorrelationID]++
	return response{status: http.StatusCreated, location: "/jobs/" + j.id, body: j.document(now)}
}

func (s *Server) get(id string) response {
	j, ok := s.jobs[id]
	if !ok {
		return jobNotFound()
	}
	return response{status: http.StatusOK, body: j.document(s.now())}
}

func jobNotFound() response { return errorResponse(http.StatusNotFound, "job not found") }

func jobFinished() response { return errorResponse(http.StatusConflict, "job already finished") }

func (s *Server) find(correlationID string) response {
	now := s.now()
	var found []*job
	for _, j := range s.jobs {
		if now.Sub(j.createdAt) < s.listingLag {
			continue // not listed yet
		}
		if correlationID == "" || j.script.CorrelationID == correlationID {
			found = append(found, j)
		}
	}
	slices.SortFunc(found, func(a, b *job) int { return cmp.Compare(b.seq, a.seq) })
	docs := make([]jobDocument, 0, len(found))
	for _, j := range found {
		docs = append(docs, j.document(now))
	}
	return response{status: http.StatusOK, body: jobList{Jobs: docs}}
}

type jobList struct {
	Jobs []jobDocument `json:"jobs"`
}

func (s *Server) cancel(id string) response {
	s.cancels[id]++
	j, ok := s.jobs[id]
	if !ok {
		return jobNotFound()
	}
	now := s.now()
	if j.stateAt(now).finished() {
		return jobFinished()
	}
	if j.script.OnCancel == onCancelRefuse {
		return errorResponse(http.StatusConflict, "job %s cannot be cancelled while it runs", id)
	}
	j.cancel(now)
	return response{status: http.StatusAccepted, body: struct{}{}}
}

func (s *Server) answer(r *http.Request, id string, body []byte) response {
	j, ok := s.jobs[id]
	if !ok {
		return jobNotFound()
	}
	var ab answersBody
	if resp, ok := decodeJSON(r, body, &ab); !ok {
		return resp
	}
	if err := ab.validate(); err != nil {
		return errorResponse(http.StatusUnprocessableEntity, "%v", err)
	}
	now := s.now()
	if j.stateAt(now).finished() {
		return jobFinished()
	}
	j.answer(now, ab.Answers)
	counts := s.answers[id]
	if counts == nil {
		counts = make(map[string]int)
		s.answers[id] = counts
	}
	for key := range ab.Answers {
		counts[key]++
	}
	return response{status: http.StatusOK, body: j.document(now)}
}

func writeResponse(w http.ResponseWriter, resp response) {
	h := w.Header()
	h.Set("Content-Type", cmp.Or(resp.contentType, "application/json"))
	if resp.location != "" {
		h.Set("Location", resp.location)
	}
	if resp.allow != "" {
		h.Set("Allow", resp.allow)
	}
	w.WriteHeader(resp.status)
	if resp.raw != nil {
		_, _ = w.Write(resp.raw) // the client may have gone; nothing to do
		return
	}
	_ = json.NewEncoder(w).Encode(resp.body) // the client may have gone; nothing to do
}

// dropConnection closes the client's connection without writing a response.
func dropConnection(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		// Not hijackable (HTTP/2, a recorder): abort the response instead.
		panic(http.ErrAbortHandler)
	}
	_ = conn.Close()
}
