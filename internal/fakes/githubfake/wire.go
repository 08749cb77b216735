package githubfake

import (
	"fmt"
	"net/http"
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

func htmlURL(r *http.Request, rn *run) string {
	return fmt.Sprintf("%s%s/%s/actions/runs/%d", baseURL(r), rn.owner, rn.repo, rn.id)
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

type ownerDocument struct {
	Login string `json:"login"`
	ID    int64  `json:"id"`
	Type  string `json:"type"`
}

type repoDocument struct {
	ID       int64         `json:"id"`
	Name     string        `json:"name"`
	FullName string        `json:"full_name"`
	Owner    ownerDocument `json:"owner"`
}

// runDocument is the wire form of a workflow run (the fields clients read).
type runDocument struct {
	ID           int64        `json:"id"`
	Name         string       `json:"name"`
	NodeID       string       `json:"node_id"`
	HeadBranch   string       `json:"head_branch"`
	HeadSHA      string       `json:"head_sha"`
	Path         string       `json:"path"`
	DisplayTitle string       `json:"display_title"`
	RunNumber    int          `json:"run_number"`
	RunAttempt   int          `json:"run_attempt"`
	Event        string       `json:"event"`
	Status       string       `json:"status"`
	Conclusion   *string      `json:"conclusion"`
	WorkflowID   int64        `json:"workflow_id"`
	URL          string       `json:"url"`
	HTMLURL      string       `json:"html_url"`
	CreatedAt    *string      `json:"created_at"`
	UpdatedAt    *string      `json:"updated_at"`
	RunStartedAt *string      `json:"run_started_at"`
	JobsURL      string       `json:"jobs_url"`
	LogsURL      string       `json:"logs_url"`
	ArtifactsURL string       `json:"artifacts_url"`
	CancelURL    string       `json:"cancel_url"`
	RerunURL     string       `json:"rerun_url"`
	WorkflowURL  string       `json:"workflow_url"`
	Repository   repoDocument `json:"repository"`
}

func (s *Server) runDoc(r *http.Request, rn *run) runDocument {
	st := rn.stateAt(s.now())
	api := fmt.Sprintf("%srepos/%s/%s/actions/runs/%d", baseURL(r), rn.owner, rn.repo, rn.id)
	return runDocument{
		ID:           rn.id,
		Name:         rn.workflow.Name,
		NodeID:       fmt.Sprintf("WFR_fake%d", rn.id),
		HeadBranch:   strings.TrimPrefix(rn.ref, "refs/heads/"),
		HeadSHA:      fmt.Sprintf("%040x", rn.id),
		Path:         ".github/workflows/" + rn.workflow.File,
		DisplayTitle: rn.title,
		RunNumber:    rn.number,
		RunAttempt:   rn.attempt,
		Event:        "workflow_dispatch",
		Status:       st.status,
		Conclusion:   nullable(st.conclusion),
		WorkflowID:   rn.workflow.ID,
		URL:          api,
		HTMLURL:      htmlURL(r, rn),
		CreatedAt:    stamp(rn.firstAt),
		UpdatedAt:    stamp(st.updatedAt),
		RunStartedAt: stamp(rn.createdAt),
		JobsURL:      api + "/jobs",
		LogsURL:      api + "/logs",
		ArtifactsURL: api + "/artifacts",
		CancelURL:    api + "/cancel",
		RerunURL:     api + "/rerun",
		WorkflowURL:  fmt.Sprintf("%srepos/%s/%s/actions/workflows/%d", baseURL(r), rn.owner, rn.repo, rn.workflow.ID),
		Repository: repoDocument{
			ID: 1296269, Name: rn.repo, FullName: rn.owner + "/" + rn.repo,
			Owner: ownerDocument{Login: rn.owner, ID: 1, Type: "Organization"},
		},
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
	ID           int64          `json:"id"`
	RunID        int64          `json:"run_id"`
	RunURL       string         `json:"run_url"`
	HeadBranch   string         `json:"head_branch"`
	HeadSHA      string         `json:"head_sha"`
	URL          string         `json:"url"`
	HTMLURL      string         `json:"html_url"`
	Status       string         `json:"status"`
	Conclusion   *string        `json:"conclusion"`
	CreatedAt    *string        `json:"created_at"`
	StartedAt    *string        `json:"started_at"`
	CompletedAt  *string        `json:"completed_at"`
	Name         string         `json:"name"`
	Steps        []stepDocument `json:"steps"`
	Labels       []string       `json:"labels"`
	RunAttempt   int            `json:"run_attempt"`
	WorkflowName string         `json:"workflow_name"`
}

func (s *Server) jobsDoc(r *http.Request, rn *run) map[string]any {
	st := rn.stateAt(s.now())
	jobs := make([]jobDocument, 0, len(st.jobs))
	for i, js := range st.jobs {
		id := rn.jobIDs[i]
		step := stepDocument{Name: "Run " + rn.jobs()[i].Name, Status: js.status, Conclusion: nullable(js.conclusion),
			Number: 1, StartedAt: stamp(js.startedAt), CompletedAt: stamp(js.completedAt)}
		jobs = append(jobs, jobDocument{
			ID: id, RunID: rn.id,
			RunURL:     fmt.Sprintf("%srepos/%s/%s/actions/runs/%d", baseURL(r), rn.owner, rn.repo, rn.id),
			HeadBranch: strings.TrimPrefix(rn.ref, "refs/heads/"), HeadSHA: fmt.Sprintf("%040x", rn.id),
			URL:     fmt.Sprintf("%srepos/%s/%s/actions/jobs/%d", baseURL(r), rn.owner, rn.repo, id),
			HTMLURL: fmt.Sprintf("%s/job/%d", htmlURL(r, rn), id),
			Status:  js.status, Conclusion: nullable(js.conclusion),
			CreatedAt: stamp(rn.createdAt), StartedAt: stamp(js.startedAt), CompletedAt: stamp(js.completedAt),
			Name: rn.jobs()[i].Name, Steps: []stepDocument{step}, Labels: []string{"ubuntu-latest"},
			RunAttempt: rn.attempt, WorkflowName: rn.workflow.Name,
		})
	}
	return map[string]any{"total_count": len(jobs), "jobs": jobs}
}

func (s *Server) artifactsDoc(r *http.Request, rn *run) map[string]any {
	st := rn.stateAt(s.now())
	arts := []map[string]any{}
	if st.status == statusCompleted {
		for i, a := range rn.script.Artifacts {
			id := rn.artifactID + int64(i)
			arts = append(arts, map[string]any{
				"id": id, "node_id": fmt.Sprintf("MDg6QXJ0aWZhY3Q%d", id), "name": a.Name,
				"size_in_bytes": a.Size, "expired": false,
				"url":                  fmt.Sprintf("%srepos/%s/%s/actions/artifacts/%d", baseURL(r), rn.owner, rn.repo, id),
				"archive_download_url": fmt.Sprintf("%srepos/%s/%s/actions/artifacts/%d/zip", baseURL(r), rn.owner, rn.repo, id),
				"created_at":           stamp(st.updatedAt), "updated_at": stamp(st.updatedAt),
				"expires_at":   stamp(st.updatedAt.Add(90 * 24 * time.Hour)),
				"workflow_run": map[string]any{"id": rn.id, "head_branch": strings.TrimPrefix(rn.ref, "refs/heads/")},
			})
		}
	}
	return map[string]any{"total_count": len(arts), "artifacts": arts}
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
			reviewers = append(reviewers, map[string]any{"type": "Team", "reviewer": map[string]any{
				"id": 2000 + i, "slug": slug, "name": slug}})
			continue
		}
		reviewers = append(reviewers, map[string]any{"type": "User", "reviewer": map[string]any{
			"id": 1000 + i, "login": name, "type": "User"}})
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
