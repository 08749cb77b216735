package mapping

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"time"
)

// Cursor is a position in a principal's task list (Store.ListByPrincipal):
// the creation time and key of the last task of a page. The next page holds
// the tasks that come after it in the list's order, older ones or, at the
// same CreatedAt, ones with a greater Key.
type Cursor struct {
	// CreatedAt is the task's creation time, at the millisecond precision
	// stores keep.
	CreatedAt time.Time
	// Key is the task's store key.
	Key Key
}

// CursorOf returns the cursor that marks t's position.
func CursorOf(t *Task) *Cursor { return &Cursor{CreatedAt: t.CreatedAt, Key: t.Key} }

// Page cuts the tasks a store read for a page of limit (it reads one more,
// to know whether one follows) and returns the page with the cursor of its
// last task, or nil when nothing follows.
func Page(tasks []*Task, limit int) ([]*Task, *Cursor) {
	if len(tasks) <= limit {
		return tasks, nil
	}
	tasks = tasks[:limit]
	return tasks, CursorOf(tasks[limit-1])
}

// cursorVersion is the first byte of an encoded cursor, so that a later
// encoding can tell its cursors from these.
const cursorVersion = 1

// cursorLen is the length of an encoded cursor before base64: the version,
// CreatedAt in unix milliseconds (8 bytes, big-endian) and the key.
const cursorLen = 1 + 8 + len(Key{})

// Encode returns c as an opaque string of URL-safe characters, which
// ParseCursor turns back into c (with CreatedAt in UTC, truncated to the
// millisecond). It holds the key, a hash, and never a task ID.
func (c Cursor) Encode() string {
	b := make([]byte, 0, cursorLen)
	b = append(b, cursorVersion)
	b = binary.BigEndian.AppendUint64(b, uint64(c.CreatedAt.UnixMilli()))
	b = append(b, c.Key[:]...)
	return base64.RawURLEncoding.EncodeToString(b)
}

// ParseCursor returns the cursor s encodes (see Cursor.Encode). A string no
// cursor encodes to returns an error wrapping ErrBadCursor.
func ParseCursor(s string) (*Cursor, error) {
	// Strict: a string with trailing bits set or padding is not one that
	// Encode returned.
	b, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("%w: not base64url", ErrBadCursor)
	}
	if len(b) != cursorLen {
		return nil, fmt.Errorf("%w: %d bytes, want %d", ErrBadCursor, len(b), cursorLen)
	}
	if b[0] != cursorVersion {
		return nil, fmt.Errorf("%w: unknown version %d", ErrBadCursor, b[0])
	}
	c := &Cursor{CreatedAt: time.UnixMilli(int64(binary.BigEndian.Uint64(b[1:9]))).UTC()}
	copy(c.Key[:], b[9:])
	return c, nil
}
