package main

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jobbridge/jobbridge/bridge"
	"github.com/jobbridge/jobbridge/catalog"
)

// reloader reloads the served catalog from its file on SIGHUP and, with
// --watch, when the file's content changes. It reads the file by name each
// time, so a Kubernetes ConfigMap update (a symlink swapped to a new
// directory) is seen like any rewrite. A catalog that does not load, or
// whose backends cannot be built, is refused: its problems are logged with
// their file:line:col, jobbridge_catalog_reloads_total{outcome="failed"}
// counts it, and the catalog in effect stays. A reloader without a path
// serves a catalog built into the binary (demo): it has nothing to reload,
// and says so.
type reloader struct {
	path    string
	bridge  *bridge.Bridge
	adapter adapterOptions
	logger  *slog.Logger
	// prepare, when set, is applied to each new catalog before its
	// adapters are built (demo: point the backends at the fakes).
	prepare func(*catalog.Catalog)

	mu   sync.Mutex // one reload at a time
	sum  [sha256.Size]byte
	live atomic.Pointer[catalog.Catalog]
}

func newReloader(path string, cat *catalog.Catalog, b *bridge.Bridge, o adapterOptions, logger *slog.Logger) *reloader {
	r := &reloader{path: path, bridge: b, adapter: o, logger: logger}
	r.live.Store(cat)
	if path == "" {
		return r
	}
	if data, err := os.ReadFile(path); err == nil {
		r.sum = sha256.Sum256(data)
	}
	return r
}

// catalog returns the catalog in effect.
func (r *reloader) catalog() *catalog.Catalog { return r.live.Load() }

// reload loads the file and, when it is valid, makes it the catalog in
// effect. onlyIfChanged skips a file whose content is what was last read.
func (r *reloader) reload(why string, onlyIfChanged bool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.path == "" {
		r.logger.Info("nothing to reload: the catalog is built into the binary (serve a file with --config to reload it)", "trigger", why, "catalog", r.catalog().File)
		return nil
	}
	data, err := os.ReadFile(r.path)
	if err != nil {
		if onlyIfChanged {
			// A watched file may be missing for a moment while it is
			// replaced; the next look settles it.
			return nil
		}
		r.bridge.CountReload(bridge.ReloadFailed)
		r.logger.Error("catalog reload failed; the catalog in effect stays", "trigger", why, "error", err)
		return err
	}
	sum := sha256.Sum256(data)
	if onlyIfChanged && sum == r.sum {
		return nil
	}
	r.sum = sum
	cat, err := catalog.Parse(r.path, data, catalogTypes()...)
	if err != nil {
		r.bridge.CountReload(bridge.ReloadFailed)
		var errs catalog.Errors
		if errors.As(err, &errs) {
			for _, e := range errs {
				r.logger.Error("catalog reload refused", "at", e.Pos.String(), "path", e.Path, "error", e.Err.Error())
			}
		}
		r.logger.Error("catalog reload failed; the catalog in effect stays", "trigger", why, "catalog", r.path, "revision", r.catalog().Revision, "error", err)
		return err
	}
	for _, w := range cat.Warnings {
		r.logger.Warn("catalog warning", "at", w.Pos.String(), "path", w.Path, "warning", w.Err.Error())
	}
	if r.prepare != nil {
		r.prepare(cat)
	}
	adapterSet, err := buildAdapters(cat, r.adapter)
	if err == nil {
		err = r.bridge.Reload(cat, adapterSet)
	} else {
		r.bridge.CountReload(bridge.ReloadFailed)
	}
	if err != nil {
		r.logger.Error("catalog reload failed; the catalog in effect stays", "trigger", why, "catalog", r.path, "revision", r.catalog().Revision, "error", err)
		return err
	}
	r.live.Store(cat)
	return nil
}

// start reloads on SIGHUP, on a receive from manual (tests), and, when
// watch is positive, when the file changes (looked at every watch), until
// ctx ends. SIGHUP is caught from its return on: it no longer ends the
// process.
func (r *reloader) start(ctx context.Context, watch time.Duration, manual <-chan struct{}) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go r.run(ctx, hup, watch, manual)
}

func (r *reloader) run(ctx context.Context, hup chan os.Signal, watch time.Duration, manual <-chan struct{}) {
	defer signal.Stop(hup)
	var tick <-chan time.Time
	if watch > 0 {
		t := time.NewTicker(watch)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			r.reload("SIGHUP", false)
		case <-manual:
			r.reload("request", false)
		case <-tick:
			r.reload("file changed", true)
		}
	}
}

// readiness answers /readyz: ready when the catalog is loaded and the store
// answers within a second.
type readiness struct {
	store  interface{ Ping(context.Context) error }
	cat    func() *catalog.Catalog
	hideIn string // the store URL, kept out of the answers
}

func (rd readiness) check(ctx context.Context) (ok bool, reason string) {
	cat := rd.cat()
	if cat == nil {
		return false, "the catalog is not loaded"
	}
	if rd.store != nil {
		ctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		if err := rd.store.Ping(ctx); err != nil {
			return false, redactDSN(err, rd.hideIn).Error()
		}
	}
	return true, fmt.Sprintf("catalog %s (revision %s, %d tools), store answers", cat.File, cat.Revision, len(cat.Tools))
}
