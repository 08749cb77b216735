package bridge_test

import (
	"strings"
	"testing"
	"time"

	"github.com/jobbridge/jobbridge/catalog"
)

// TestCreateRateHoldsAcrossReplicas runs two bridges on one store, as two
// replicas would share a database: creates_per_minute counts the tasks a
// principal created through either, and a new minute allows again.
func TestCreateRateHoldsAcrossReplicas(t *testing.T) {
	const perMinute = 3
	// Early in a minute, so that the calls below share its window.
	clk := &clock{now: time.Now().UTC().Truncate(time.Minute).Add(time.Second)}
	tune := func(c *catalog.Catalog) {
		c.Limits = catalog.Limits{CreatesPerMinute: perMinute, MaxLiveTasks: 100}
		c.Limits.SetDefaults()
	}
	first := newHarness(t, harnessOptions{now: clk.Now, tune: tune})
	// A second writer of the same file: the limit is the store's, not a
	// process's (one SQLite file serves one server; PostgreSQL replicas are
	// tested in mapping/postgres).
	second := newHarness(t, harnessOptions{now: clk.Now, tune: tune, fake: first.fake, storePath: first.storePath, sharedStore: true})

	first.createTask("long_job", nil)
	second.createTask("long_job", nil)
	first.createTask("long_job", nil)
	for _, h := range []*harness{first, second} {
		res, err := h.tasks.CallTool(t.Context(), "long_job", nil, nil)
		if err != nil || res.Result == nil || !res.Result.IsError ||
			!strings.Contains(res.Result.Text(), "too many tasks created: the limit is 3 per minute") {
			t.Errorf("creation past the limit: %v %+v, want an isError result naming the limit", err, res)
		}
	}
	clk.Advance(time.Minute)
	second.createTask("long_job", nil)

	for _, h := range []*harness{first, second} {
		scrapeMetrics(t, h).want(t, 1, "jobbridge_limit_rejections_total", "limit=create_rate")
	}
}
