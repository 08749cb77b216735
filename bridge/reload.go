package bridge

// Reloading the catalog without a restart.
//
// A catalog in effect is a generation: its revision, and its tools with the
// adapters built for them. Reload builds the next generation and makes it
// current at once for new calls and tools/list; the generations before it
// stay, by revision, for the tasks created under them: a task records the
// CatalogRevision it started under, and its observations, answers and
// cancels use that generation's tool and adapter, even after the tool
// changed or left the catalog. A task whose revision this process never
// loaded (another replica created it under a catalog this one has not
// seen, or the process restarted since) uses the current tool of its name.
//
// Replicas reload at different moments (each its own SIGHUP or file
// watch). That stays correct because nothing a replica decides depends on
// the others having the same catalog: the task row carries what a task
// needs (tool, backend, job reference, revision), every transition is a
// conditional write in the shared store, and a replica serves each task
// with the generation of its revision if it has it, else with its tool as
// the replica's current catalog defines it. While they differ, tools/list
// answers with the catalog of the replica that serves the request.
//
// What a reload does not change (it logs a warning when they differ): the
// server block (name, instructions), auth, limits, and the backends' event
// endpoints; they apply at the next start.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/jobbridge/jobbridge/adapters"
	"github.com/jobbridge/jobbridge/catalog"
	"github.com/jobbridge/jobbridge/mapping"
)

// generation is one catalog in effect and its tools.
type generation struct {
	cat   *catalog.Catalog
	tools map[string]*tool
}

// reloadState is the Bridge's record of its generations.
type reloadState struct {
	once    sync.Once
	mu      sync.Mutex // serialises Reload
	current atomic.Pointer[generation]
	// byRevision holds every generation this process loaded.
	byRevision sync.Map // string -> *generation
	reloads    *prometheus.CounterVec
}

// Reload outcomes, the label of jobbridge_catalog_reloads_total.
const (
	ReloadApplied   = "applied"
	ReloadUnchanged = "unchanged"
	ReloadFailed    = "failed"
)

// gen returns the current generation (the catalog New was given until the
// first Reload).
func (b *Bridge) gen() *generation {
	b.reload.once.Do(func() {
		g := &generation{cat: b.cat, tools: b.tools}
		b.reload.current.Store(g)
		b.reload.byRevision.Store(b.cat.Revision, g)
		b.reload.reloads = prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jobbridge_catalog_reloads_total",
			Help: "Catalog reloads (SIGHUP or a changed file with --watch), by outcome: applied, unchanged, failed (the old catalog stays).",
		}, []string{"outcome"})
		for _, o := range []string{ReloadApplied, ReloadUnchanged, ReloadFailed} {
			b.reload.reloads.WithLabelValues(o)
		}
		b.metrics.reg.MustRegister(b.reload.reloads)
	})
	return b.reload.current.Load()
}

// toolNamed returns the current catalog's tool called name, or nil.
func (b *Bridge) toolNamed(name string) *tool { return b.gen().tools[name] }

// currentTools returns the current catalog's tools.
func (b *Bridge) currentTools() map[string]*tool { return b.gen().tools }

// toolOf returns the tool a task runs under: its own revision's tool when
// this process loaded that revision, else the current tool of its name
// (nil when there is none).
func (b *Bridge) toolOf(t *mapping.Task) *tool {
	cur := b.gen()
	if g, ok := b.reload.byRevision.Load(t.CatalogRevision); ok {
		if tl := g.(*generation).tools[t.Tool]; tl != nil {
			return tl
		}
	}
	return cur.tools[t.Tool]
}

// revisionOf is the catalog revision a new task of t records.
func (b *Bridge) revisionOf(t *tool) string {
	if t.revision != "" {
		return t.revision
	}
	return b.cat.Revision
}

// CountReload counts a reload the caller refused before calling Reload (a
// catalog that does not load) as failed, so that
// jobbridge_catalog_reloads_total counts every attempt.
func (b *Bridge) CountReload(outcome string) {
	b.gen()
	b.reload.reloads.WithLabelValues(outcome).Inc()
}

