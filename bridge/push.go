package bridge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jobbridge/jobbridge/mapping"
)

// Push: notifications/tasks on subscriptions/listen streams.
//
// A stream lists task IDs its caller owns. The hub learns of every change
// to a task that becomes durable from the store's change feed
// (mapping.Store.Subscribe: in process for SQLite, LISTEN/NOTIFY across
// the replicas sharing a PostgreSQL store), reads the row once for all the
// streams of this replica that list it, and hands it to them. A stream
// renders the row as tasks/get would and sends it when what a client sees
// changed (the status, its message, the input requests, the result),
// oldest change first, each once. A task's first message after the
// acknowledgement is its current state, so a client that reconnects, to
// this replica or another, misses nothing.
//
// Changes a replica reads after a newer one was written are coalesced into
// the newer one: a stream sees every state that lasts longer than the
// fan-out takes (milliseconds) and always the final one, since a terminal
// state never changes again.

// hubShards is how many goroutines read the rows of changed tasks; changes
// to one task always go to the same one, so they stay in order.
const hubShards = 4

// hub fans the store's changes out to the streams of this replica.
type hub struct {
	b *Bridge

	mu        sync.Mutex
	byKey     map[mapping.Key]map[*stream]struct{}
	rows      map[mapping.Key]*mapping.Task // the newest row read of each listened task
	principal map[string]int                // open streams per principal

	shards []chan mapping.Change
	seed   maphash.Seed
	// resync is set when a change could not be queued: every stream then
	// reads all its tasks again.
	resync      atomic.Bool
	wake        chan struct{}
	unsubscribe func()
	done        chan struct{}
	closeOnce   sync.Once
	wg          sync.WaitGroup
}

func newHub(b *Bridge) *hub {
	h := &hub{
		b:         b,
		byKey:     map[mapping.Key]map[*stream]struct{}{},
		rows:      map[mapping.Key]*mapping.Task{},
		principal: map[string]int{},
		seed:      maphash.MakeSeed(),
		wake:      make(chan struct{}, 1),
		done:      make(chan struct{}),
	}
	for range hubShards {
		ch := make(chan mapping.Change, 1024)
		h.shards = append(h.shards, ch)
		h.wg.Add(1)
		go h.run(ch)
	}
	h.wg.Add(2)
	go h.resyncLoop()
	go h.observeLoop()
	h.unsubscribe = b.store.Subscribe(h.changed)
	return h
}

// close stops the hub; the streams end on the bridge's context.
func (h *hub) close() {
	h.closeOnce.Do(func() {
		h.unsubscribe()
		close(h.done)
		h.wg.Wait()
	})
}

// changed is the store's callback: it must not block.
func (h *hub) changed(c mapping.Change) {
	if c.Resync {
		h.requestResync()
		return
	}
	h.mu.Lock()
	_, listened := h.byKey[c.Key]
	h.mu.Unlock()
	if !listened {
		return
	}
	ch := h.shards[maphash.Bytes(h.seed, c.Key[:])%hubShards]
	select {
	case ch <- c:
	default:
		// The readers are behind: rather than block the store, read every
		// listened task again.
		h.requestResync()
	}
}

func (h *hub) requestResync() {
	h.resync.Store(true)
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

func (h *hub) run(ch chan mapping.Change) {
	defer h.wg.Done()
	for {
		select {
		case <-h.done:
			return
		case c := <-ch:
			if !h.refresh(c.Key, c.Version) {
				h.requestResync() // read it again, after a pause
			}
		}
	}
}

func (h *hub) resyncLoop() {
	defer h.wg.Done()
	for {
		select {
		case <-h.done:
			return
		case <-h.wake:
		}
		if !h.resync.Swap(false) {
			continue
		}
		h.mu.Lock()
		keys := make([]mapping.Key, 0, len(h.byKey))
		for k := range h.byKey {
			keys = append(keys, k)
		}
		h.mu.Unlock()
		h.b.metrics.pushResyncs.Inc()
		ok := true
		for _, k := range keys {
			ok = h.refresh(k, 0) && ok
		}
		if !ok {
			// The store could not be read: try again in a second.
			select {
			case <-h.done:
				return
			case <-time.After(time.Second):
				h.requestResync()
			}
		}
	}
}

// refresh reads a listened task's row, unless every stream already has
// version or newer, and hands it to the streams that list it. It reports
// false when the store could not be read.
func (h *hub) refresh(key mapping.Key, version int64) bool {
	h.mu.Lock()
	var streams []*stream
	for s := range h.byKey[key] {
		streams = append(streams, s)
	}
	h.mu.Unlock()
	if len(streams) == 0 {
		return true
	}
	if version > 0 {
		behind := false
		for _, s := range streams {
			if s.version(key) < version {
				behind = true
				break
			}
		}
		if !behind {
			return true
		}
	}
	ok := true
	// A task is read as each principal whose streams list it: the owner's
	// read succeeds; another's (a stream whose ownership check is still
	// under way) finds nothing.
	read := map[string]*mapping.Task{}
	for _, s := range streams {
		t, done := read[s.principal]
		if !done {
			var err error
			t, err = h.b.store.Get(h.b.ctx, key, s.principal, h.b.opts.Now())
			if err != nil && !errors.Is(err, mapping.ErrNotFound) {
				h.b.log.Warn("reading a listened task", "task", shortKey(key), "error", err)
				ok = false
			}
			read[s.principal] = t
			if t != nil {
				h.keep(t)
			}
		}
		if t != nil {
			s.offer(t)
		}
	}
	return ok
}

// keep remembers the newest row of a listened task.
func (h *hub) keep(t *mapping.Task) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, listened := h.byKey[t.Key]; !listened {
		return
	}
	if old := h.rows[t.Key]; old == nil || old.Version <= t.Version {
		h.rows[t.Key] = t
	}
}

