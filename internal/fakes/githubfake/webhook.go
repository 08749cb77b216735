package githubfake

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/jobbridge/jobbridge/internal/fakes/exchanges"
)

// WebhookOperation is the Operation of a recorded webhook delivery
// ([exchanges.Exchange]): the fake sent the request, and the spec checks
// validate its body against the webhook payload schema of GitHub's
// description for its event and action.
const WebhookOperation = "webhook"

// Identities the deliveries carry.
const (
	webhookHookID   = 4_000_000_001
	webhookRepoID   = 1296269 // repoDocument's
	webhookOrgID    = 1
	webhookSenderID = 583231
	hookshotVersion = "GitHub-Hookshot/8e03811"
	deliveryTimeout = 10 * time.Second // GitHub gives up after 10 s
	maxAnswerBytes  = 64 << 10
)

// Delivery is one webhook delivery the server sent, with the receiver's
// answer.
type Delivery struct {
	// ID is the X-GitHub-Delivery GUID; a redelivery keeps it.
	ID string
	// Event is X-GitHub-Event: workflow_run, workflow_job or ping.
	Event string
	// Action is the payload's action ("" for a ping).
	Action string
	// RunID and Attempt say which run attempt it is about (0 for a ping).
	RunID   int64
	Attempt int
	// Header and Body are the request as sent.
	Header http.Header
	Body   []byte
	// Status is the receiver's answer; 0 when it gave none, and Err says
	// why.
	Status int
	Err    error
}

// webhook is where deliveries go, and what has been announced.
type webhook struct {
	url    string
	secret []byte
	client *http.Client
	// announced is, per run, what the deliveries have told so far.
	announced map[int64]*announced
	sent      []Delivery
}

// announced is what the deliveries have told of one run attempt.
type announced struct {
	attempt   int
	requested bool
	started   bool // workflow_run in_progress sent
	completed bool
	jobs      []int // rank of each job's last workflow_job action
	checked   time.Time
}

// Ranks of the workflow_job actions, in the order a job goes through them.
const (
	rankNone = iota
	rankQueued
	rankWaiting
	rankInProgress
	rankCompleted
)

// Webhook makes the server send the webhook deliveries GitHub sends for
// workflow_run and workflow_job events to url, signed with secret, as a
// repository webhook with content type application/json (or, with
// [Options.AppPublicKey], the App's webhook: the payloads then carry the
// installation). Each [Server.DeliverEvents] sends what changed since the
// last one. An empty url stops the deliveries.
//
// Each delivery is a POST with GitHub's headers: X-GitHub-Event,
// X-GitHub-Delivery (a GUID), X-GitHub-Hook-ID,
// X-GitHub-Hook-Installation-Target-Type and -ID, X-Hub-Signature-256
// ("sha256=" and the hex HMAC-SHA256 of the body under secret) and the
// legacy X-Hub-Signature (SHA-1), User-Agent GitHub-Hookshot/…, and
// Content-Type application/json. The body has action, workflow_run (and
// workflow) or workflow_job (and, while it waits for an approval,
// deployment), repository, organization and sender. As on GitHub a failed
// delivery is not retried; [Server.Redeliver] sends one again.
func (s *Server) Webhook(url, secret string) {
	s.hookMu.Lock()
	defer s.hookMu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if url == "" {
		s.hook = nil
		return
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = nil
	s.hook = &webhook{
		url: url, secret: []byte(secret),
		client:    &http.Client{Transport: t, Timeout: deliveryTimeout},
		announced: map[int64]*announced{},
	}
	// Runs that exist already have told nothing yet: their deliveries
	// start from where they are now, as a hook created mid-run does.
	now := s.now()
	for id, rn := range s.runs {
		st := rn.stateAt(now)
		an := &announced{attempt: rn.attempt, requested: true, checked: now, jobs: make([]int, len(st.jobs))}
		an.started = anyJobStarted(rn, st)
		an.completed = st.status == statusCompleted
		for i, j := range st.jobs {
			an.jobs[i] = jobRank(j.status)
		}
		s.hook.announced[id] = an
	}
}

// DeliverEvents sends, in order, the deliveries of every run and job state
// change since the last call (all of them since [Server.Webhook] for the
// first), and returns them with the receiver's answers. Changes that the
// server's clock passed over together are told one by one, in the order
// GitHub sends them: workflow_run requested, workflow_job queued,
// workflow_run in_progress, workflow_job waiting, in_progress and
// completed, workflow_run completed. A re-run attempt
// ([Server.Rerun]) sends no requested, as on GitHub.
func (s *Server) DeliverEvents(ctx context.Context) []Delivery {
	s.hookMu.Lock()
	defer s.hookMu.Unlock()
	s.mu.Lock()
	h := s.hook
	var out []Delivery
	if h != nil {
		out = s.changes(h)
	}
	s.mu.Unlock()
	for i := range out {
		s.send(ctx, h, &out[i])
	}
	s.mu.Lock()
	if h != nil {
		h.sent = append(h.sent, out...)
	}
	s.mu.Unlock()
	return out
}

// DeliverEventsEvery calls [Server.DeliverEvents] every interval until ctx
// ends, for a server on the real clock (such as `jobbridge demo`'s).
func (s *Server) DeliverEventsEvery(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.DeliverEvents(ctx)
		}
	}
}

