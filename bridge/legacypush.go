package bridge

// Push and relayed questions for sessions of revision 2025-11-25.
//
// A 2025-11-25 client learns of its tasks by polling tasks/get, and of
// their questions by calling tasks/result, on whose stream the server asks
// them. Two things help clients that do less:
//
//   - Push: each session that created a task, or asked tasks/get about one,
//     is sent the revision's notifications/tasks/status when the task
//     changes (its status or message), from the store's change feed that
//     drives notifications/tasks (the hub), so also when another replica
//     made the change. It goes where the revision puts unrelated messages:
//     the session's standalone GET stream over HTTP, stdout over stdio.
//   - Relayed questions: when such a task needs input and no tasks/result
//     of it is waiting in this process, the question is asked on the same
//     channel (elicitation/create with the related-task _meta), once; the
//     answer is applied as tasks/update would. A tasks/result that arrives
//     while the question is out, or after it was answered, does not ask it
//     again: a question is asked once, by whichever gets to it first.
//
// The SDK sends only the notifications it knows, so a notification of our
// own travels inside a carrier, a notifications/progress with the token
// carrierToken whose message is the real notification; the session's
// transports (carrierWriter over HTTP, the stdio connection) put the real
// one on the wire in its place. Sessions live in one process (HTTP sessions
// are routed by Mcp-Session-Id), so the bookkeeping here is in memory.

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/jobbridge/jobbridge/lifecycle"
	"github.com/jobbridge/jobbridge/mapping"
)

// legacySessions tracks the 2025-11-25 sessions that follow tasks, the
// questions asked on behalf of tasks, and the tasks/result requests
// waiting.
type legacySessions struct {
	b *Bridge

	mu       sync.Mutex
	sessions map[*mcp.ServerSession]*legacySession
	// asked holds, per task, the input keys whose question is out or was
	// answered through a relay or a tasks/result of this process.
	asked map[mapping.Key]map[string]bool
	// results counts the tasks/result requests waiting, per task.
	results map[mapping.Key]int
}

func newLegacySessions(b *Bridge) *legacySessions {
	return &legacySessions{
		b:        b,
		sessions: map[*mcp.ServerSession]*legacySession{},
		asked:    map[mapping.Key]map[string]bool{},
		results:  map[mapping.Key]int{},
	}
}

// legacySession is one session that follows tasks: a stream of the hub
// (so that it hears of their changes) and what it last told the client.
type legacySession struct {
	ls     *legacySessions
	ss     *mcp.ServerSession
	s      *stream
	ctx    context.Context // ends with the session or the bridge
	cancel context.CancelFunc

	mu   sync.Mutex
	seen map[mapping.Key][]byte // the status last sent, per task
}

// watch makes the session of a 2025-11-25 request follow the task id: it
// is told of the task's changes and asked its questions (see the file
// comment). A request without a session of its own (stateless HTTP) has
// nobody to tell.
func (b *Bridge) watchLegacy(ctx context.Context, req mcp.Request, id string, task *mapping.Task) {
	if revisionFrom(ctx) != revisionLegacy || task == nil {
		return
	}
	if extra := req.GetExtra(); extra != nil && extra.Header != nil && extra.Header.Get("Mcp-Session-Id") == "" {
		return
	}
	ss, ok := req.GetSession().(*mcp.ServerSession)
	if !ok || ss == nil {
		return
	}
	b.sessions.watch(ss, id, task)
}

func (l *legacySessions) watch(ss *mcp.ServerSession, id string, task *mapping.Task) {
	b := l.b
	l.mu.Lock()
	s := l.sessions[ss]
	if s == nil {
		ctx, cancel := context.WithCancel(b.ctx)
		s = &legacySession{ls: l, ss: ss, s: newStream(task.Principal), ctx: ctx, cancel: cancel, seen: map[mapping.Key][]byte{}}
		if !b.goBackground(s.run) {
			l.mu.Unlock()
			cancel()
			return
		}
		l.sessions[ss] = s
		go func() {
			// The session ends when its client goes (or it idles out).
			ss.Wait()
			cancel()
		}()
	}
	l.mu.Unlock()
	if s.s.principal != task.Principal {
		return // a session acts for one principal
	}

	s.s.mu.Lock()
	_, known := s.s.tasks[task.Key]
	full := len(s.s.tasks) >= b.limits.TasksPerStream
	if !known && !full {
		s.s.tasks[task.Key] = &watched{id: id}
	}
	s.s.mu.Unlock()
	if known || full {
		return
	}
	s.mu.Lock()
	s.seen[task.Key] = statusPrint(legacyFields(b.fields(id, task)))
	s.mu.Unlock()
	b.hub.mu.Lock()
	if b.hub.byKey[task.Key] == nil {
		b.hub.byKey[task.Key] = map[*stream]struct{}{}
	}
	b.hub.byKey[task.Key][s.s] = struct{}{}
	b.hub.mu.Unlock()
	if s.ctx.Err() != nil {
		// The session ended meanwhile: nobody will take the changes.
		b.hub.forget(s.s, []mapping.Key{task.Key})
		return
	}
	// The hub now reads the task on each change, and keeps it observed as a
	// polling client would; the current row is handled at once (a task may
	// ask its question from the start).
	b.hub.keep(task)
	s.s.offer(task)
}

