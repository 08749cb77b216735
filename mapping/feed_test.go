package mapping

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// waitLimit bounds how long a test waits for a call it expects.
const waitLimit = 30 * time.Second

// collector records the changes of one subscription.
type collector struct {
	mu  sync.Mutex
	got []Change
	n   chan struct{} // one send per change, buffered
}

func newCollector() *collector { return &collector{n: make(chan struct{}, 2*MaxFeedQueue)} }

func (c *collector) add(ch Change) {
	c.mu.Lock()
	c.got = append(c.got, ch)
	c.mu.Unlock()
	c.n <- struct{}{}
}

// wait waits for n more changes.
func (c *collector) wait(t *testing.T, n int) {
	t.Helper()
	for range n {
		select {
		case <-c.n:
		case <-time.After(waitLimit):
			t.Fatalf("a change did not arrive within %v", waitLimit)
		}
	}
}

func (c *collector) changes() []Change {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Change(nil), c.got...)
}

func change(v int64) Change { return Change{Key: KeyOf("task"), Version: v} }

func TestFeedDeliversInOrderToEverySubscriber(t *testing.T) {
	var f Feed // the zero value is ready
	defer f.Close()
	a, b := newCollector(), newCollector()
	defer f.Subscribe(a.add)()
	defer f.Subscribe(b.add)()
	for v := range int64(100) {
		f.Publish(change(v))
	}
	for _, c := range []*collector{a, b} {
		c.wait(t, 100)
		got := c.changes()
		for i, ch := range got {
			if ch != change(int64(i)) {
				t.Fatalf("change %d = %+v, want version %d in order", i, ch, i)
			}
		}
	}
}

func TestFeedUnsubscribeWaitsForTheCallInProgress(t *testing.T) {
	var f Feed
	defer f.Close()
	entered, release := make(chan struct{}), make(chan struct{})
	var returned, calls atomic.Int32
	unsubscribe := f.Subscribe(func(Change) {
		if calls.Add(1) == 1 {
			close(entered)
			<-release
		}
		returned.Add(1)
	})
	f.Publish(change(1))
	f.Publish(change(2)) // queued behind the blocked call: never delivered
	<-entered
	done := make(chan struct{})
	go func() {
		unsubscribe()
		close(done)
	}()
	select {
	case <-done:
		t.Fatal("unsubscribe returned while a call was in progress")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	<-done
	if n := returned.Load(); n != 1 {
		t.Errorf("%d calls had returned when unsubscribe returned, want 1", n)
	}
	f.Publish(change(3))
	unsubscribe() // again: nothing
	if n := calls.Load(); n != 1 {
		t.Errorf("%d calls after unsubscribe, want none after the first", n-1)
	}
}

func TestFeedSlowSubscriberGetsAResync(t *testing.T) {
	const extra = 10
	var f Feed
	defer f.Close()
	entered, release := make(chan struct{}), make(chan struct{})
	c := newCollector()
	first := true
	defer f.Subscribe(func(ch Change) {
		if first {
			first = false
			close(entered)
			<-release
		}
		c.add(ch)
	})()
	// Another subscriber is not held up by the slow one.
	fast := newCollector()
	defer f.Subscribe(fast.add)()

	f.Publish(change(0))
	<-entered
	total := MaxFeedQueue + extra
	for v := 1; v <= total; v++ {
		f.Publish(change(int64(v)))
	}
	fast.wait(t, total+1)
	close(release)
	c.wait(t, 2+extra)

	got := c.changes()
	want := []Change{change(0), {Resync: true}}
	for v := total - extra + 1; v <= total; v++ {
		want = append(want, change(int64(v)))
	}
	if len(got) != len(want) {
		t.Fatalf("the slow subscriber got %d changes, want %d: the first, a resync and the last %d", len(got), len(want), extra)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("change %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestFeedClose(t *testing.T) {
	var f Feed
	c := newCollector()
	unsubscribe := f.Subscribe(c.add)
	f.Publish(change(1))
	c.wait(t, 1)
	f.Close()
	f.Close() // again: nothing
	f.Publish(change(2))
	late := newCollector()
	lateUnsubscribe := f.Subscribe(late.add)
	f.Publish(change(3))
	unsubscribe()
	lateUnsubscribe()
	if got := c.changes(); len(got) != 1 {
		t.Errorf("calls after Close: got %v", got)
	}
	if got := late.changes(); len(got) != 0 {
		t.Errorf("a subscription after Close was called with %v", got)
	}
}