// Ping sends the ping delivery GitHub sends when a webhook is created.
func (s *Server) Ping(ctx context.Context) (Delivery, error) {
	s.hookMu.Lock()
	defer s.hookMu.Unlock()
	s.mu.Lock()
	h := s.hook
	if h == nil {
		s.mu.Unlock()
		return Delivery{}, errors.New("no webhook configured")
	}
	base := s.webhookBase()
	now := s.now().UTC().Format(time.RFC3339)
	hookURL := fmt.Sprintf("%srepos/o/r/hooks/%d", base, webhookHookID)
	payload := map[string]any{
		"zen":     "Design for failure.",
		"hook_id": webhookHookID,
		"hook": map[string]any{
			"type": "Repository", "id": webhookHookID, "name": "web", "active": true,
			"events":     []string{"workflow_job", "workflow_run"},
			"config":     map[string]any{"content_type": "json", "insecure_ssl": "0", "secret": "********", "url": h.url},
			"created_at": now, "updated_at": now, "url": hookURL,
			"test_url": hookURL + "/test", "ping_url": hookURL + "/pings", "deliveries_url": hookURL + "/deliveries",
			"last_response": map[string]any{"code": nil, "status": "unused", "message": nil},
		},
		"sender": userDocument(base, "octocat", webhookSenderID, "User"),
	}
	if s.appKey != nil {
		payload["hook"].(map[string]any)["app_id"] = s.appID
	}
	d := s.delivery(h, "ping", "", 0, 0, payload)
	s.mu.Unlock()
	s.send(ctx, h, &d)
	s.mu.Lock()
	h.sent = append(h.sent, d)
	s.mu.Unlock()
	return d, nil
}

// Deliveries returns every delivery sent so far, redeliveries included, in
// order.
func (s *Server) Deliveries() []Delivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hook == nil {
		return nil
	}
	return slices.Clone(s.hook.sent)
}

// Redeliver sends the delivery with X-GitHub-Delivery id again, as GitHub's
// "Redeliver" does: the same headers (the same GUID) and body.
func (s *Server) Redeliver(ctx context.Context, id string) (Delivery, error) {
	s.hookMu.Lock()
	defer s.hookMu.Unlock()
	s.mu.Lock()
	h := s.hook
	var d Delivery
	found := false
	if h != nil {
		for _, old := range h.sent {
			if old.ID == id {
				d, found = old, true
				break
			}
		}
	}
	s.mu.Unlock()
	if !found {
		return Delivery{}, fmt.Errorf("no delivery %s was sent", id)
	}
	d.Header, d.Body, d.Status, d.Err = d.Header.Clone(), slices.Clone(d.Body), 0, nil
	s.send(ctx, h, &d)
	s.mu.Lock()
	h.sent = append(h.sent, d)
	s.mu.Unlock()
	return d, nil
}

// changes computes the deliveries of what changed since the last call. It
// runs with s.mu held.
func (s *Server) changes(h *webhook) []Delivery {
	now := s.now()
	var out []Delivery
	ids := slices.Sorted(maps.Keys(s.runs))
	for id := range h.announced {
		if _, ok := s.runs[id]; !ok {
			delete(h.announced, id) // purged
		}
	}
	for _, id := range ids {
		rn := s.runs[id]
		an := h.announced[id]
		if an == nil || an.attempt != rn.attempt {
			an = &announced{attempt: rn.attempt, requested: rn.attempt > 1, jobs: make([]int, len(rn.jobs()))}
			h.announced[id] = an
		}
		for _, t := range instants(rn, now, an.checked) {
			out = append(out, s.tell(h, rn, an, t)...)
		}
		an.checked = now
	}
	return out
}

