package bridge

import (
	"context"
	"log/slog"
)

// sdkLogger is the logger handed to the go-sdk. The SDK logs every
// connection and session at INFO ("server session connected", "session
// initialized", "server session disconnected"): with stateless HTTP that is
// several lines per request, so its INFO records are demoted to DEBUG.
// Its warnings and errors keep their level.
func sdkLogger(l *slog.Logger) *slog.Logger {
	return slog.New(demoteInfo{l.Handler()})
}

// demoteInfo is a slog.Handler that passes records on to its handler with
// INFO-range levels (INFO up to, not including, WARN) lowered to DEBUG.
type demoteInfo struct{ next slog.Handler }

func demoted(l slog.Level) slog.Level {
	if l >= slog.LevelInfo && l < slog.LevelWarn {
		return slog.LevelDebug
	}
	return l
}

func (h demoteInfo) Enabled(ctx context.Context, l slog.Level) bool {
	return h.next.Enabled(ctx, demoted(l))
}

func (h demoteInfo) Handle(ctx context.Context, r slog.Record) error {
	r.Level = demoted(r.Level)
	return h.next.Handle(ctx, r)
}

func (h demoteInfo) WithAttrs(attrs []slog.Attr) slog.Handler {
	return demoteInfo{h.next.WithAttrs(attrs)}
}

func (h demoteInfo) WithGroup(name string) slog.Handler {
	return demoteInfo{h.next.WithGroup(name)}
}