// observeLoop keeps listened tasks as fresh as a polling client would: a
// client that listens no longer sends tasks/get, so the hub brings each
// live task whose observation is older than its refresh interval up to
// date, as tasks/get would (shared with other callers, and across replicas
// through the observation claim). The change this writes is then pushed.
func (h *hub) observeLoop() {
	defer h.wg.Done()
	every := 5 * time.Second
	for _, tl := range h.b.currentTools() {
		every = min(every, tl.RefreshInterval)
	}
	every = max(every, 50*time.Millisecond)
	tick := time.NewTicker(every)
	defer tick.Stop()
	sem := make(chan struct{}, 8)
	for {
		select {
		case <-h.done:
			return
		case <-tick.C:
		}
		h.mu.Lock()
		rows := make([]*mapping.Task, 0, len(h.rows))
		for _, t := range h.rows {
			rows = append(rows, t)
		}
		h.mu.Unlock()
		for _, t := range rows {
			if !h.b.lc.NeedsRefresh(t) {
				continue
			}
			select {
			case sem <- struct{}{}:
			case <-h.done:
				return
			}
			go func() {
				defer func() { <-sem }()
				if cur := h.b.lc.Refresh(h.b.ctx, t, 0); cur != nil {
					h.keep(cur)
				}
			}()
		}
	}
}

// errTooManyStreams is returned by open when the principal holds as many
// streams as allowed.
var errTooManyStreams = errors.New("too many open streams")

// open registers a stream for the tasks of ids its principal owns and
// queues their current states. It returns the IDs it agreed to, in the
// order given; unknown, foreign and expired IDs are left out alike.
func (h *hub) open(ctx context.Context, s *stream, ids []string) ([]string, error) {
	h.mu.Lock()
	if h.principal[s.principal] >= h.b.limits.StreamsPerPrincipal {
		h.mu.Unlock()
		return nil, errTooManyStreams
	}
	h.principal[s.principal]++
	h.mu.Unlock()
	h.b.metrics.streams.Inc()

	// Register before reading, so that a change between the read and the
	// registration is not lost (versions drop the duplicate).
	keys := make([]mapping.Key, 0, len(ids))
	s.mu.Lock()
	for _, id := range ids {
		k := mapping.KeyOf(id)
		if _, dup := s.tasks[k]; dup {
			continue
		}
		s.tasks[k] = &watched{id: id}
		keys = append(keys, k)
	}
	s.mu.Unlock()
	h.mu.Lock()
	for _, k := range keys {
		if h.byKey[k] == nil {
			h.byKey[k] = map[*stream]struct{}{}
		}
		h.byKey[k][s] = struct{}{}
	}
	h.mu.Unlock()

	// Each task's first message is what tasks/get would answer now: a
	// stale observation is brought up to date first, within the observe
	// budget, several at a time.
	rows := make([]*mapping.Task, len(keys))
	var wg sync.WaitGroup
	var failed atomic.Pointer[error]
	sem := make(chan struct{}, 8)
	for i, k := range keys {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			t, err := h.b.store.Get(ctx, k, s.principal, h.b.opts.Now())
			if err != nil {
				if !errors.Is(err, mapping.ErrNotFound) {
					failed.Store(&err)
				}
				return
			}
			rows[i] = h.b.lc.Refresh(ctx, t, h.b.opts.ObserveBudget)
		})
	}
	wg.Wait()
	if errp := failed.Load(); errp != nil {
		// Leaving the task out would say it is unknown: say what happened.
		h.closeStream(s)
		h.b.log.Warn("reading the tasks of a listen", "error", *errp)
		return nil, internalError("the task store could not be read; listen again in a moment")
	}
	var agreed []string
	var refused []mapping.Key
	for i, k := range keys {
		t := rows[i]
		if t == nil {
			refused = append(refused, k)
			continue
		}
		s.mu.Lock()
		agreed = append(agreed, s.tasks[k].id)
		s.mu.Unlock()
		h.keep(t)
		s.offer(t)
	}
	h.forget(s, refused)
	return agreed, nil
}

