package expr_test

import (
	"context"
	"errors"
	"net/url"
	"os/exec"
	"reflect"
	"strings"
	"testing"

	"github.com/jobbridge/jobbridge/adapters/expr"
)

var reading = expr.Scope{Vars: []string{expr.Args, expr.Job, expr.CorrelationID, expr.Body, expr.Status, expr.Headers}}

func answer(t *testing.T, raw string, status int64) expr.Answer {
	t.Helper()
	body, err := expr.DecodeJSON([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	return expr.Answer{Raw: []byte(raw), Vars: expr.Vars{
		expr.Body: body, expr.Status: status,
		expr.Headers: map[string]string{"retry-after": "5"},
		expr.Job:     map[string]any{"id": "42"},
		expr.Args:    map[string]any{"count": int64(3)},
	}}
}

func TestValueRead(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name, field, body string
		want              any
		absent            bool
	}{
		{"path", "status", `{"status":"RUNNING"}`, "RUNNING", false},
		{"nested path", "job.state", `{"job":{"state":"DONE"}}`, "DONE", false},
		{"missing path", "nope", `{"status":"RUNNING"}`, nil, true},
		{"null path", "status", `{"status":null}`, nil, true},
		{"big integer keeps its digits", "id", `{"id":12345678901234567}`, int64(12345678901234567), false},
		{"object", "o", `{"o":{"a":1}}`, map[string]any{"a": int64(1)}, false},
		{"wait status", "= int(body.status) / 256", `{"status":768}`, int64(3), false},
		{"derived state", `= body.building ? "BUILDING" : body.result`, `{"building":false,"result":"SUCCESS"}`, "SUCCESS", false},
		{"null result while building", `= body.building ? "BUILDING" : body.result`, `{"building":true,"result":null}`, "BUILDING", false},
		{"combined message", `= body.state + ": " + body.reason`, `{"state":"RUNNING","reason":"waiting for resources"}`, "RUNNING: waiting for resources", false},
		{"conditions", `= body.status.conditions.exists(c, c.type == "Complete" && c.status == "True") ? "done" : "running"`,
			`{"status":{"conditions":[{"type":"Complete","status":"True"}]}}`, "done", false},
		{"absent field is absent", "= body.reason", `{"state":"x"}`, nil, true},
		{"http status", "= status", `{}`, int64(500), false},
		{"header", "= headers['retry-after']", `{}`, "5", false},
		{"job and args", `= job.id + "/" + string(args.count + 1)`, `{}`, "42/4", false},
		{"search a list", `= body.items.filter(i, i.name == "b").map(i, i.id)`, `{"items":[{"name":"a","id":1},{"name":"b","id":2}]}`, []any{int64(2)}, false},
		{"optional", `= body.?x.orValue("none")`, `{}`, "none", false},
		{"cross-type numbers", `= body.n == 3 && body.f > 2`, `{"n":3,"f":2.5}`, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := expr.ParseValue(tc.field, reading, expr.AnyKind)
			if err != nil {
				t.Fatal(err)
			}
			got, ok, err := v.Read(ctx, answer(t, tc.body, 500))
			if err != nil {
				t.Fatal(err)
			}
			if ok == tc.absent {
				t.Fatalf("present = %v, want %v (value %v)", ok, !tc.absent, got)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %#v, want %#v", got, tc.want)
			}
		})
	}
}

func TestCompileErrors(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		scope     expr.Scope
		want      expr.Kind
		offset    int
		msg       string
	}{
		{"syntax", "= body.a +", reading, expr.AnyKind, 11, "Syntax error"},
		{"position on a later line", "= body.a &&\n  body.b ==", reading, expr.AnyKind, 24, "Syntax error"},
		{"unknown function", "= bodyy.a", reading, expr.AnyKind, 3, "unknown name bodyy"},
		{"not available here", "= job.id", expr.Scope{Vars: []string{expr.Args}, Missing: map[string]string{expr.Job: "the job does not exist yet"}},
			expr.AnyKind, 3, "job is not available here: the job does not exist yet"},
		{"wrong type", `= status + 1`, reading, expr.String, 0, "gives a number, but a string is needed"},
		{"wrong argument", `= size(1)`, reading, expr.AnyKind, 7, "no matching overload"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := expr.ParseValue(tc.src, tc.scope, tc.want)
			var e *expr.Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v, want an *expr.Error", err)
			}
			if !strings.Contains(e.Msg, tc.msg) || e.Offset != tc.offset {
				t.Fatalf("error %q at %d, want %q at %d", e.Msg, e.Offset, tc.msg, tc.offset)
			}
		})
	}
}

func TestCostIsBounded(t *testing.T) {
	p, err := expr.Compile(`body.items.map(a, body.items.map(b, body.items.map(c, a + b + c))).size()`, reading, expr.AnyKind)
	if err != nil {
		t.Fatal(err)
	}
	items := make([]any, 200)
	for i := range items {
		items[i] = int64(i)
	}
	_, err = p.Eval(context.Background(), expr.Vars{expr.Body: map[string]any{"items": items}})
	if err == nil || !strings.Contains(err.Error(), "too much work") {
		t.Fatalf("error %v, want the cost limit", err)
	}
}