// instants are the moments in [from, now] at which the run's state may
// change, in order, ending with now.
func instants(rn *run, now, from time.Time) []time.Time {
	cands := []time.Time{
		rn.createdAt,
		rn.createdAt.Add(rn.script.Pending),
		rn.createdAt.Add(rn.script.Pending + rn.script.Queued),
	}
	if w := rn.waitingFrom(); !w.IsZero() {
		cands = append(cands, w)
	}
	if rn.review != nil {
		cands = append(cands, rn.review.At)
	}
	if rn.end != nil {
		cands = append(cands, rn.end.at)
	}
	for _, j := range rn.stateAt(now).jobs {
		cands = append(cands, j.startedAt, j.completedAt)
	}
	var out []time.Time
	for _, t := range cands {
		if !t.IsZero() && !t.After(now) && !t.Before(from) {
			out = append(out, t)
		}
	}
	out = append(out, now)
	slices.SortFunc(out, func(a, b time.Time) int { return a.Compare(b) })
	return slices.CompactFunc(out, func(a, b time.Time) bool { return a.Equal(b) })
}

func jobRank(status string) int {
	switch status {
	case statusQueued:
		return rankQueued
	case statusWaiting:
		return rankWaiting
	case statusInProgress:
		return rankInProgress
	case statusCompleted:
		return rankCompleted
	}
	return rankNone
}

// tell returns the deliveries that bring what an announced up to the run's
// state at t, and records them as announced.
func (s *Server) tell(h *webhook, rn *run, an *announced, t time.Time) []Delivery {
	st := rn.stateAt(t)
	base := s.webhookBase()
	var out []Delivery
	runEvent := func(action string, doc runDocument) {
		out = append(out, s.delivery(h, "workflow_run", action, rn.id, rn.attempt, s.runPayload(base, rn, action, doc)))
	}
	jobEvent := func(action string, i int, doc jobDocument) {
		out = append(out, s.delivery(h, "workflow_job", action, rn.id, rn.attempt, s.jobPayload(base, rn, action, i, doc, t)))
	}

	if !an.requested {
		an.requested = true
		doc := runDocAt(base, rn, st)
		doc.Status, doc.Conclusion, doc.UpdatedAt = statusQueued, nil, stamp(rn.createdAt)
		if rn.script.Pending > 0 {
			doc.Status = statusPending
		}
		runEvent("requested", doc)
	}
	if st.status == statusPending {
		return out
	}
	for i := range st.jobs {
		if an.jobs[i] < rankQueued {
			an.jobs[i] = rankQueued
			jobEvent("queued", i, jobDoc(base, rn, i, jobState{status: statusQueued}))
		}
	}
	if !an.started && anyJobStarted(rn, st) {
		an.started = true
		doc := runDocAt(base, rn, st)
		if doc.Status != statusInProgress {
			doc.Status, doc.Conclusion, doc.UpdatedAt = statusInProgress, nil, stamp(t)
		}
		runEvent("in_progress", doc)
	}
	for i, js := range st.jobs {
		if js.status == statusWaiting && an.jobs[i] < rankWaiting {
			an.jobs[i] = rankWaiting
			jobEvent("waiting", i, jobDoc(base, rn, i, js))
		}
		if jobRank(js.status) >= rankInProgress && !js.startedAt.IsZero() && an.jobs[i] < rankInProgress && !rejectedAt(rn, i, js) {
			an.jobs[i] = rankInProgress
			doc := jobDoc(base, rn, i, jobState{status: statusInProgress, startedAt: js.startedAt})
			jobEvent("in_progress", i, doc)
		}
		if js.status == statusCompleted && an.jobs[i] < rankCompleted {
			an.jobs[i] = rankCompleted
			jobEvent("completed", i, jobDoc(base, rn, i, js))
		}
	}
	if st.status == statusCompleted && !an.completed {
		an.completed = true
		runEvent("completed", runDocAt(base, rn, st))
	}
	return out
}

// anyJobStarted reports whether a job of the run has started.
func anyJobStarted(rn *run, st state) bool {
	for i, j := range st.jobs {
		if !j.startedAt.IsZero() && jobRank(j.status) >= rankInProgress && !rejectedAt(rn, i, j) {
			return true
		}
	}
	return false
}

// rejectedAt reports whether job i is the one a rejected review ended
// before it ran: it never was in progress.
func rejectedAt(rn *run, i int, js jobState) bool {
	a := rn.script.Approval
	return a != nil && a.Job == i && rn.review != nil && rn.review.State == "rejected" && js.startedAt.Equal(rn.review.At)
}