// Reload makes cat, with the adapters built for its backends, the catalog
// of new calls and of tools/list, and tells clients with open sessions
// (notifications/tools/list_changed). It checks the tools first: when one
// cannot be served (no adapter for its backend, an input schema that does
// not resolve), it returns the problems and the current catalog stays. Live
// tasks keep the generation they started under (see the top of this file).
// The adapters of earlier generations are kept, not closed, while the
// process lives: their tasks may still need them.
func (b *Bridge) Reload(cat *catalog.Catalog, adapterSet map[string]adapters.Adapter) error {
	b.reload.mu.Lock()
	defer b.reload.mu.Unlock()
	cur := b.gen()
	if cat.Revision == cur.cat.Revision {
		b.reload.reloads.WithLabelValues(ReloadUnchanged).Inc()
		return nil
	}
	next := &generation{cat: cat, tools: map[string]*tool{}}
	metered := map[string]adapters.Adapter{}
	var errs []error
	for _, ct := range cat.Tools {
		a := adapterSet[ct.Backend]
		if a == nil {
			errs = append(errs, fmt.Errorf("tool %q: no adapter for backend %q", ct.Name, ct.Backend))
			continue
		}
		if metered[ct.Backend] == nil {
			metered[ct.Backend] = meterAdapter(ct.Backend, a, b.metrics, b.tracer, b.log)
		}
		t, err := newTool(ct, metered[ct.Backend])
		if err != nil {
			errs = append(errs, err)
			continue
		}
		t.revision = cat.Revision
		next.tools[ct.Name] = t
	}
	if err := errors.Join(errs...); err != nil {
		b.reload.reloads.WithLabelValues(ReloadFailed).Inc()
		return fmt.Errorf("the catalog %s cannot be served, the current one stays: %w", cat.File, err)
	}
	for _, t := range next.tools {
		b.metrics.knowTool(t.Name, t.Backend, t.Task != catalog.TaskNever)
	}
	b.warnRestartOnly(cur.cat, cat)
	b.reload.byRevision.Store(cat.Revision, next)
	b.reload.current.Store(next)

	// Tools are registered with handlers that resolve the tool at call
	// time, so that every call uses the current generation; re-adding them
	// all sends the sessions one (debounced) list_changed.
	var removed []string
	for name := range cur.tools {
		if next.tools[name] == nil {
			removed = append(removed, name)
		}
	}
	slices.Sort(removed)
	if len(removed) > 0 {
		b.server.RemoveTools(removed...)
	}
	for _, ct := range cat.Tools {
		b.server.AddTool(next.tools[ct.Name].mcpTool(), b.currentHandler(ct.Name))
	}
	b.log.Info("catalog reloaded", "catalog", cat.File, "revision", cat.Revision, "previous", cur.cat.Revision, "tools", len(cat.Tools), "removed", len(removed))
	b.reload.reloads.WithLabelValues(ReloadApplied).Inc()
	return nil
}

// currentHandler serves synchronous calls of the tool called name with the
// current generation's tool.
func (b *Bridge) currentHandler(name string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		t := b.toolNamed(name)
		if t == nil {
			return nil, invalidParams("unknown tool %q", name)
		}
		return b.syncHandler(t)(ctx, req)
	}
}

// newTool resolves a catalog tool's input schema and binds its adapter.
func newTool(ct *catalog.Tool, a adapters.Adapter) (*tool, error) {
	var s jsonschema.Schema
	if err := json.Unmarshal(ct.InputSchema, &s); err != nil {
		return nil, fmt.Errorf("tool %q: input schema: %w", ct.Name, err)
	}
	resolved, err := s.Resolve(nil)
	if err != nil {
		return nil, fmt.Errorf("tool %q: input schema: %w", ct.Name, err)
	}
	var raw map[string]any
	if err := json.Unmarshal(ct.InputSchema, &raw); err != nil {
		return nil, fmt.Errorf("tool %q: input schema: %w", ct.Name, err)
	}
	return &tool{Tool: ct, schema: resolved, raw: raw, adapter: a}, nil
}

// warnRestartOnly logs the parts of a new catalog a reload does not apply.
func (b *Bridge) warnRestartOnly(old, cat *catalog.Catalog) {
	var parts []string
	if !reflect.DeepEqual(old.Server, cat.Server) {
		parts = append(parts, "server")
	}
	if !reflect.DeepEqual(old.Auth, cat.Auth) {
		parts = append(parts, "auth")
	}
	if !reflect.DeepEqual(old.Limits, cat.Limits) {
		parts = append(parts, "limits")
	}
	if len(parts) > 0 {
		b.log.Warn("catalog reloaded, but these blocks apply at the next start", "blocks", parts, "catalog", cat.File)
	}
}