// forget stops delivering the given tasks to s.
func (h *hub) forget(s *stream, keys []mapping.Key) {
	h.mu.Lock()
	for _, k := range keys {
		if m := h.byKey[k]; m != nil {
			delete(m, s)
			if len(m) == 0 {
				delete(h.byKey, k)
				delete(h.rows, k)
			}
		}
	}
	h.mu.Unlock()
	s.mu.Lock()
	for _, k := range keys {
		delete(s.tasks, k)
	}
	s.mu.Unlock()
}

// closeStream unregisters s.
func (h *hub) closeStream(s *stream) {
	s.mu.Lock()
	keys := make([]mapping.Key, 0, len(s.tasks))
	for k := range s.tasks {
		keys = append(keys, k)
	}
	s.mu.Unlock()
	h.forget(s, keys)
	h.mu.Lock()
	if h.principal[s.principal]--; h.principal[s.principal] <= 0 {
		delete(h.principal, s.principal)
	}
	h.mu.Unlock()
	h.b.metrics.streams.Dec()
}

// stream is one subscriptions/listen stream: the tasks it lists and the
// rows waiting to be sent.
type stream struct {
	principal string

	mu      sync.Mutex
	tasks   map[mapping.Key]*watched
	queue   []mapping.Key // keys with a row waiting, oldest first
	pending map[mapping.Key]*mapping.Task
	ready   chan struct{}
}

// watched is one task of a stream.
type watched struct {
	id      string
	version int64  // the newest row version handed to the stream
	sent    []byte // what the client last saw, without lastUpdatedAt
}

func newStream(principal string) *stream {
	return &stream{
		principal: principal,
		tasks:     map[mapping.Key]*watched{},
		pending:   map[mapping.Key]*mapping.Task{},
		ready:     make(chan struct{}, 1),
	}
}

func (s *stream) version(k mapping.Key) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if w := s.tasks[k]; w != nil {
		return w.version
	}
	return 0
}

// offer queues a row for sending if it is newer than the last one.
func (s *stream) offer(t *mapping.Task) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := s.tasks[t.Key]
	if w == nil || (w.version != 0 && t.Version <= w.version) {
		return
	}
	w.version = t.Version
	if _, queued := s.pending[t.Key]; !queued {
		s.queue = append(s.queue, t.Key)
	}
	s.pending[t.Key] = t
	select {
	case s.ready <- struct{}{}:
	default:
	}
}

// take returns the DetailedTasks to send now, oldest change first, each
// different from what its client last saw.
func (s *stream) take(b *Bridge) []*detailedTaskResult {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*detailedTaskResult
	for _, k := range s.queue {
		t := s.pending[k]
		delete(s.pending, k)
		w := s.tasks[k]
		if w == nil || t == nil {
			continue
		}
		d := b.detailed(w.id, t)
		seen := fingerprint(d)
		if w.sent != nil && bytes.Equal(seen, w.sent) {
			continue
		}
		w.sent = seen
		out = append(out, d)
	}
	s.queue = s.queue[:0]
	return out
}

// fingerprint is what a client sees of a task, less the time of its last
// update (an observation that changed nothing visible still moves it).
func fingerprint(d *detailedTaskResult) []byte {
	c := *d
	c.LastUpdatedAt = ""
	c.PollIntervalMs = nil
	b, _ := json.Marshal(&c)
	return b
}

// notification is the params of one notifications/tasks: a DetailedTask,
// without resultType, with the subscription in _meta.
func notification(subscription json.RawMessage, d *detailedTaskResult) json.RawMessage {
	body := struct {
		Meta map[string]json.RawMessage `json:"_meta"`
		taskFields
		InputRequests map[string]json.RawMessage `json:"inputRequests,omitempty"`
		Result        json.RawMessage            `json:"result,omitempty"`
		Error         *wireError                 `json:"error,omitempty"`
	}{
		Meta:          map[string]json.RawMessage{subscriptionMeta: subscription},
		taskFields:    d.taskFields,
		InputRequests: d.InputRequests,
		Result:        d.Result,
		Error:         d.Error,
	}
	raw, _ := json.Marshal(body)
	return raw
}

// subscriptionMeta is the _meta key naming the listen request a message
// belongs to.
const subscriptionMeta = "io.modelcontextprotocol/subscriptionId"

// streamLimits are the stream limits, with defaults for the ones a catalog
// built in code left at zero.
func (b *Bridge) streamLimits() {
	if b.limits.StreamsPerPrincipal <= 0 {
		b.limits.StreamsPerPrincipal = 16
	}
	if b.limits.TasksPerStream <= 0 {
		b.limits.TasksPerStream = 1000
	}
	if b.limits.StreamKeepAlive <= 0 {
		b.limits.StreamKeepAlive = 15 * time.Second
	}
	if b.limits.MaxStreamLife <= 0 {
		b.limits.MaxStreamLife = time.Hour
	}
}