// webhookBase is the base URL of the documents in deliveries: the
// server's own. It runs with s.mu held.
func (s *Server) webhookBase() string {
	if s.base != "" {
		return s.base
	}
	return "http://127.0.0.1/"
}

// envelope is what every payload carries besides its subject.
func (s *Server) envelope(base string, rn *run, action string) map[string]any {
	repo := webhookRepoDocument(base, rn.owner, rn.repo, rn.firstAt)
	p := map[string]any{
		"action":       action,
		"repository":   repo,
		"organization": orgDocument(base, rn.owner),
		"sender":       userDocument(base, "octocat", webhookSenderID, "User"),
	}
	if s.appKey != nil {
		p["installation"] = map[string]any{"id": s.installationID, "node_id": fmt.Sprintf("MDIzOkludGVncmF0aW9uSW5zdGFsbGF0aW9u%d", s.installationID)}
	}
	return p
}

func (s *Server) runPayload(base string, rn *run, action string, doc runDocument) map[string]any {
	p := s.envelope(base, rn, action)
	p["workflow_run"] = doc
	created := stamp(rn.firstAt.Add(-30 * 24 * time.Hour))
	p["workflow"] = map[string]any{
		"id": rn.workflow.ID, "node_id": fmt.Sprintf("W_fake%d", rn.workflow.ID), "name": rn.workflow.Name,
		"path": ".github/workflows/" + rn.workflow.File, "state": "active",
		"created_at": created, "updated_at": created,
		"url":       fmt.Sprintf("%srepos/%s/%s/actions/workflows/%d", base, rn.owner, rn.repo, rn.workflow.ID),
		"html_url":  fmt.Sprintf("%s%s/%s/blob/main/.github/workflows/%s", base, rn.owner, rn.repo, rn.workflow.File),
		"badge_url": fmt.Sprintf("%s%s/%s/workflows/%s/badge.svg", base, rn.owner, rn.repo, url.PathEscape(rn.workflow.Name)),
	}
	return p
}

func (s *Server) jobPayload(base string, rn *run, action string, i int, doc jobDocument, t time.Time) map[string]any {
	p := s.envelope(base, rn, action)
	p["workflow_job"] = doc
	if a := rn.script.Approval; a != nil && a.Job == i && action == "waiting" {
		depID := rn.id + 1
		depURL := fmt.Sprintf("%srepos/%s/%s/deployments/%d", base, rn.owner, rn.repo, depID)
		at := t.UTC().Format(time.RFC3339)
		p["deployment"] = map[string]any{
			"id": depID, "node_id": fmt.Sprintf("DE_fake%d", depID), "sha": fmt.Sprintf("%040x", rn.id),
			"ref": doc.HeadBranch, "task": "deploy", "environment": a.Environment, "original_environment": a.Environment,
			"payload": map[string]any{}, "description": nil,
			"creator":      userDocument(base, "octocat", webhookSenderID, "User"),
			"statuses_url": depURL + "/statuses", "repository_url": fmt.Sprintf("%srepos/%s/%s", base, rn.owner, rn.repo),
			"url": depURL, "created_at": at, "updated_at": at,
		}
	}
	return p
}

// webhookRepoDocument is the repository of a webhook payload: a full
// repository, with every member the description's repository-webhooks
// marks required.
func webhookRepoDocument(base, owner, repo string, created time.Time) map[string]any {
	doc := repoDocument(base, owner, repo)
	host := "127.0.0.1"
	if u, err := url.Parse(base); err == nil && u.Host != "" {
		host = u.Host
	}
	html := doc["html_url"].(string)
	at := created.Add(-365 * 24 * time.Hour).UTC().Format(time.RFC3339)
	for k, v := range map[string]any{
		"clone_url": html + ".git", "git_url": "git://" + host + "/" + owner + "/" + repo + ".git",
		"ssh_url": "git@" + host + ":" + owner + "/" + repo + ".git", "svn_url": html,
		"default_branch": "main", "homepage": nil, "language": "Go", "mirror_url": nil, "license": nil,
		"forks": 0, "forks_count": 0, "open_issues": 0, "open_issues_count": 0, "size": 1024,
		"stargazers_count": 0, "watchers": 0, "watchers_count": 0,
		"has_downloads": true, "has_issues": true, "has_projects": false, "has_wiki": false, "has_pages": false,
		"archived": false, "disabled": false, "visibility": "public",
		"created_at": at, "updated_at": at, "pushed_at": created.UTC().Format(time.RFC3339),
	} {
		doc[k] = v
	}
	return doc
}