// run delivers the session's task changes until the session or the bridge
// ends.
func (s *legacySession) run() {
	defer s.close()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-s.s.ready:
			for _, r := range s.take() {
				s.handle(r.id, r.task)
			}
		}
	}
}

// close stops following the session's tasks.
func (s *legacySession) close() {
	s.cancel()
	l := s.ls
	l.mu.Lock()
	delete(l.sessions, s.ss)
	l.mu.Unlock()
	s.s.mu.Lock()
	keys := make([]mapping.Key, 0, len(s.s.tasks))
	for k := range s.s.tasks {
		keys = append(keys, k)
	}
	s.s.mu.Unlock()
	l.b.hub.forget(s.s, keys)
}

type watchedRow struct {
	id   string
	task *mapping.Task
}

// take returns the rows waiting, oldest change first.
func (s *legacySession) take() []watchedRow {
	st := s.s
	st.mu.Lock()
	defer st.mu.Unlock()
	var out []watchedRow
	for _, k := range st.queue {
		t := st.pending[k]
		delete(st.pending, k)
		if w := st.tasks[k]; w != nil && t != nil {
			out = append(out, watchedRow{w.id, t})
		}
	}
	st.queue = st.queue[:0]
	return out
}

// handle tells the client of a change it has not seen, relays the task's
// open questions, and stops following a task that ended.
func (s *legacySession) handle(id string, t *mapping.Task) {
	b := s.ls.b
	lt := legacyFields(b.fields(id, t))
	seen := statusPrint(lt)
	s.mu.Lock()
	news := !bytes.Equal(s.seen[t.Key], seen)
	s.seen[t.Key] = seen
	s.mu.Unlock()
	if news {
		if err := notifyCarried(s.ctx, s.ss, "notifications/tasks/status", lt); err != nil {
			b.log.Debug("notifications/tasks/status not sent", "task", shortKey(t.Key), "error", err)
		} else {
			b.metrics.pushed.WithLabelValues(lt.Status).Inc()
		}
	}
	switch {
	case t.Status == mapping.StatusInputRequired:
		s.relay(id, t)
	case t.Status.Terminal():
		b.hub.forget(s.s, []mapping.Key{t.Key})
		s.mu.Lock()
		delete(s.seen, t.Key)
		s.mu.Unlock()
		s.ls.forgetQuestions(t.Key)
	}
}

// statusPrint is what a client sees of a Task, less the time of its last
// update.
func statusPrint(t legacyTask) []byte {
	t.LastUpdatedAt = ""
	t.PollInterval = nil
	raw, _ := json.Marshal(t)
	return raw
}

// relay asks the client, on the session's own channel, each open question
// of the task that nobody has asked yet, unless a tasks/result of the task
// is waiting (it asks them on its stream).
func (s *legacySession) relay(id string, t *mapping.Task) {
	b := s.ls.b
	if p := s.ss.InitializeParams(); p == nil || p.Capabilities == nil || p.Capabilities.Elicitation == nil {
		return // the client cannot be asked; tasks/result says so
	}
	for key, in := range lifecycle.DecodeInputs(t.InputRequests) {
		if s.ls.resultWaiting(t.Key) || !s.ls.claimQuestion(t.Key, key) {
			continue
		}
		b.goBackground(func() {
			res, err := s.ss.Elicit(s.ctx, &mcp.ElicitParams{
				Meta:            mcp.Meta{relatedTaskMeta: map[string]any{"taskId": id}},
				Mode:            "form",
				Message:         in.Message,
				RequestedSchema: json.RawMessage(in.Schema),
			})
			if err != nil {
				// Not delivered or not answered: a tasks/result may ask.
				s.ls.releaseQuestion(t.Key, key)
				b.log.Debug("relaying a question to a 2025-11-25 session failed", "task", shortKey(t.Key), "error", err)
				return
			}
			answer, err := json.Marshal(elicitAnswer{Action: res.Action, Content: res.Content})
			if err != nil {
				return
			}
			ctx := withRevision(withPrincipal(s.ctx, t.Principal), revisionLegacy)
			up := &taskParams{TaskID: id, InputResponses: map[string]json.RawMessage{key: answer}}
			if _, err := b.tasksUpdate(ctx, nil, up); err != nil {
				b.log.Warn("applying a relayed answer", "task", shortKey(t.Key), "error", err)
			}
			if key == confirmKey && res.Action == "accept" {
				// An answer that did not confirm leaves the question open,
				// with the reason (a confirmation was applied, and the task
				// moved on): it may be asked again.
				s.ls.releaseQuestion(t.Key, key)
			}
		})
	}
}

// claimQuestion reports whether the question key of task is still to be
// asked, and if so records that it is being asked.
func (l *legacySessions) claimQuestion(task mapping.Key, key string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.asked[task][key] {
		return false
	}
	if l.asked[task] == nil {
		l.asked[task] = map[string]bool{}
	}
	l.asked[task][key] = true
	return true
}

