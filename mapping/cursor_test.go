package mapping

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestCursorRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		c    Cursor
	}{
		{"typical", Cursor{CreatedAt: time.Date(2025, 11, 25, 10, 30, 0, 123_000_000, time.UTC), Key: KeyOf("task-1")}},
		{"zero key", Cursor{CreatedAt: time.Date(2025, 11, 25, 10, 30, 0, 0, time.UTC)}},
		{"before 1970", Cursor{CreatedAt: time.Date(1969, 7, 20, 20, 17, 40, 0, time.UTC), Key: KeyOf("task-2")}},
		{"unix epoch", Cursor{CreatedAt: time.UnixMilli(0).UTC(), Key: KeyOf("task-3")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := tt.c.Encode()
			if strings.ContainsAny(s, "+/=") {
				t.Errorf("Encode() = %q, want URL-safe characters only", s)
			}
			got, err := ParseCursor(s)
			if err != nil {
				t.Fatalf("ParseCursor(%q): %v", s, err)
			}
			if !got.CreatedAt.Equal(tt.c.CreatedAt) || got.CreatedAt.Location() != time.UTC || got.Key != tt.c.Key {
				t.Errorf("ParseCursor(Encode()) = %+v, want %+v", got, tt.c)
			}
		})
	}
}

func TestCursorEncodeNormalises(t *testing.T) {
	// A store keeps times at millisecond precision: a cursor says no more.
	local := time.FixedZone("UTC+2", 2*60*60)
	c := Cursor{CreatedAt: time.Date(2025, 11, 25, 12, 30, 0, 123_456_789, local), Key: KeyOf("task-1")}
	got, err := ParseCursor(c.Encode())
	if err != nil {
		t.Fatalf("ParseCursor: %v", err)
	}
	want := time.Date(2025, 11, 25, 10, 30, 0, 123_000_000, time.UTC)
	if !got.CreatedAt.Equal(want) || got.CreatedAt.Location() != time.UTC {
		t.Errorf("CreatedAt = %v, want %v", got.CreatedAt, want)
	}
}

func TestCursorHidesTaskID(t *testing.T) {
	const id = "NBYWu6bN2hGjxJ4K8mT0c3ZqRkA1VwLp"
	s := CursorOf(&Task{Key: KeyOf(id), CreatedAt: time.Now()}).Encode()
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(s, id) || strings.Contains(string(raw), id) {
		t.Errorf("cursor %q holds the task ID", s)
	}
}

func TestParseCursorRejects(t *testing.T) {
	good := Cursor{CreatedAt: time.UnixMilli(1764066600000).UTC(), Key: KeyOf("task-1")}.Encode()
	raw, err := base64.RawURLEncoding.DecodeString(good)
	if err != nil {
		t.Fatal(err)
	}
	withVersion := func(v byte) string {
		b := append([]byte(nil), raw...)
		b[0] = v
		return base64.RawURLEncoding.EncodeToString(b)
	}
	tests := []struct {
		name, s string
	}{
		{"empty", ""},
		{"not base64", "not a cursor!"},
		{"standard alphabet", good[:10] + "+" + good[11:]},
		{"padded", base64.URLEncoding.EncodeToString(raw)},
		{"trailing bits set", good[:len(good)-1] + "B"},
		{"too short", base64.RawURLEncoding.EncodeToString(raw[:cursorLen-1])},
		{"too long", base64.RawURLEncoding.EncodeToString(append(append([]byte(nil), raw...), 0))},
		{"unknown version", withVersion(2)},
		{"version zero", withVersion(0)},
		{"a task ID", "NBYWu6bN2hGjxJ4K8mT0c3ZqRkA1VwLp"},
		{"JSON", `{"createdAt":"2025-11-25T10:30:00Z"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseCursor(tt.s)
			if !errors.Is(err, ErrBadCursor) {
				t.Fatalf("ParseCursor(%q) = %+v, %v; want ErrBadCursor", tt.s, got, err)
			}
			if got != nil {
				t.Errorf("ParseCursor(%q) returned %+v along with an error", tt.s, got)
			}
		})
	}
}
