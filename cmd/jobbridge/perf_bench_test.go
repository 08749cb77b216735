package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/jobbridge/jobbridge/adapters"
	"github.com/jobbridge/jobbridge/catalog"
	"github.com/jobbridge/jobbridge/internal/fakes/jobapi"
	"github.com/jobbridge/jobbridge/internal/pgtest"
	"github.com/jobbridge/jobbridge/mapping"
	"github.com/jobbridge/jobbridge/taskclient"
)

// BenchmarkPerf measures, side by side in one run, each row of the
// performance table (issue 14) against its floor or peer measured in the
// same run on the same disk:
//
//	go test -run '^$' -bench BenchmarkPerf -benchtime 1x ./cmd/jobbridge/   (make bench-perf)
//
// Every server is a real `jobbridge serve` process built from the tree, at
// its default log level, answering over loopback HTTP; the REST job API fake
// runs in the benchmark process behind a request log, and a bare go-sdk
// server (this test binary run again, see init) is the floor of tasks/get.
// SQLite stores are files in a temporary directory (synchronous=FULL);
// PostgreSQL is the package's throwaway server (internal/pgtest, which runs
// with fsync off: its figures show CPU and round trips, not disk).
//
// The sub-benchmarks, each also runnable alone (-bench BenchmarkPerf/sweep-sqlite):
//
//	raw-sqlite, raw-postgres  the floors: raw single-row commits, insert+update per task, 32 rows per commit
//	create-sqlite, -postgres  tools/call → CreateTaskResult at c=32, and the rate at which jobs are submitted
//	live-sqlite, -postgres    the creation rate on an empty store and with N live tasks of the same principal
//	get-store                 tasks/get served from the store, c=1 and c=32, against the bare go-sdk server
//	get-observe               tasks/get that observes the backend (refresh_interval 1ms), c=1 and c=32
//	sweep-sqlite, -postgres   N live tasks nobody polls: how long until the sweep has observed each
//
// Each reports its figures with b.ReportMetric; BenchmarkPerf then prints
// the table in Markdown, ratios included. Sizes and durations come from the
// environment: JOBBRIDGE_PERF_WINDOW (each measured window, default 5s),
// JOBBRIDGE_PERF_LIVE (live tasks pre-filled, default 20000),
// JOBBRIDGE_PERF_SWEEP (unpolled tasks, default 10000) and
// JOBBRIDGE_PERF_SWEEP_CAP (how long the sweep is watched, default 30s).
// Pre-filled tasks are real: their jobs are started on the fake through the
// REST adapter and their rows written with the store's Create.
func BenchmarkPerf(b *testing.B) {
	e := newPerfEnv(b)
	b.Run("raw-sqlite", e.rawSQLite)
	b.Run("raw-postgres", e.rawPostgres)
	b.Run("create-sqlite", func(b *testing.B) { e.create(b, "sqlite") })
	b.Run("create-postgres", func(b *testing.B) { e.create(b, "postgres") })
	b.Run("live-sqlite", func(b *testing.B) { e.liveTasks(b, "sqlite") })
	b.Run("live-postgres", func(b *testing.B) { e.liveTasks(b, "postgres") })
	b.Run("get-store", e.getStore)
	b.Run("get-observe", e.getObserve)
	b.Run("sweep-sqlite", func(b *testing.B) { e.sweep(b, "sqlite") })
	b.Run("sweep-postgres", func(b *testing.B) { e.sweep(b, "postgres") })
	e.res.print(os.Stdout, e)
}

// Concurrency of the c=32 rows, and the warm-up before each window.
const (
	perfConc   = 32
	perfWarmUp = time.Second
)

// bareServerEnv, set to a listen address, makes the test binary serve the
// bare go-sdk server instead of running tests (see init).
const bareServerEnv = "JOBBRIDGE_PERF_BARE_LISTEN"