// releaseQuestion undoes claimQuestion for a question that was not
// answered.
func (l *legacySessions) releaseQuestion(task mapping.Key, key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.asked[task], key)
	if len(l.asked[task]) == 0 {
		delete(l.asked, task)
	}
}

func (l *legacySessions) forgetQuestions(task mapping.Key) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.asked, task)
}

// waitResult records a tasks/result of task waiting, until the returned
// function is called.
func (l *legacySessions) waitResult(task mapping.Key) (done func()) {
	l.mu.Lock()
	l.results[task]++
	l.mu.Unlock()
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.results[task]--; l.results[task] <= 0 {
			delete(l.results, task)
		}
	}
}

func (l *legacySessions) resultWaiting(task mapping.Key) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.results[task] > 0
}

// Carried notifications.

// carrierToken marks a notifications/progress that carries a notification
// the SDK cannot send itself.
const carrierToken = "io.jobbridge/carried-notification"

// carried is the message of a carrier: the notification it stands for.
type carried struct {
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

// notifyCarried sends the notification method with params to the session,
// through a carrier the transports unwrap. ctx must not be a request's: the
// message then goes where unrelated messages go.
func notifyCarried(ctx context.Context, ss *mcp.ServerSession, method string, params any) error {
	p, err := json.Marshal(params)
	if err != nil {
		return err
	}
	msg, err := json.Marshal(carried{Method: method, Params: p})
	if err != nil {
		return err
	}
	return ss.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: carrierToken, Message: string(msg)})
}

// uncarry returns the notification a carrier stands for, and whether msg
// is one.
func uncarry(method string, params json.RawMessage) (string, json.RawMessage, bool) {
	if method != "notifications/progress" || !bytes.Contains(params, []byte(carrierToken)) {
		return "", nil, false
	}
	var p struct {
		Token   any    `json:"progressToken"`
		Message string `json:"message"`
	}
	if json.Unmarshal(params, &p) != nil || p.Token != carrierToken {
		return "", nil, false
	}
	var c carried
	if json.Unmarshal([]byte(p.Message), &c) != nil || c.Method == "" {
		return "", nil, false
	}
	return c.Method, c.Params, true
}

// uncarryMessage replaces a carrier by the notification it stands for; the
// stdio connection writes every message through it.
func uncarryMessage(msg jsonrpc.Message) jsonrpc.Message {
	r, ok := msg.(*jsonrpc.Request)
	if !ok || r.IsCall() {
		return msg
	}
	if method, params, ok := uncarry(r.Method, r.Params); ok {
		return &jsonrpc.Request{Method: method, Params: params}
	}
	return msg
}

// carrierWriter writes the SSE events of a session's HTTP responses,
// replacing each carrier by the notification it stands for. The SDK writes
// one whole event per Write.
type carrierWriter struct {
	http.ResponseWriter
}

func (w carrierWriter) Write(p []byte) (int, error) {
	if !bytes.Contains(p, []byte(carrierToken)) {
		return w.ResponseWriter.Write(p)
	}
	lines := bytes.Split(p, []byte("\n"))
	for i, line := range lines {
		data, ok := bytes.CutPrefix(line, []byte("data: "))
		if !ok {
			continue
		}
		var m struct {
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		}
		if json.Unmarshal(data, &m) != nil {
			continue
		}
		method, params, ok := uncarry(m.Method, m.Params)
		if !ok {
			continue
		}
		out, err := json.Marshal(struct {
			JSONRPC string          `json:"jsonrpc"`
			Method  string          `json:"method"`
			Params  json.RawMessage `json:"params"`
		}{"2.0", method, params})
		if err != nil {
			continue
		}
		lines[i] = append([]byte("data: "), out...)
	}
	if _, err := w.ResponseWriter.Write(bytes.Join(lines, []byte("\n"))); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Flush implements http.Flusher.
func (w carrierWriter) Flush() { http.NewResponseController(w.ResponseWriter).Flush() }

// Unwrap lets http.ResponseController reach the underlying writer.
func (w carrierWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// watchLegacyID is watchLegacy for a task known by its ID (a tasks/get).
func (b *Bridge) watchLegacyID(ctx context.Context, req mcp.Request, id string) {
	if revisionFrom(ctx) != revisionLegacy {
		return
	}
	ss, ok := req.GetSession().(*mcp.ServerSession)
	if !ok || ss == nil {
		return
	}
	key := mapping.KeyOf(id)
	b.sessions.mu.Lock()
	s := b.sessions.sessions[ss]
	b.sessions.mu.Unlock()
	if s != nil {
		s.s.mu.Lock()
		_, known := s.s.tasks[key]
		s.s.mu.Unlock()
		if known {
			return
		}
	}
	task, err := b.store.Get(ctx, key, principalFrom(ctx), b.opts.Now())
	if err != nil || task.Status.Terminal() {
		return
	}
	b.watchLegacy(ctx, req, id, task)
}