// orgDocument is the payload's organization.
func orgDocument(base, login string) map[string]any {
	u := base + "orgs/" + login
	return map[string]any{
		"login": login, "id": webhookOrgID, "node_id": fmt.Sprintf("O_fake%d", webhookOrgID), "url": u,
		"repos_url": u + "/repos", "events_url": u + "/events", "hooks_url": u + "/hooks",
		"issues_url": u + "/issues", "members_url": u + "/members{/member}",
		"public_members_url": u + "/public_members{/member}",
		"avatar_url":         fmt.Sprintf("https://avatars.githubusercontent.com/u/%d?v=4", webhookOrgID),
		"description":        nil,
	}
}

// delivery signs the payload and dresses it in GitHub's headers.
func (s *Server) delivery(h *webhook, event, action string, runID int64, attempt int, payload any) Delivery {
	body, _ := json.Marshal(payload) // wire documents always marshal
	var guid [16]byte
	_, _ = rand.Read(guid[:]) // never fails
	guid[6] = guid[6]&0x0f | 0x40
	guid[8] = guid[8]&0x3f | 0x80
	id := fmt.Sprintf("%x-%x-%x-%x-%x", guid[0:4], guid[4:6], guid[6:8], guid[8:10], guid[10:16])
	hdr := http.Header{}
	hdr.Set("Content-Type", "application/json")
	hdr.Set("Accept", "*/*")
	hdr.Set("User-Agent", hookshotVersion)
	hdr.Set("X-GitHub-Event", event)
	hdr.Set("X-GitHub-Delivery", id)
	hdr.Set("X-GitHub-Hook-ID", strconv.Itoa(webhookHookID))
	if s.appKey != nil {
		hdr.Set("X-GitHub-Hook-Installation-Target-Type", "integration")
		hdr.Set("X-GitHub-Hook-Installation-Target-ID", strconv.FormatInt(s.appID, 10))
	} else {
		hdr.Set("X-GitHub-Hook-Installation-Target-Type", "repository")
		hdr.Set("X-GitHub-Hook-Installation-Target-ID", strconv.Itoa(webhookRepoID))
	}
	if len(h.secret) > 0 {
		hdr.Set("X-Hub-Signature", "sha1="+sign(sha1.New, h.secret, body))
		hdr.Set("X-Hub-Signature-256", "sha256="+sign(sha256.New, h.secret, body))
	}
	return Delivery{ID: id, Event: event, Action: action, RunID: runID, Attempt: attempt, Header: hdr, Body: body}
}

// sign is the hex HMAC of body under secret.
func sign(mk func() hash.Hash, secret, body []byte) string {
	m := hmac.New(mk, secret)
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

// send POSTs the delivery once and records the exchange.
func (s *Server) send(ctx context.Context, h *webhook, d *Delivery) {
	ctx, cancel := context.WithTimeout(ctx, deliveryTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.url, bytes.NewReader(d.Body))
	if err != nil {
		d.Err = err
		return
	}
	req.Header = d.Header.Clone()
	var answer []byte
	var respHeader http.Header
	resp, err := h.client.Do(req)
	if err != nil {
		d.Err = err
	} else {
		answer, _ = io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes))
		resp.Body.Close()
		d.Status, respHeader = resp.StatusCode, resp.Header
	}
	s.recordDelivery(req, d, respHeader, answer)
}

// recordDelivery appends the delivery to the exchanges file, when
// recording is on.
func (s *Server) recordDelivery(req *http.Request, d *Delivery, respHeader http.Header, answer []byte) {
	if s.exchangeDir == "" {
		return
	}
	e := exchanges.Exchange{
		Backend: "github", Method: http.MethodPost, Path: req.URL.Path, Query: req.URL.RawQuery,
		RequestHeaders: exchanges.RedactHeaders(d.Header, exchanges.KeepScheme), Status: d.Status,
		ResponseHeaders: respHeader.Clone(), Operation: WebhookOperation,
	}
	if e.ResponseHeaders == nil {
		e.ResponseHeaders = http.Header{}
	}
	var cut bool
	e.RequestBody, cut = exchanges.Body(d.Body)
	e.Truncated = e.Truncated || cut
	e.ResponseBody, cut = exchanges.Body(answer)
	e.Truncated = e.Truncated || cut
	if err := exchanges.Append(s.exchangeDir, e); err != nil {
		fmt.Fprintf(os.Stderr, "githubfake: recording a webhook delivery: %v\n", err)
	}
}
