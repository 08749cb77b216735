package mapping

import "sync"

// Feed fans changes out to subscribers, the in-process half of
// Store.Subscribe that both stores use. Publish never blocks: each
// subscription has a queue of its own and a goroutine that calls its
// function with the queued changes in order, so that a slow subscriber
// delays no writer and no other subscriber. A queue that grows past
// MaxFeedQueue changes is replaced by one Change{Resync: true}, which tells
// the subscriber to re-read what it cares about, so that memory stays
// bounded whatever the subscriber does.
//
// The zero value is ready to use. A Feed is safe for concurrent use.
type Feed struct {
	mu     sync.Mutex
	subs   map[*subscription]struct{}
	closed bool
}

// MaxFeedQueue is how many changes may wait for one subscriber before the
// Feed drops them for a resync.
const MaxFeedQueue = 4096

// subscription is one Subscribe's queue and goroutine.
type subscription struct {
	fn func(Change)

	mu      sync.Mutex
	queue   []Change
	stopped bool
	wake    chan struct{} // capacity 1: changes were queued, or stop was set
	done    chan struct{} // closed when the goroutine has ended
}

// Subscribe calls fn with every change published from now on, from a
// goroutine of its own, in publishing order. unsubscribe stops further
// calls and returns once a call in progress has returned; it must not be
// called from fn, and calling it again does nothing. Subscribing to a
// closed Feed calls nothing.
func (f *Feed) Subscribe(fn func(Change)) (unsubscribe func()) {
	s := &subscription{fn: fn, wake: make(chan struct{}, 1), done: make(chan struct{})}
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return func() {}
	}
	if f.subs == nil {
		f.subs = make(map[*subscription]struct{})
	}
	f.subs[s] = struct{}{}
	f.mu.Unlock()
	go s.run()
	return func() {
		f.mu.Lock()
		delete(f.subs, s)
		f.mu.Unlock()
		s.stop()
	}
}

// Publish queues c for every subscriber and returns at once.
func (f *Feed) Publish(c Change) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for s := range f.subs {
		s.push(c)
	}
}

// Close ends every subscription, waiting for calls in progress to return;
// changes still queued are dropped. Later Subscribes call nothing and later
// Publishes do nothing. Calling Close again does nothing.
func (f *Feed) Close() {
	f.mu.Lock()
	f.closed = true
	subs := f.subs
	f.subs = nil
	f.mu.Unlock()
	for s := range subs {
		s.stop()
	}
}

// push queues c, collapsing an overlong queue into a resync.
func (s *subscription) push(c Change) {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return
	}
	if len(s.queue) >= MaxFeedQueue {
		s.queue = append(s.queue[:0], Change{Resync: true})
	}
	s.queue = append(s.queue, c)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// stop ends the goroutine and waits for it.
func (s *subscription) stop() {
	s.mu.Lock()
	s.stopped = true
	s.queue = nil
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
	<-s.done
}

// run calls fn with the queued changes until stopped.
func (s *subscription) run() {
	defer close(s.done)
	for range s.wake {
		for {
			s.mu.Lock()
			if s.stopped {
				s.mu.Unlock()
				return
			}
			if len(s.queue) == 0 {
				s.mu.Unlock()
				break
			}
			c := s.queue[0]
			s.queue[0] = Change{}
			s.queue = s.queue[1:]
			if len(s.queue) == 0 {
				s.queue = nil // let the backing array go
			}
			s.mu.Unlock()
			s.fn(c)
		}
	}
}
