package bridge_test

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jobbridge/jobbridge/auth"
	"github.com/jobbridge/jobbridge/auth/authtest"
	"github.com/jobbridge/jobbridge/catalog"
	"github.com/jobbridge/jobbridge/mapping"
	"github.com/jobbridge/jobbridge/taskclient"
)

const testResource = "http://127.0.0.1:1/mcp"

// authHarness is a bridge that authenticates callers with tokens of an
// in-process issuer.
type authHarness struct {
	*harness
	issuer *authtest.Issuer
}

func newAuthHarness(t *testing.T, tune func(*catalog.Catalog)) *authHarness {
	t.Helper()
	issuer := authtest.NewIssuer(t)
	cfg := auth.Config{
		Resource: testResource,
		OAuth:    &auth.OAuthConfig{Issuer: issuer.URL(), JWKSURL: issuer.JWKSURL(), TenantClaim: "tenant", GroupsClaim: "groups"},
	}
	cfg.SetDefaults()
	a, err := auth.New(t.Context(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &authHarness{harness: newHarness(t, harnessOptions{auth: a, tune: tune}), issuer: issuer}
}

// client returns a tasks client that presents a token for sub (and claims).
func (h *authHarness) client(sub string, claims map[string]any) *taskclient.Client {
	c := map[string]any{"sub": sub, "aud": testResource, "tenant": "acme"}
	for k, v := range claims {
		c[k] = v
	}
	return &taskclient.Client{
		URL: h.srv.URL, Tasks: true, Elicitation: true,
		Header: http.Header{"Authorization": {"Bearer " + h.issuer.Token(c)}},
	}
}

func TestRequestsWithoutATokenAreRefused(t *testing.T) {
	h := newAuthHarness(t, nil)
	for _, tc := range []struct {
		name   string
		header string
	}{
		{"no credentials", ""},
		{"expired token", "Bearer " + h.issuer.Token(map[string]any{"sub": "a", "aud": testResource}, authtest.Expired())},
		{"wrong audience", "Bearer " + h.issuer.Token(map[string]any{"sub": "a", "aud": "http://elsewhere.test/mcp"})},
		{"alg none", "Bearer " + h.issuer.Token(map[string]any{"sub": "a", "aud": testResource}, authtest.AlgNone())},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodPost, h.srv.URL, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`))
			if tc.header != "" {
				req.Header.Set("Authorization", tc.header)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(resp.Header.Get("WWW-Authenticate"), "resource_metadata=") {
				t.Errorf("HTTP %d, WWW-Authenticate %q; want 401 with resource_metadata", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
			}
		})
	}
}

// TestBOLA probes one principal's tasks with another's credentials: every
// probe must answer exactly like a task that does not exist, and change
// nothing.
func TestBOLA(t *testing.T) {
	h := newAuthHarness(t, nil)
	ctx := t.Context()
	alice := h.client("alice", nil)
	mallory := h.client("mallory", nil)
	otherTenant := h.client("alice", map[string]any{"tenant": "other"})

	var ids []string
	for range 10 {
		res, err := alice.CallTool(ctx, "long_job", nil, nil)
		if err != nil || res.Task == nil {
			t.Fatalf("alice's tools/call: %v %+v", err, res)
		}
		ids = append(ids, res.Task.TaskID)
	}
	probes := 0
	for _, prober := range []*taskclient.Client{mallory, otherTenant} {
		for _, id := range ids {
			for _, call := range []struct {
				name string
				do   func(string) error
			}{
				{"get", func(id string) error { _, err := prober.GetTask(ctx, id); return err }},
				{"update", func(id string) error {
					return prober.UpdateTask(ctx, id, map[string]any{"x": taskclient.ElicitResult{Action: "accept"}})
				}},
				{"cancel", func(id string) error { return prober.CancelTask(ctx, id) }},
			} {
				probes++
				foreign := call.do(id)
				unknown := call.do("bm90LWEtdGFzay1vZi1hbnlvbmUtMTIzNDU2")
				if fmt.Sprint(foreign) != fmt.Sprint(unknown) {
					t.Errorf("%s of a foreign task answered %v, of an unknown one %v", call.name, foreign, unknown)
				}
				var rpc *taskclient.RPCError
				if !errors.As(foreign, &rpc) || rpc.Code != -32602 {
					t.Errorf("%s of a foreign task: %v, want -32602", call.name, foreign)
				}
			}
		}
	}
	for _, id := range ids {
		row, err := h.store.Get(ctx, mapping.KeyOf(id), "acme/"+h.issuer.URL()+"|alice", time.Now())
		if err != nil {
			t.Fatalf("alice's task: %v", err)
		}
		if row.CancelRequestedAt != nil || row.Status.Terminal() {
			t.Errorf("a probe changed alice's task: %s cancel=%v", row.Status, row.CancelRequestedAt)
		}
		if _, err := alice.GetTask(ctx, id); err != nil {
			t.Errorf("alice cannot read her own task: %v", err)
		}
	}
	t.Logf("BOLA: %d probes, 0 leaks", probes)
}

func TestToolPolicies(t *testing.T) {
	h := newAuthHarness(t, func(c *catalog.Catalog) {
		c.Tool("greet").Allow = &catalog.Policy{Groups: []string{"greeters"}}
		c.Tool("slow_compute").Allow = &catalog.Policy{Scopes: []string{"jobs:run"}}
	})
	ctx := t.Context()
	outsider := h.client("bob", map[string]any{"scope": "jobs:read"})
	greeter := h.client("carol", map[string]any{"groups": []string{"greeters"}, "scope": "jobs:run"})

	visible := func(c *taskclient.Client) map[string]bool {
		tools, err := c.ListTools(ctx)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]bool{}
		for _, tl := range tools {
			m[tl.Name] = true
		}
		return m
	}
	if v := visible(outsider); v["greet"] || v["slow_compute"] || !v["long_job"] {
		t.Errorf("outsider sees %v; want neither greet nor slow_compute, but long_job", v)
	}
	if v := visible(greeter); !v["greet"] || !v["slow_compute"] {
		t.Errorf("greeter sees %v; want greet and slow_compute", v)
	}
	// A tool outside the caller's groups answers like an unknown tool.
	_, err := outsider.CallTool(ctx, "greet", map[string]any{"name": "x"}, nil)
	_, unknownErr := outsider.CallTool(ctx, "no_such_tool", nil, nil)
	var a, b *taskclient.RPCError
	if !errors.As(err, &a) || !errors.As(unknownErr, &b) || a.Code != b.Code {
		t.Errorf("denied tool: %v; unknown tool: %v; want the same kind of error", err, unknownErr)
	}
	// A missing scope is a 403 naming it.
	_, resp, err := outsider.Raw(ctx, "tools/call", map[string]any{"name": "slow_compute", "arguments": map[string]any{"seconds": 0}}, nil)
	if err == nil || resp == nil || resp.StatusCode != http.StatusForbidden || !strings.Contains(resp.Header.Get("WWW-Authenticate"), `error="insufficient_scope"`) || !strings.Contains(resp.Header.Get("WWW-Authenticate"), "jobs:run") {
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		t.Errorf("missing scope: HTTP %d %v; want 403 insufficient_scope naming jobs:run", status, err)
	}
	if res, err := greeter.CallTool(ctx, "greet", map[string]any{"name": "Ann"}, nil); err != nil || res.Result == nil || res.Result.Text() != "Hello, Ann!" {
		t.Errorf("greeter calling greet: %v %+v", err, res)
	}
}

func TestLimits(t *testing.T) {
	h := newHarness(t, harnessOptions{tune: func(c *catalog.Catalog) {
		c.Limits = catalog.Limits{MaxLiveTasks: 2, CreatesPerMinute: 5, GetsPerSecond: 1, MaxArgumentBytes: 64}
		c.Limits.SetDefaults()
	}})
	ctx := t.Context()

	t.Run("argument size", func(t *testing.T) {
		res, err := h.tasks.CallTool(ctx, "slow_compute", map[string]any{"seconds": 1, "label": strings.Repeat("x", 100)}, nil)
		if err != nil || res.Result == nil || !res.Result.IsError || !strings.Contains(res.Result.Text(), "at most 64") {
			t.Errorf("got %v %+v, want an isError result naming the limit", err, res)
		}
	})
	var live string
	t.Run("live tasks", func(t *testing.T) {
		for range 2 {
			live = h.createTask("long_job", nil).TaskID
		}
		res, err := h.tasks.CallTool(ctx, "long_job", nil, nil)
		if err != nil || res.Result == nil || !res.Result.IsError || !strings.Contains(res.Result.Text(), "unfinished tasks") {
			t.Errorf("third live task: %v %+v, want an isError result about the limit", err, res)
		}
	})
	t.Run("poll rate", func(t *testing.T) {
		id := live
		var limited *taskclient.RPCError
		for range 10 {
			_, resp, err := h.tasks.Raw(ctx, "tasks/get", map[string]any{"taskId": id}, nil)
			if resp != nil && resp.StatusCode == http.StatusTooManyRequests {
				limited = &taskclient.RPCError{HTTPStatus: resp.StatusCode}
				if resp.Header.Get("Retry-After") == "" {
					t.Error("429 without Retry-After")
				}
				break
			}
			_ = err
		}
		if limited == nil {
			t.Fatal("10 immediate polls at 1/s (burst 2) were never limited")
		}
	})
	m := scrapeMetrics(t, h)
	m.want(t, 1, "jobbridge_limit_rejections_total", "limit=argument_size")
	m.want(t, 1, "jobbridge_limit_rejections_total", "limit=live_tasks")
	m.wantPositive(t, "jobbridge_limit_rejections_total", "limit=poll_rate")
	m.want(t, 0, "jobbridge_limit_rejections_total", "limit=create_rate")
}

func TestUnansweredInputEndsTheTask(t *testing.T) {
	clk := &clock{now: time.Now()}
	h := newHarness(t, harnessOptions{now: clk.Now, sweep: 20 * time.Millisecond, tune: func(c *catalog.Catalog) {
		c.Limits.MaxInputWait = 2 * time.Minute
	}})
	task := h.createTask("confirm_delete", map[string]any{"filename": "x.txt"})
	before := h.fake.Requests()
	clk.Advance(3 * time.Minute)
	got := h.waitTerminal(task.TaskID)
	if got.Status != "cancelled" || !strings.Contains(got.StatusMessage, "no answer within 2m0s") {
		t.Errorf("got %s %q, want cancelled for want of an answer", got.Status, got.StatusMessage)
	}
	if n := h.fake.Requests() - before; n != 0 {
		t.Errorf("%d backend requests for an unconfirmed task, want 0", n)
	}
}
