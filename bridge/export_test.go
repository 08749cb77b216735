package bridge

// Sweep runs one background sweep now and returns when it is over, for
// tests that count what a sweep does.
func (b *Bridge) Sweep() { b.lc.Sweep() }
