package githubfake

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// baseURL is the API base the client used, with a trailing slash.
func baseURL(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host + "/"
}

func htmlURL(r *http.Request, rn *run) string { return runHTMLURL(baseURL(r), rn) }

func runHTMLURL(base string, rn *run) string {
	return fmt.Sprintf("%s%s/%s/actions/runs/%d", base, rn.owner, rn.repo, rn.id)
}

func stamp(t time.Time) *string {
	if t.IsZero() {
		return nil
	}
	s := t.UTC().Format(time.RFC3339)
	return &s
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// userDocument is a simple-user, with every member GitHub's description
// marks required.
func userDocument(base, login string, id int64, typ string) map[string]any {
	u := base + "users/" + login
	return map[string]any{
		"login": login, "id": id, "node_id": fmt.Sprintf("U_fake%d", id), "type": typ, "site_admin": false,
		"avatar_url":  fmt.Sprintf("https://avatars.githubusercontent.com/u/%d?v=4", id),
		"gravatar_id": "", "url": u, "html_url": strings.TrimSuffix(base, "/") + "/" + login,
		"followers_url": u + "/followers", "following_url": u + "/following{/other_user}",
		"gists_url": u + "/gists{/gist_id}", "starred_url": u + "/starred{/owner}{/repo}",
		"subscriptions_url": u + "/subscriptions", "organizations_url": u + "/orgs",
		"repos_url": u + "/repos", "events_url": u + "/events{/privacy}",
		"received_events_url": u + "/received_events",
	}
}

// teamDocument is a team, as a pending deployment's reviewer.
func teamDocument(base, org, slug string, id int64) map[string]any {
	u := fmt.Sprintf("%sorganizations/1/team/%d", base, id)
	return map[string]any{
		"id": id, "node_id": fmt.Sprintf("T_fake%d", id), "url": u, "members_url": u + "/members{/member}",
		"name": slug, "slug": slug, "description": nil, "permission": "pull", "privacy": "closed",
		"html_url":         fmt.Sprintf("%sorgs/%s/teams/%s", strings.TrimSuffix(base, "/")+"/", org, slug),
		"repositories_url": u + "/repos", "parent": nil, "type": "organization",
	}
}

// repoDocument is a minimal-repository with every member GitHub's
// description marks required.
func repoDocument(base, owner, repo string) map[string]any {
	u := base + "repos/" + owner + "/" + repo
	doc := map[string]any{
		"id": 1296269, "node_id": "R_fake1296269", "name": repo, "full_name": owner + "/" + repo,
		"owner": userDocument(base, owner, 1, "Organization"), "private": false,
		"html_url": strings.TrimSuffix(base, "/") + "/" + owner + "/" + repo, "description": nil, "fork": false, "url": u,
	}
	for _, k := range []struct{ name, path string }{
		{"archive_url", "/{archive_format}{/ref}"}, {"assignees_url", "/assignees{/user}"},
		{"blobs_url", "/git/blobs{/sha}"}, {"branches_url", "/branches{/branch}"},
		{"collaborators_url", "/collaborators{/collaborator}"}, {"comments_url", "/comments{/number}"},
		{"commits_url", "/commits{/sha}"}, {"compare_url", "/compare/{base}...{head}"},
		{"contents_url", "/contents/{+path}"}, {"contributors_url", "/contributors"},
		{"deployments_url", "/deployments"}, {"downloads_url", "/downloads"}, {"events_url", "/events"},
		{"forks_url", "/forks"}, {"git_commits_url", "/git/commits{/sha}"}, {"git_refs_url", "/git/refs{/sha}"},
		{"git_tags_url", "/git/tags{/sha}"}, {"hooks_url", "/hooks"},
		{"issue_comment_url", "/issues/comments{/number}"}, {"issue_events_url", "/issues/events{/number}"},
		{"issues_url", "/issues{/number}"}, {"keys_url", "/keys{/key_id}"}, {"labels_url", "/labels{/name}"},
		{"languages_url", "/languages"}, {"merges_url", "/merges"}, {"milestones_url", "/milestones{/number}"},
		{"notifications_url", "/notifications{?since,all,participating}"}, {"pulls_url", "/pulls{/number}"},
		{"releases_url", "/releases{/id}"}, {"stargazers_url", "/stargazers"}, {"statuses_url", "/statuses/{sha}"},
		{"subscribers_url", "/subscribers"}, {"subscription_url", "/subscription"}, {"tags_url", "/tags"},
		{"teams_url", "/teams"}, {"trees_url", "/git/trees{/sha}"},
	} {
		doc[k.name] = u + k.path
	}
	return doc
}

// commitDocument is a run's head_commit.
type commitDocument struct {
	ID        string         `json:"id"`
	TreeID    string         `json:"tree_id"`
	Message   string         `json:"message"`
	Timestamp string         `json:"timestamp"`
	Author    personDocument `json:"author"`
	Committer personDocument `json:"committer"`
}

type personDocument struct {
	Name  string `json:"name"`
	Email string `json:"email"`
}

// runDocument is the wire form of a workflow run (the fields clients read).
type runDocument struct {
	ID              int64          `json:"id"`
	Name            string         `json:"name"`
	NodeID          string         `json:"node_id"`
	HeadBranch      string         `json:"head_branch"`
	HeadSHA         string         `json:"head_sha"`
	Path            string         `json:"path"`
	DisplayTitle    string         `json:"display_title"`
	RunNumber       int            `json:"run_number"`
	RunAttempt      int            `json:"run_attempt"`
	Event           string         `json:"event"`
	Status          string         `json:"status"`
	Conclusion      *string        `json:"conclusion"`
	WorkflowID      int64          `json:"workflow_id"`
	URL             string         `json:"url"`
	HTMLURL         string         `json:"html_url"`
	CreatedAt       *string        `json:"created_at"`
	UpdatedAt       *string        `json:"updated_at"`
	RunStartedAt    *string        `json:"run_started_at"`
	JobsURL         string         `json:"jobs_url"`
	LogsURL         string         `json:"logs_url"`
	ArtifactsURL    string         `json:"artifacts_url"`
	CancelURL       string         `json:"cancel_url"`
	RerunURL        string         `json:"rerun_url"`
	WorkflowURL     string         `json:"workflow_url"`
	CheckSuiteURL   string         `json:"check_suite_url"`
	CheckSuiteID    int64          `json:"check_suite_id"`
	CheckSuiteNode  string         `json:"check_suite_node_id"`
	PreviousAttempt *string        `json:"previous_attempt_url"`
	PullRequests    []any          `json:"pull_requests"`
	HeadCommit      commitDocument `json:"head_commit"`
	Actor           map[string]any `json:"actor"`
	TriggeringActor map[string]any `json:"triggering_actor"`
	Repository      map[string]any `json:"repository"`
	HeadRepository  map[string]any `json:"head_repository"`
}

func (s *Server) runDoc(r *http.Request, rn *run) runDocument {
	return runDocAt(baseURL(r), rn, rn.stateAt(s.now()))
}

// runDocAt is the run in state st, with URLs under base.
func runDocAt(base string, rn *run, st state) runDocument {
	api := fmt.Sprintf("%srepos/%s/%s/actions/runs/%d", base, rn.owner, rn.repo, rn.id)
	sha := fmt.Sprintf("%040x", rn.id)
	var previous *string
	if rn.attempt > 1 {
		previous = nullable(fmt.Sprintf("%s/attempts/%d", api, rn.attempt-1))
	}
	return runDocument{
		ID:              rn.id,
		Name:            rn.workflow.Name,
		NodeID:          fmt.Sprintf("WFR_fake%d", rn.id),
		HeadBranch:      strings.TrimPrefix(rn.ref, "refs/heads/"),
		HeadSHA:         sha,
		Path:            ".github/workflows/" + rn.workflow.File,
		DisplayTitle:    rn.title,
		RunNumber:       rn.number,
		RunAttempt:      rn.attempt,
		Event:           "workflow_dispatch",
		Status:          st.status,
		Conclusion:      nullable(st.conclusion),
		WorkflowID:      rn.workflow.ID,
		URL:             api,
		HTMLURL:         runHTMLURL(base, rn),
		CreatedAt:       stamp(rn.firstAt),
		UpdatedAt:       stamp(st.updatedAt),
		RunStartedAt:    stamp(rn.createdAt),
		JobsURL:         api + "/jobs",
		LogsURL:         api + "/logs",
		ArtifactsURL:    api + "/artifacts",
		CancelURL:       api + "/cancel",
		RerunURL:        api + "/rerun",
		WorkflowURL:     fmt.Sprintf("%srepos/%s/%s/actions/workflows/%d", base, rn.owner, rn.repo, rn.workflow.ID),
		CheckSuiteURL:   fmt.Sprintf("%srepos/%s/%s/check-suites/%d", base, rn.owner, rn.repo, rn.id+1),
		CheckSuiteID:    rn.id + 1,
		CheckSuiteNode:  fmt.Sprintf("CS_fake%d", rn.id+1),
		PreviousAttempt: previous,
		PullRequests:    []any{},
		HeadCommit: commitDocument{
			ID: sha, TreeID: fmt.Sprintf("%040x", rn.id+7), Message: "Update " + rn.workflow.File,
			Timestamp: rn.firstAt.Add(-time.Hour).UTC().Format(time.RFC3339),
			Author:    personDocument{Name: "Mona Octocat", Email: "mona@example.com"},
			Committer: personDocument{Name: "GitHub", Email: "noreply@github.com"},
		},
		Actor:           userDocument(base, "octocat", 583231, "User"),
		TriggeringActor: userDocument(base, "octocat", 583231, "User"),
		Repository:      repoDocument(base, rn.owner, rn.repo),
		HeadRepository:  repoDocument(base, rn.owner, rn.repo),
	}
}

type stepDocument struct {
	Name        string  `json:"name"`
	Status      string  `json:"status"`
	Conclusion  *string `json:"conclusion"`
	Number      int     `json:"number"`
	StartedAt   *string `json:"started_at"`
	CompletedAt *string `json:"completed_at"`
}

type jobDocument struct {
	ID              int64          `json:"id"`
	NodeID          string         `json:"node_id"`
	RunID           int64          `json:"run_id"`
	RunURL          string         `json:"run_url"`
	HeadBranch      string         `json:"head_branch"`
	HeadSHA         string         `json:"head_sha"`
	URL             string         `json:"url"`
	HTMLURL         string         `json:"html_url"`
	CheckRunURL     string         `json:"check_run_url"`
	Status          string         `json:"status"`
	Conclusion      *string        `json:"conclusion"`
	CreatedAt       string         `json:"created_at"`
	StartedAt       string         `json:"started_at"`
	CompletedAt     *string        `json:"completed_at"`
	Name            string         `json:"name"`
	Steps           []stepDocument `json:"steps"`
	Labels          []string       `json:"labels"`
	RunnerID        *int64         `json:"runner_id"`
	RunnerName      *string        `json:"runner_name"`
	RunnerGroupID   *int64         `json:"runner_group_id"`
	RunnerGroupName *string        `json:"runner_group_name"`
	RunAttempt      int            `json:"run_attempt"`
	WorkflowName    string         `json:"workflow_name"`
}

// page is one page of a listing: GitHub's per_page (default 30, at most
// 100) and page parameters, with a Link header naming the other pages.
type page struct {
	lo, hi int
	link   string
}

func paginate(r *http.Request, total int) page {
	q := r.URL.Query()
	perPage := min(max(atoi(q.Get("per_page"), 30), 1), 100)
	n := max(atoi(q.Get("page"), 1), 1)
	p := page{lo: min((n-1)*perPage, total), hi: min(n*perPage, total)}
	last := max((total+perPage-1)/perPage, 1)
	at := func(k int) string {
		u := *r.URL
		qq := u.Query()
		qq.Set("page", strconv.Itoa(k))
		qq.Set("per_page", strconv.Itoa(perPage))
		u.RawQuery = qq.Encode()
		return strings.TrimSuffix(baseURL(r), "/") + u.RequestURI()
	}
	var links []string
	if n > 1 {
		links = append(links, fmt.Sprintf("<%s>; rel=\"prev\"", at(min(n-1, last))))
	}
	if n < last {
		links = append(links, fmt.Sprintf("<%s>; rel=\"next\"", at(n+1)), fmt.Sprintf("<%s>; rel=\"last\"", at(last)))
	}
	if n > 1 {
		links = append(links, fmt.Sprintf("<%s>; rel=\"first\"", at(1)))
	}
	p.link = strings.Join(links, ", ")
	return p
}

// listing is a paginated JSON answer: the page's items under key, the
// total_count of every page, and the Link header.
func listing(r *http.Request, key string, total int, items func(lo, hi int) any) response {
	p := paginate(r, total)
	resp := response{status: http.StatusOK, body: map[string]any{"total_count": total, key: items(p.lo, p.hi)}, etag: true}
	if p.link != "" {
		resp.header = http.Header{"Link": {p.link}}
	}
	return resp
}

func (s *Server) jobsDoc(r *http.Request, rn *run) response {
	st := rn.stateAt(s.now())
	return listing(r, "jobs", len(st.jobs), func(lo, hi int) any {
		jobs := make([]jobDocument, 0, hi-lo)
		for i := lo; i < hi; i++ {
			jobs = append(jobs, jobDoc(baseURL(r), rn, i, st.jobs[i]))
		}
		return jobs
	})
}

// jobDoc is job i of the run in state js, with URLs under base.
func jobDoc(base string, rn *run, i int, js jobState) jobDocument {
	id := rn.jobIDs[i]
	name := rn.jobs()[i].Name
	created := rn.createdAt.UTC().Format(time.RFC3339)
	doc := jobDocument{
		ID: id, NodeID: fmt.Sprintf("CR_fake%d", id), RunID: rn.id,
		RunURL:     fmt.Sprintf("%srepos/%s/%s/actions/runs/%d", base, rn.owner, rn.repo, rn.id),
		HeadBranch: strings.TrimPrefix(rn.ref, "refs/heads/"), HeadSHA: fmt.Sprintf("%040x", rn.id),
		URL:         fmt.Sprintf("%srepos/%s/%s/actions/jobs/%d", base, rn.owner, rn.repo, id),
		HTMLURL:     fmt.Sprintf("%s/job/%d", runHTMLURL(base, rn), id),
		CheckRunURL: fmt.Sprintf("%srepos/%s/%s/check-runs/%d", base, rn.owner, rn.repo, id),
		Status:      js.status, Conclusion: nullable(js.conclusion),
		// GitHub's description requires started_at: a job that has not
		// started carries its creation time, as GitHub sends.
		CreatedAt: created, StartedAt: created, CompletedAt: stamp(js.completedAt),
		Name: name, Steps: []stepDocument{}, Labels: []string{"ubuntu-latest"},
		RunAttempt: rn.attempt, WorkflowName: rn.workflow.Name,
	}
	if !js.startedAt.IsZero() {
		doc.StartedAt = js.startedAt.UTC().Format(time.RFC3339)
		runnerID, groupID := 1000+int64(i), int64(2)
		doc.RunnerID, doc.RunnerGroupID = &runnerID, &groupID
		doc.RunnerName, doc.RunnerGroupName = nullable(fmt.Sprintf("GitHub Actions %d", runnerID)), nullable("GitHub Actions")
		doc.Steps = []stepDocument{{Name: "Run " + name, Status: js.status, Conclusion: nullable(js.conclusion),
			Number: 1, StartedAt: stamp(js.startedAt), CompletedAt: stamp(js.completedAt)}}
	}
	return doc
}

func (s *Server) artifactsDoc(r *http.Request, rn *run) response {
	st := rn.stateAt(s.now())
	n := 0
	if st.status == statusCompleted {
		n = len(rn.script.Artifacts)
	}
	return listing(r, "artifacts", n, func(lo, hi int) any {
		arts := []map[string]any{}
		for i := lo; i < hi; i++ {
			a := rn.script.Artifacts[i]
			id := rn.artifactID + int64(i)
			arts = append(arts, map[string]any{
				"id": id, "node_id": fmt.Sprintf("MDg6QXJ0aWZhY3Q%d", id), "name": a.Name,
				"size_in_bytes": a.Size, "expired": false,
				"url":                  fmt.Sprintf("%srepos/%s/%s/actions/artifacts/%d", baseURL(r), rn.owner, rn.repo, id),
				"archive_download_url": fmt.Sprintf("%srepos/%s/%s/actions/artifacts/%d/zip", baseURL(r), rn.owner, rn.repo, id),
				"created_at":           stamp(st.updatedAt), "updated_at": stamp(st.updatedAt),
				"expires_at": stamp(st.updatedAt.Add(90 * 24 * time.Hour)),
				"digest":     fmt.Sprintf("sha256:%064x", id),
				"workflow_run": map[string]any{"id": rn.id, "repository_id": 1296269, "head_repository_id": 1296269,
					"head_branch": strings.TrimPrefix(rn.ref, "refs/heads/"), "head_sha": fmt.Sprintf("%040x", rn.id)},
			})
		}
		return arts
	})
}

func (s *Server) pendingDoc(r *http.Request, rn *run) []map[string]any {
	a := rn.script.Approval
	out := []map[string]any{}
	if a == nil || rn.stateAt(s.now()).status != statusWaiting {
		return out
	}
	reviewers := []map[string]any{}
	for i, name := range a.Reviewers {
		if slug, ok := strings.CutPrefix(name, "team:"); ok {
			reviewers = append(reviewers, map[string]any{"type": "Team",
				"reviewer": teamDocument(baseURL(r), rn.owner, slug, int64(2000+i))})
			continue
		}
		reviewers = append(reviewers, map[string]any{"type": "User",
			"reviewer": userDocument(baseURL(r), name, int64(1000+i), "User")})
	}
	return append(out, map[string]any{
		"environment": map[string]any{
			"id": envID(a), "node_id": fmt.Sprintf("EN_fake%d", envID(a)), "name": a.Environment,
			"url":      fmt.Sprintf("%srepos/%s/%s/environments/%s", baseURL(r), rn.owner, rn.repo, a.Environment),
			"html_url": fmt.Sprintf("%s%s/%s/deployments/activity_log?environments_filter=%s", baseURL(r), rn.owner, rn.repo, a.Environment),
		},
		"wait_timer":               0,
		"wait_timer_started_at":    nil,
		"current_user_can_approve": a.CanApprove,
		"reviewers":                reviewers,
	})
}