func TestArgNames(t *testing.T) {
	for _, tc := range []struct {
		src  string
		want []string
		all  bool
	}{
		{`args.a + args["b"]`, []string{"a", "b"}, false},
		{`args.exists(k, k == "x")`, nil, true},
		{`body.items.filter(args, args > 1)`, nil, true}, // a loop variable named args: conservatively all
		{`correlation_id`, nil, false},
	} {
		p, err := expr.Compile(tc.src, reading, expr.AnyKind)
		if err != nil {
			t.Fatal(err)
		}
		names, all := p.ArgNames()
		if !reflect.DeepEqual(names, tc.want) || all != tc.all {
			t.Errorf("%s: args %v all %v, want %v %v", tc.src, names, all, tc.want, tc.all)
		}
	}
}

func TestShellQuoteKeepsArgumentsData(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Fatal("no sh on this machine:", err)
	}
	scope := expr.Scope{Vars: []string{expr.Args}}
	tpl, err := expr.ParseTemplate(`printf '%s' {= shell_quote(args.msg)}`, scope)
	if err != nil {
		t.Fatal(err)
	}
	for _, msg := range []string{"$(id)", "`id`", "it's; rm -rf /", "a\nb", `"$HOME"`, "'"} {
		script, _, err := tpl.Render(context.Background(), expr.Vars{expr.Args: map[string]any{"msg": msg}}, expr.Raw, nil)
		if err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(sh, "-c", script).Output()
		if err != nil {
			t.Fatalf("%q: %v", script, err)
		}
		if string(out) != msg {
			t.Errorf("the shell printed %q for argument %q (script %q)", out, msg, script)
		}
	}
}

func TestJSONQuote(t *testing.T) {
	tpl := expr.MustParseTemplate(`{"branch": {= json_quote(args.b)}}`, expr.Scope{Vars: []string{expr.Args}})
	s, _, err := tpl.Render(context.Background(), expr.Vars{expr.Args: map[string]any{"b": `x", "admin": true, "y": "`}}, expr.Raw, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"branch": "x\", \"admin\": true, \"y\": \""}`; s != want {
		t.Fatalf("got %s, want %s", s, want)
	}
}

func TestTemplates(t *testing.T) {
	scope := expr.Scope{Vars: []string{expr.Args, expr.CorrelationID, expr.Job}, Secrets: true}
	vars := expr.Vars{
		expr.Args:          map[string]any{"name": "a b/c", "n": int64(2)},
		expr.CorrelationID: "jb-1",
		expr.Job:           map[string]any{"id": "7"},
	}
	secrets := func(r expr.SecretRef) (string, error) { return "s3cret:" + r.Env + r.File, nil }
	path := func(_, v string) (string, error) { return url.PathEscape(v), nil }
	for _, tc := range []struct {
		src, want string
		esc       expr.Escaper
		missing   bool
	}{
		{"/jobs/{job.id}/{args.name}", "/jobs/7/a%20b%2Fc", path, false},
		{"{= args.n * 10}", "20", expr.Raw, false},
		{"{args.absent}", "", expr.Raw, true},
		{"x-{args.absent}-y", "x--y", expr.Raw, false},
		{"Bearer ${TOKEN}", "Bearer s3cret:TOKEN", expr.Raw, false},
		{"${file:/run/secrets/t}", "s3cret:/run/secrets/t", expr.Raw, false},
		{"${{ github.ref }} and { json } and {{x}}", "${{ github.ref }} and { json } and {{x}}", expr.Raw, false},
		{`{= {"a": "}"}.a}`, "}", expr.Raw, false},
		{"{correlation_id}", "jb-1", expr.Raw, false},
	} {
		t.Run(tc.src, func(t *testing.T) {
			tpl, err := expr.ParseTemplate(tc.src, scope)
			if err != nil {
				if tc.src == "{args.absent}" || strings.Contains(tc.src, "{json}") {
					t.Fatal(err)
				}
				t.Fatal(err)
			}
			got, missing, err := tpl.Render(context.Background(), vars, tc.esc, secrets)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want || missing != tc.missing {
				t.Fatalf("got %q missing %v, want %q %v", got, missing, tc.want, tc.missing)
			}
		})
	}
}

func TestTemplateErrors(t *testing.T) {
	scope := expr.Scope{Vars: []string{expr.Args, expr.CorrelationID}, Missing: map[string]string{expr.Job: "the job does not exist yet"}}
	for _, tc := range []struct{ src, msg string }{
		{"/jobs/{job.id}", "cannot be filled here: the job does not exist yet"},
		{"{arg.x}", "did you mean {args.x}?"},
		{"{correlationid}", "did you mean {correlation_id}?"},
		{"{json}", "unknown placeholder {json}"},
		{"{= args.x +", "unterminated {= expression"},
		{"{= args.x + }", "Syntax error"},
		{"${TOKEN}", ""},
	} {
		_, err := expr.ParseTemplate(tc.src, scope)
		if tc.msg == "" {
			if err != nil {
				t.Errorf("%s: %v (without Secrets, ${...} is text)", tc.src, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: error %v, want %q", tc.src, err, tc.msg)
		}
	}
}

func TestTemplateValueKeepsTypes(t *testing.T) {
	scope := expr.Scope{Vars: []string{expr.Args}}
	vars := expr.Vars{expr.Args: map[string]any{"n": int64(2), "tags": []any{"a"}}}
	for src, want := range map[string]any{
		"{args.n}":           int64(2),
		"{= args.n > 1}":     true,
		"{args.tags}":        []any{"a"},
		"n={args.n}":         "n=2",
		`{= {"k": args.n} }`: map[string]any{"k": int64(2)},
	} {
		got, _, err := expr.MustParseTemplate(src, scope).Value(context.Background(), vars)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: got %#v, want %#v", src, got, want)
		}
	}
}