func init() {
	if addr := os.Getenv(bareServerEnv); addr != "" {
		if err := serveBare(addr); err != nil {
			fmt.Fprintln(os.Stderr, "bare server:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
}

// bareParams and bareTask are the bare server's tasks/get: the same request
// and a constant answer of the same shape as jobbridge's.
type bareParams struct {
	mcp.ParamsBase
	TaskID string `json:"taskId"`
}

type bareTask struct {
	mcp.ResultBase
	ResultType     string `json:"resultType"`
	TaskID         string `json:"taskId"`
	Status         string `json:"status"`
	StatusMessage  string `json:"statusMessage"`
	CreatedAt      string `json:"createdAt"`
	LastUpdatedAt  string `json:"lastUpdatedAt"`
	TTLMs          int64  `json:"ttlMs"`
	PollIntervalMs int64  `json:"pollIntervalMs"`
}

// serveBare serves a go-sdk server with one custom method, tasks/get, over
// stateless Streamable HTTP, as jobbridge serves its endpoint.
func serveBare(addr string) error {
	s := mcp.NewServer(&mcp.Implementation{Name: "bare", Version: "0"}, nil)
	created := time.Now().UTC().Format("2006-01-02T15:04:05.000Z")
	err := mcp.AddReceivingCustomMethod(s, "tasks/get", func(_ context.Context, _ *mcp.ServerSession, p *bareParams) (*bareTask, error) {
		return &bareTask{ResultType: "complete", TaskID: p.TaskID, Status: "working", StatusMessage: "running",
			CreatedAt: created, LastUpdatedAt: created, TTLMs: 7_200_000, PollIntervalMs: 60_000}, nil
	})
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: true}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
	return http.ListenAndServe(addr, mux)
}

// perfCatalog has two tools running the same hour-long job on the fake:
// long_job's polls are served from the store (refresh_interval 10m),
// observed_job's polls each observe the backend.
const perfCatalog = `version: 1
server:
  name: jobbridge-perf
limits:
  max_live_tasks: 10000000
  creates_per_minute: 100000000
  gets_per_second: 100000000
backends:
  jobs:
    type: rest
    base_url: %s
    allow_networks: [127.0.0.0/8]
tools:
  - name: long_job
    description: Runs for the given number of seconds; polls are served from the store.
    backend: jobs
    task: optional
    poll_interval: 1m
    refresh_interval: 10m
    ttl: 2h
    input_schema: &schema
      type: object
      properties:
        seconds: {type: number, minimum: 0}
        label: {type: string}
      required: [seconds]
    job: &job
      start:
        path: /jobs
        body: {duration_seconds: "{args.seconds}", output: "done {args.label}", correlation_id: "{correlation_id}"}
      job_id: {field: id}
      status:
        path: /jobs/{job.id}
        field: status
        states: {queued: working, running: working, succeeded: succeeded, failed: tool_error, error: failed, cancelled: cancelled}
        message: message
        result: {text: result.text}
      cancel: {path: "/jobs/{job.id}/cancel"}
      find:
        path: /jobs
        query: {correlation_id: "{correlation_id}"}
        field: jobs.0.id
  - name: observed_job
    description: The same job; every poll observes the backend.
    backend: jobs
    task: optional
    poll_interval: 100ms
    refresh_interval: 1ms
    ttl: 2h
    input_schema: *schema
    job: *job
`

// hourJob is the arguments of a job that outlives the benchmark.
var hourJob = map[string]any{"seconds": 3600, "label": "perf"}

// perfEnv is what the sub-benchmarks share: the binary, the fake and its
// request log, the catalog, the HTTP client and the results.
type perfEnv struct {
	bin         string
	catalogPath string
	cat         *catalog.Catalog
	log         *jobLog
	hc          *http.Client
	res         *perfResults

	window, sweepCap time.Duration
	live, sweepN     int
}

func newPerfEnv(b *testing.B) *perfEnv {
	e := &perfEnv{
		bin:      buildBinary(b),
		res:      &perfResults{m: map[string]float64{}},
		window:   envDuration(b, "JOBBRIDGE_PERF_WINDOW", 5*time.Second),
		sweepCap: envDuration(b, "JOBBRIDGE_PERF_SWEEP_CAP", 30*time.Second),
		live:     envInt(b, "JOBBRIDGE_PERF_LIVE", 20000),
		sweepN:   envInt(b, "JOBBRIDGE_PERF_SWEEP", 10000),
	}
	e.log = &jobLog{next: jobapi.New(nil), seen: map[string]time.Time{}}
	fake := httptest.NewUnstartedServer(e.log)
	fake.Config.ConnState = e.log.connState
	fake.Start()
	b.Cleanup(fake.Close)
	e.catalogPath = filepath.Join(b.TempDir(), "perf.yaml")
	if err := os.WriteFile(e.catalogPath, fmt.Appendf(nil, perfCatalog, fake.URL), 0o600); err != nil {
		b.Fatal(err)
	}
	cat, err := loadCatalog(e.catalogPath, io.Discard)
	if err != nil {
		b.Fatalf("loading the perf catalog: %v", err)
	}
	e.cat = cat
	// Enough idle connections for every client worker: the default
	// transport keeps 2 per host and would open a connection per request.
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns, tr.MaxIdleConnsPerHost = 4*perfConc, 4*perfConc
	e.hc = &http.Client{Transport: tr}
	b.Cleanup(tr.CloseIdleConnections)
	return e
}

// storeDSN returns a new empty store of the given kind for b.
func storeDSN(b *testing.B, kind string) string {
	if kind == "postgres" {
		return pgtest.Shared(b).NewDatabase(b)
	}
	return "sqlite:" + filepath.Join(b.TempDir(), "tasks.db")
}

// rawSQLite measures the floors of SQLite on the disk the stores use, with
// the store's settings (WAL, synchronous=FULL, one writer connection).
func (e *perfEnv) rawSQLite(b *testing.B) {
	for b.Loop() {
		path := filepath.Join(b.TempDir(), "raw.db")
		db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_txlock=immediate")
		if err != nil {
			b.Fatal(err)
		}
		db.SetMaxOpenConns(1)
		ctx := b.Context()
		mustExec(b, db, `CREATE TABLE raw_tasks (key BLOB PRIMARY KEY, principal TEXT NOT NULL, status TEXT NOT NULL, body BLOB, version INTEGER NOT NULL DEFAULT 0)`)
		body := randomBytes(512)
		var seq int
		key := func() []byte { seq++; k := sha256.Sum256(strconv.AppendInt(nil, int64(seq), 10)); return k[:] }
		insert := func(q interface {
			ExecContext(context.Context, string, ...any) (sql.Result, error)
		}, k []byte) error {
			_, err := q.ExecContext(ctx, `INSERT INTO raw_tasks (key, principal, status, body) VALUES (?, '', 'working', ?)`, k, body)
			return err
		}
		commits := timed(e.window, func() (int, error) { return 1, insert(db, key()) })
		tasks := timed(e.window, func() (int, error) {
			k := key()
			if err := insert(db, k); err != nil {
				return 0, err
			}
			_, err := db.ExecContext(ctx, `UPDATE raw_tasks SET status = 'working', body = ?, version = version + 1 WHERE key = ? AND version = 0`, body, k)
			return 1, err
		})
		rows := timed(e.window, func() (int, error) {
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				return 0, err
			}
			for range 32 {
				if err := insert(tx, key()); err != nil {
					tx.Rollback()
					return 0, err
				}
			}
			return 32, tx.Commit()
		})
		db.Close()
		for _, r := range []timedResult{commits, tasks, rows} {
			if r.err != nil {
				b.Fatal(r.err)
			}
		}
		e.res.report(b, "raw-sqlite", "commits/s", commits.rate())
		e.res.report(b, "raw-sqlite", "insert+update/s", tasks.rate())
		e.res.report(b, "raw-sqlite", "rows/s@32", rows.rate())
	}
}

// rawPostgres measures PostgreSQL's floor on the same server the stores use:
// one task as an INSERT then an UPDATE (two commits), from 32 connections.
func (e *perfEnv) rawPostgres(b *testing.B) {
	for b.Loop() {
		ctx := b.Context()
		pool, err := pgxpool.New(ctx, pgtest.Shared(b).NewDatabase(b)+"&pool_max_conns=32")
		if err != nil {
			b.Fatal(err)
		}
		if _, err := pool.Exec(ctx, `CREATE TABLE raw_tasks (key bytea PRIMARY KEY, principal text NOT NULL, status text NOT NULL, body bytea, version bigint NOT NULL DEFAULT 0)`); err != nil {
			b.Fatal(err)
		}
		body := randomBytes(512)
		var seq atomic.Int64
		l := drive(b, perfConc, perfWarmUp, e.window, func(int) error {
			k := sha256.Sum256(strconv.AppendInt(nil, seq.Add(1), 10))
			if _, err := pool.Exec(ctx, `INSERT INTO raw_tasks (key, principal, status, body) VALUES ($1, '', 'working', $2)`, k[:], body); err != nil {
				return err
			}
			_, err := pool.Exec(ctx, `UPDATE raw_tasks SET status = 'working', body = $2, version = version + 1 WHERE key = $1 AND version = 0`, k[:], body)
			return err
		})
		pool.Close()
		e.res.report(b, "raw-postgres", "insert+update/s", l.rate())
	}
}

// create measures tools/call → CreateTaskResult from 32 clients on a new
// store, and the sustained rate: tasks created and their jobs submitted,
// from the first call until the fake received the last submission.
func (e *perfEnv) create(b *testing.B, kind string) {
	for b.Loop() {
		srv := e.serve(b, storeDSN(b, kind), "--sweep-interval", "1h")
		c := e.client(srv.url)
		posts0, _ := e.log.submissions()
		calls0, conns0 := e.log.calls()
		var created atomic.Int64
		start := time.Now()
		l := drive(b, perfConc, perfWarmUp, e.window, func(int) error {
			if _, err := perfCreate(b.Context(), c, "long_job"); err != nil {
				return err
			}
			created.Add(1)
			return nil
		})
		last := e.awaitSubmissions(b, posts0, created.Load())
		calls, conns := e.log.calls()
		srv.stop(b)
		row := "create-" + kind
		e.res.report(b, row, "submitted/s", float64(created.Load())/last.Sub(start).Seconds())
		e.res.report(b, row, "new-conns/backend-call", float64(conns-conns0)/float64(calls-calls0))
		e.res.report(b, row, "log-lines/create", float64(srv.logLines())/float64(created.Load()))
		e.res.report(b, row, "answered/s", l.rate())
		e.res.report(b, row, "p50-ms", ms(l.p(50)))
		e.res.report(b, row, "p99-ms", ms(l.p(99)))
	}
}

// awaitSubmissions waits until the fake has received n job submissions
// more than posts0, and a moment more for the servers to record the last
// ones. It returns when the last submission was answered.
func (e *perfEnv) awaitSubmissions(b *testing.B, posts0 int, n int64) time.Time {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		posts, last := e.log.submissions()
		if int64(posts-posts0) >= n {
			time.Sleep(500 * time.Millisecond)
			return last
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d jobs were never submitted", n-int64(posts-posts0), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// liveTasks measures the creation rate at c=32 on an empty store, then again
// after e.live live tasks of the same principal were added.
func (e *perfEnv) liveTasks(b *testing.B, kind string) {
	for b.Loop() {
		dsn := storeDSN(b, kind)
		rate := func() (float64, int64) {
			srv := e.serve(b, dsn, "--sweep-interval", "1h")
			defer srv.stop(b)
			c := e.client(srv.url)
			posts0, _ := e.log.submissions()
			var n atomic.Int64
			l := drive(b, perfConc, perfWarmUp, e.window, func(int) error {
				_, err := perfCreate(b.Context(), c, "long_job")
				n.Add(1)
				return err
			})
			// Stopping with submissions in flight would leave tasks for
			// the next server to reconcile, and slow it.
			e.awaitSubmissions(b, posts0, n.Load())
			return l.rate(), n.Load()
		}
		at0, made := rate()
		now := time.Now()
		e.prefill(b, dsn, e.live, &now)
		atN, _ := rate()
		row := "live-" + kind
		e.res.report(b, row, "creates/s@0", at0)
		e.res.report(b, row, "creates/s@N", atN)
		e.res.report(b, row, "live-tasks", float64(e.live)+float64(made))
	}
}

// getStore measures tasks/get of working tasks whose observation is fresh
// (served from the store, no backend call) against the bare go-sdk server's
// tasks/get, c=1 then c=32, alternating the two servers.
func (e *perfEnv) getStore(b *testing.B) {
	for b.Loop() {
		srv := e.serve(b, storeDSN(b, "sqlite"), "--sweep-interval", "1h")
		c := e.client(srv.url)
		ids := e.runningTasks(b, c, "long_job", perfConc)
		bare := e.client(startBare(b).url)
		calls0 := e.log.statusCalls()
		var gets atomic.Int64
		get := func(c *taskclient.Client, count bool) func(int) error {
			return func(w int) error {
				_, err := c.GetTask(b.Context(), ids[w])
				if count {
					gets.Add(1)
				}
				return err
			}
		}
		j1 := drive(b, 1, perfWarmUp, e.window, get(c, true))
		b1 := drive(b, 1, perfWarmUp, e.window, get(bare, false))
		j32 := drive(b, perfConc, perfWarmUp, e.window, get(c, true))
		b32 := drive(b, perfConc, perfWarmUp, e.window, get(bare, false))
		calls := e.log.statusCalls() - calls0
		srv.stop(b)
		e.res.report(b, "get-store", "log-lines/get", float64(srv.logLines())/float64(gets.Load()))
		for _, r := range []struct {
			name string
			l    load
		}{{"c1", j1}, {"bare-c1", b1}, {"c32", j32}, {"bare-c32", b32}} {
			e.res.report(b, "get-store", r.name+"-p50-ms", ms(r.l.p(50)))
			e.res.report(b, "get-store", r.name+"-p99-ms", ms(r.l.p(99)))
			e.res.report(b, "get-store", r.name+"-gets/s", r.l.rate())
		}
		e.res.report(b, "get-store", "backend-calls/get", float64(calls)/float64(gets.Load()))
	}
}

// getObserve measures tasks/get of tasks whose every poll observes the
// backend: one task polled by one client, then 32 tasks by 32 clients.
func (e *perfEnv) getObserve(b *testing.B) {
	for b.Loop() {
		srv := e.serve(b, storeDSN(b, "sqlite"), "--sweep-interval", "1h")
		c := e.client(srv.url)
		ids := e.runningTasks(b, c, "observed_job", perfConc)
		calls0 := e.log.statusCalls()
		all0, conns0 := e.log.calls()
		var gets atomic.Int64
		get := func(w int) error {
			gets.Add(1)
			_, err := c.GetTask(b.Context(), ids[w])
			return err
		}
		l1 := drive(b, 1, perfWarmUp, e.window, get)
		l32 := drive(b, perfConc, perfWarmUp, e.window, get)
		calls := e.log.statusCalls() - calls0
		all, conns := e.log.calls()
		srv.stop(b)
		e.res.report(b, "get-observe", "c1-gets/s", l1.rate())
		e.res.report(b, "get-observe", "c1-p50-ms", ms(l1.p(50)))
		e.res.report(b, "get-observe", "c32-gets/s", l32.rate())
		e.res.report(b, "get-observe", "c32-p50-ms", ms(l32.p(50)))
		e.res.report(b, "get-observe", "c32-p99-ms", ms(l32.p(99)))
		e.res.report(b, "get-observe", "backend-calls/get", float64(calls)/float64(gets.Load()))
		e.res.report(b, "get-observe", "new-conns/backend-call", float64(conns-conns0)/float64(all-all0))
	}
}

// sweep pre-fills e.sweepN live tasks that were never observed, starts a
// server with the default sweep interval and nobody polling, and watches the
// fake's request log until every task's job has been asked about (or
// e.sweepCap has passed). The store is then checked to hold an observation
// for each task the log saw.
func (e *perfEnv) sweep(b *testing.B, kind string) {
	row := "sweep-" + kind
	for b.Loop() {
		dsn := storeDSN(b, kind)
		tasks := e.prefill(b, dsn, e.sweepN, nil)
		jobs := make([]string, len(tasks))
		for i, t := range tasks {
			jobs[i] = t.job
		}
		srv := e.serve(b, dsn)
		start := srv.started
		var seen int
		var last time.Time
		for {
			seen, last = e.log.firstSeen(jobs)
			if seen == len(jobs) || time.Since(start) > e.sweepCap {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		// The fake answers before the observation is written: give the
		// writes a moment before counting them in the store.
		var recorded int
		for wait := time.Now().Add(10 * time.Second); ; {
			if recorded = observedInStore(b, dsn, tasks); recorded >= seen || time.Now().After(wait) {
				break
			}
			time.Sleep(250 * time.Millisecond)
		}
		srv.stop(b)
		cover := math.NaN()
		if seen == len(jobs) {
			cover = last.Sub(start).Seconds()
		}
		rate := 0.0
		if seen > 0 {
			rate = float64(seen) / last.Sub(start).Seconds()
		}
		e.res.report(b, row, "observations/s", rate)
		e.res.report(b, row, "cover-s", cover)
		e.res.report(b, row, "unobserved", float64(len(jobs)-seen))
		e.res.report(b, row, "recorded", float64(recorded))
	}
}

// prefilled is a task written by prefill.
type prefilled struct {
	key mapping.Key
	job string
}

// prefill adds n live long_job tasks of the anonymous principal (the one
// every unauthenticated client acts as) to the store at dsn while no server
// runs: each with a real job started on the fake through the REST adapter,
// in the state the bridge leaves after a submission, observed at observed
// (nil: never observed).
func (e *perfEnv) prefill(b *testing.B, dsn string, n int, observed *time.Time) []prefilled {
	ctx := b.Context()
	set, err := buildAdapters(e.cat, adapterOptions{getenv: os.LookupEnv, logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	adapter, tool := set["jobs"], e.cat.Tool("long_job")
	store, err := openStore(ctx, dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	out := make([]prefilled, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	var failed atomic.Bool
	for range 16 {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n || failed.Load() {
					return
				}
				id, corr := hex.EncodeToString(randomBytes(24)), hex.EncodeToString(randomBytes(8))
				ref, err := adapter.Start(ctx, adapters.StartRequest{Tool: tool.Name, Arguments: hourJob, CorrelationID: corr})
				if err != nil {
					failed.Store(true)
					b.Errorf("starting a job: %v", err)
					return
				}
				refJSON, _ := json.Marshal(ref)
				now := time.Now().UTC()
				t := &mapping.Task{
					Key: mapping.KeyOf(id), Tool: tool.Name, Backend: tool.Backend,
					ArgsDigest: hex.EncodeToString(randomBytes(32)), ServerBuild: "perf", CatalogRevision: e.cat.Revision,
					JobRef: refJSON, CorrelationID: corr,
					Phase: mapping.PhaseSubmitted, Status: mapping.StatusWorking,
					StatusMessage: fmt.Sprintf("job %s submitted to %s", ref.ID, tool.Backend),
					CreatedAt:     now, UpdatedAt: now, TTL: tool.TTL, ExpiresAt: now.Add(tool.TTL),
					PollInterval: tool.PollInterval, SubmittedAt: &now, ObservedAt: observed,
				}
				if err := store.Create(ctx, t, mapping.CreateLimits{}); err != nil { // no limits: a pre-fill
					failed.Store(true)
					b.Errorf("pre-filling the store: %v", err)
					return
				}
				out[i] = prefilled{key: t.Key, job: ref.ID}
			}
		})
	}
	wg.Wait()
	if failed.Load() {
		b.FailNow()
	}
	return out
}

// observedInStore counts the tasks whose row holds an observation. It may
// run while a server uses the store.
func observedInStore(b *testing.B, dsn string, tasks []prefilled) int {
	store, err := openToolStore(b.Context(), dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	n := 0
	for _, t := range tasks {
		row, err := store.Get(b.Context(), t.key, "", time.Now())
		if err != nil {
			b.Fatalf("reading a pre-filled task: %v", err)
		}
		if row.ObservedAt != nil {
			n++
		}
	}
	return n
}

// runningTasks creates n tasks of the tool and polls each until it reports
// its job running (so that the next polls find a fresh observation).
func (e *perfEnv) runningTasks(b *testing.B, c *taskclient.Client, tool string, n int) []string {
	ids := make([]string, n)
	for i := range ids {
		id, err := perfCreate(b.Context(), c, tool)
		if err != nil {
			b.Fatal(err)
		}
		ids[i] = id
	}
	for _, id := range ids {
		deadline := time.Now().Add(30 * time.Second)
		for {
			t, err := c.GetTask(b.Context(), id)
			if err != nil {
				b.Fatal(err)
			}
			if strings.HasPrefix(t.StatusMessage, "running") {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("task never reported its job running: %s %q", t.Status, t.StatusMessage)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	return ids
}

func perfCreate(ctx context.Context, c *taskclient.Client, tool string) (string, error) {
	res, err := c.CallTool(ctx, tool, hourJob, nil)
	if err != nil {
		return "", err
	}
	if res.Task == nil {
		return "", fmt.Errorf("tools/call %s answered no task: %+v", tool, res)
	}
	return res.Task.TaskID, nil
}

func (e *perfEnv) client(url string) *taskclient.Client {
	return &taskclient.Client{URL: url, HTTPClient: e.hc, Tasks: true}
}

// proc is a server process started by the benchmark.
type proc struct {
	cmd     *exec.Cmd
	url     string // its MCP endpoint
	logPath string
	started time.Time
	done    chan struct{}
}

// serve starts `jobbridge serve` on the store at dsn, at the default log
// level, with the given extra flags.
func (e *perfEnv) serve(b *testing.B, dsn string, flags ...string) *proc {
	addr := freeAddr(b)
	args := append([]string{"serve", "--config", e.catalogPath, "--store", dsn, "--listen", addr}, flags...)
	return startProc(b, exec.Command(e.bin, args...), addr)
}

// startBare starts the bare go-sdk server (this test binary, see init).
func startBare(b *testing.B) *proc {
	addr := freeAddr(b)
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), bareServerEnv+"="+addr)
	p := startProc(b, cmd, addr)
	b.Cleanup(func() { p.stop(b) })
	return p
}

func startProc(b *testing.B, cmd *exec.Cmd, addr string) *proc {
	p := &proc{cmd: cmd, url: "http://" + addr + "/mcp", logPath: filepath.Join(b.TempDir(), "server.log"), done: make(chan struct{})}
	logFile, err := os.Create(p.logPath)
	if err != nil {
		b.Fatal(err)
	}
	defer logFile.Close()
	cmd.Stdout, cmd.Stderr = logFile, logFile
	p.started = time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	go func() { cmd.Wait(); close(p.done) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err == nil {
			resp.Body.Close()
			return p
		}
		select {
		case <-p.done:
			b.Fatalf("%s exited: %s", cmd.Path, p.logTail())
		default:
		}
		if time.Now().After(deadline) {
			p.stop(b)
			b.Fatalf("%s never became ready: %s", cmd.Path, p.logTail())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop ends the process with SIGTERM (a graceful shutdown that closes the
// store), or SIGKILL after 15 s. Calling it again does nothing.
func (p *proc) stop(b *testing.B) {
	select {
	case <-p.done:
		return
	default:
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
		b.Errorf("%s did not stop within 15s: %s", p.cmd.Path, p.logTail())
	}
	// Errors and warnings may explain a figure: show a few.
	data, _ := os.ReadFile(p.logPath)
	var bad []string
	for line := range strings.Lines(string(data)) {
		if strings.Contains(line, "level=ERROR") || strings.Contains(line, "level=WARN") {
			bad = append(bad, strings.TrimSpace(line))
		}
	}
	if len(bad) > 0 {
		b.Logf("%s logged %d warnings and errors, first: %s", filepath.Base(p.cmd.Path), len(bad), strings.Join(bad[:min(3, len(bad))], "\n"))
	}
}

// logLines counts the lines the process has logged.
func (p *proc) logLines() int {
	data, _ := os.ReadFile(p.logPath)
	return strings.Count(string(data), "\n")
}

func (p *proc) logTail() string {
	data, _ := os.ReadFile(p.logPath)
	return string(data[max(0, len(data)-4096):])
}

func freeAddr(b *testing.B) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// jobLog wraps the fake and records what the servers asked of it: job
// submissions, and status reads by job with the time of the first.
type jobLog struct {
	next http.Handler

	mu       sync.Mutex
	posts    int
	lastPost time.Time
	gets     int
	seen     map[string]time.Time
	conns    int // TCP connections accepted
}

func (l *jobLog) connState(_ net.Conn, s http.ConnState) {
	if s == http.StateNew {
		l.mu.Lock()
		l.conns++
		l.mu.Unlock()
	}
}

// calls returns how many requests of any kind the fake answered until now
// (submissions and status reads), and on how many TCP connections.
func (l *jobLog) calls() (calls, conns int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.posts + l.gets, l.conns
}

func (l *jobLog) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	l.next.ServeHTTP(w, r)
	now := time.Now()
	id, isJob := strings.CutPrefix(r.URL.Path, "/jobs/")
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/jobs":
		l.posts++
		l.lastPost = now
	case r.Method == http.MethodGet && isJob && !strings.Contains(id, "/"):
		l.gets++
		if _, ok := l.seen[id]; !ok {
			l.seen[id] = now
		}
	}
}

// submissions returns how many jobs were submitted, and when the last was.
func (l *jobLog) submissions() (int, time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.posts, l.lastPost
}

// statusCalls returns how many job status reads the fake answered.
func (l *jobLog) statusCalls() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.gets
}

// firstSeen returns how many of the jobs have had their status read, and
// when the last of those was first read.
func (l *jobLog) firstSeen(jobs []string) (int, time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var n int
	var last time.Time
	for _, j := range jobs {
		if at, ok := l.seen[j]; ok {
			n++
			if at.After(last) {
				last = at
			}
		}
	}
	return n, last
}

// load is what drive measured: the latencies of the operations that started
// within the window.
type load struct {
	window time.Duration
	lat    []time.Duration
}

func (l load) rate() float64 { return float64(len(l.lat)) / l.window.Seconds() }

func (l load) p(q int) time.Duration { return percentile(l.lat, q) }

// drive runs op from c workers (op gets the worker's number) for warm and
// then window; the operations that start within the window are measured. An
// error stops its worker and fails b.
func drive(b *testing.B, c int, warm, window time.Duration, op func(worker int) error) load {
	from := time.Now().Add(warm)
	until := from.Add(window)
	lats := make([][]time.Duration, c)
	var failed atomic.Bool
	var wg sync.WaitGroup
	for w := range c {
		wg.Go(func() {
			for {
				t0 := time.Now()
				if !t0.Before(until) {
					return
				}
				if err := op(w); err != nil {
					if !failed.Swap(true) {
						b.Errorf("worker %d: %v", w, err)
					}
					return
				}
				if !t0.Before(from) {
					lats[w] = append(lats[w], time.Since(t0))
				}
			}
		})
	}
	wg.Wait()
	return load{window: window, lat: slices.Concat(lats...)}
}

// timedResult is what timed measured.
type timedResult struct {
	n       int
	elapsed time.Duration
	err     error
}

func (r timedResult) rate() float64 { return float64(r.n) / r.elapsed.Seconds() }

// timed repeats op, which returns how many units it did, for d.
func timed(d time.Duration, op func() (int, error)) timedResult {
	start := time.Now()
	var r timedResult
	for time.Since(start) < d {
		n, err := op()
		if err != nil {
			r.err = err
			break
		}
		r.n += n
	}
	r.elapsed = time.Since(start)
	return r
}

func mustExec(b *testing.B, db *sql.DB, stmt string) {
	if _, err := db.ExecContext(b.Context(), stmt); err != nil {
		b.Fatal(err)
	}
}

func randomBytes(n int) []byte {
	p := make([]byte, n)
	rand.Read(p)
	return p
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func envInt(b *testing.B, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		b.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

func envDuration(b *testing.B, name string, def time.Duration) time.Duration {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		b.Fatalf("%s=%q: want a positive duration such as 5s", name, v)
	}
	return d
}

// perfResults collects the figures of one BenchmarkPerf run by row and
// metric, for the table.
type perfResults struct {
	mu sync.Mutex
	m  map[string]float64
}

// report records a figure and reports it as a metric of b.
func (r *perfResults) report(b *testing.B, row, unit string, v float64) {
	b.ReportMetric(v, unit)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.m[row+" "+unit] = v
}

// get returns a figure, NaN when it was not measured.
func (r *perfResults) get(row, unit string) float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if v, ok := r.m[row+" "+unit]; ok {
		return v
	}
	return math.NaN()
}

// print writes the table of the run in Markdown, with the goals of issue
// 14. Figures that were not measured (a sub-benchmark filtered out or
// failed) show as "–".
func (r *perfResults) print(w io.Writer, e *perfEnv) {
	g := r.get
	type row struct{ what, got, floor, ratio, goal string }
	rows := []row{
		{"sustained task creation, c=32, SQLite",
			fmt.Sprintf("%s/s submitted (tools/call answered %s/s)", count(g("create-sqlite", "submitted/s")), count(g("create-sqlite", "answered/s"))),
			fmt.Sprintf("raw SQLite: %s single-row commits/s, %s tasks/s at 2 commits per task, %s rows/s at 32 rows per commit",
				count(g("raw-sqlite", "commits/s")), count(g("raw-sqlite", "insert+update/s")), count(g("raw-sqlite", "rows/s@32"))),
			fmt.Sprintf("%s single-row commits, %s 2 commits per task", ratio(g("create-sqlite", "submitted/s"), g("raw-sqlite", "commits/s")),
				ratio(g("create-sqlite", "submitted/s"), g("raw-sqlite", "insert+update/s"))),
			"≥ 5,000/s and ≥ 2× single-row commits"},
		{"sustained creation, c=32, PostgreSQL",
			fmt.Sprintf("%s/s submitted (answered %s/s)", count(g("create-postgres", "submitted/s")), count(g("create-postgres", "answered/s"))),
			fmt.Sprintf("raw insert+update %s tasks/s", count(g("raw-postgres", "insert+update/s"))),
			ratio(g("create-postgres", "submitted/s"), g("raw-postgres", "insert+update/s")), "≥ 1×"},
		{fmt.Sprintf("creation rate at 0 / %s live tasks of one principal, SQLite", count(g("live-sqlite", "live-tasks"))),
			fmt.Sprintf("%s/s → %s/s", count(g("live-sqlite", "creates/s@0")), count(g("live-sqlite", "creates/s@N"))),
			"the rate at 0", ratio(g("live-sqlite", "creates/s@N"), g("live-sqlite", "creates/s@0")), "≥ 0.9×"},
		{fmt.Sprintf("creation rate at 0 / %s live tasks of one principal, PostgreSQL", count(g("live-postgres", "live-tasks"))),
			fmt.Sprintf("%s/s → %s/s", count(g("live-postgres", "creates/s@0")), count(g("live-postgres", "creates/s@N"))),
			"the rate at 0", ratio(g("live-postgres", "creates/s@N"), g("live-postgres", "creates/s@0")), "≥ 0.9×"},
		{"`tasks/get` served from the store, c=1, p50 / p99",
			fmt.Sprintf("%s / %s ms (%s backend calls, %s log lines per get)", millis(g("get-store", "c1-p50-ms")), millis(g("get-store", "c1-p99-ms")),
				frac(g("get-store", "backend-calls/get")), frac(g("get-store", "log-lines/get"))),
			fmt.Sprintf("bare go-sdk custom method: %s / %s ms", millis(g("get-store", "bare-c1-p50-ms")), millis(g("get-store", "bare-c1-p99-ms"))),
			fmt.Sprintf("%s / %s", ratio(g("get-store", "c1-p50-ms"), g("get-store", "bare-c1-p50-ms")), ratio(g("get-store", "c1-p99-ms"), g("get-store", "bare-c1-p99-ms"))),
			"≤ 1.1× / ≤ 1.3×; no log line"},
		{"`tasks/get` served from the store, c=32, p50 / p99",
			fmt.Sprintf("%s / %s ms, %s/s", millis(g("get-store", "c32-p50-ms")), millis(g("get-store", "c32-p99-ms")), count(g("get-store", "c32-gets/s"))),
			fmt.Sprintf("bare: %s / %s ms, %s/s", millis(g("get-store", "bare-c32-p50-ms")), millis(g("get-store", "bare-c32-p99-ms")), count(g("get-store", "bare-c32-gets/s"))),
			fmt.Sprintf("%s / %s", ratio(g("get-store", "c32-p50-ms"), g("get-store", "bare-c32-p50-ms")), ratio(g("get-store", "c32-p99-ms"), g("get-store", "bare-c32-p99-ms"))),
			"≤ 1.1× / ≤ 1.3×"},
		{"`tasks/get` that observes the backend, c=1 → c=32",
			fmt.Sprintf("%s/s → %s/s (c=32 p50 %s ms, p99 %s ms; %s backend calls per get, %s new connections per backend call)",
				count(g("get-observe", "c1-gets/s")), count(g("get-observe", "c32-gets/s")), millis(g("get-observe", "c32-p50-ms")), millis(g("get-observe", "c32-p99-ms")),
				frac(g("get-observe", "backend-calls/get")), frac(g("get-observe", "new-conns/backend-call"))),
			"c=1", ratio(g("get-observe", "c32-gets/s"), g("get-observe", "c1-gets/s")), "c=32 ≥ 3× c=1; ≈ 0 new connections"},
		{"`tools/call` → `CreateTaskResult`, c=32, SQLite",
			fmt.Sprintf("%s/s, p50 %s ms, p99 %s ms (%s log lines per call, %s new backend connections per backend call)",
				count(g("create-sqlite", "answered/s")), millis(g("create-sqlite", "p50-ms")), millis(g("create-sqlite", "p99-ms")),
				frac(g("create-sqlite", "log-lines/create")), frac(g("create-sqlite", "new-conns/backend-call"))),
			fmt.Sprintf("bare go-sdk server's tasks/get at c=32: %s/s (the request ceiling of this client and machine; issue 14's peer, the in-memory TypeScript SDK server, is not run here)",
				count(g("get-store", "bare-c32-gets/s"))),
			ratio(g("create-sqlite", "answered/s"), g("get-store", "bare-c32-gets/s")), "no log line; ≈ 0 new connections"},
		{fmt.Sprintf("sweep with %s live tasks nobody polls, SQLite (default sweep interval)", count(float64(e.sweepN))),
			sweepCell(g, "sweep-sqlite", e.sweepCap), "–", "–", "every task observed within one sweep interval"},
		{fmt.Sprintf("sweep with %s live tasks nobody polls, PostgreSQL (default sweep interval)", count(float64(e.sweepN))),
			sweepCell(g, "sweep-postgres", e.sweepCap), "–", "–", "every task observed within one sweep interval"},
	}
	fmt.Fprintf(w, "\nBenchmarkPerf (c=%d, windows of %s after %s of warm-up):\n\n", perfConc, e.window, perfWarmUp)
	fmt.Fprintln(w, "| what | jobbridge | floor or peer in the same run | ratio | goal |")
	fmt.Fprintln(w, "|---|---|---|---|---|")
	for _, r := range rows {
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", r.what, r.got, r.floor, r.ratio, r.goal)
	}
	fmt.Fprintln(w)
}

func sweepCell(g func(row, unit string) float64, row string, cap time.Duration) string {
	rate, unobserved := g(row, "observations/s"), g(row, "unobserved")
	if math.IsNaN(rate) {
		return "–"
	}
	s := fmt.Sprintf("%s observations/s; ", count(rate))
	if unobserved == 0 {
		s += fmt.Sprintf("all observed %.1f s after the server started", g(row, "cover-s"))
	} else {
		s += fmt.Sprintf("%s still unobserved after %s", count(unobserved), cap)
	}
	return s + fmt.Sprintf(" (%s observations recorded in the store)", count(g(row, "recorded")))
}

// count formats a figure as a whole number with thousands separators.
func count(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "–"
	}
	s := strconv.FormatInt(int64(math.Round(v)), 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	if neg {
		s = "-" + s
	}
	return s
}

func millis(v float64) string {
	if math.IsNaN(v) {
		return "–"
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}

func frac(v float64) string {
	if math.IsNaN(v) {
		return "–"
	}
	return strconv.FormatFloat(v, 'f', 3, 64)
}

func ratio(a, b float64) string {
	if math.IsNaN(a) || math.IsNaN(b) || b == 0 {
		return "–"
	}
	return strconv.FormatFloat(a/b, 'f', 2, 64) + "×"
}
