package bridge

import "github.com/jobbridge/jobbridge/mapping"

// ResultsWaiting returns how many tasks/result requests of the task are
// waiting in this process, for tests that must act while one waits.
func (b *Bridge) ResultsWaiting(taskID string) int {
	b.sessions.mu.Lock()
	defer b.sessions.mu.Unlock()
	return b.sessions.results[mapping.KeyOf(taskID)]
}
