package jetstream

// WithPrefetch sets how many messages Consume may hold fetched ahead,
// waiting in its buffer while a handler runs; 0 (the default) means none:
// Consume asks JetStream for a message only once it is ready to handle it,
// so no message waits in Consume's buffer, and none can age out there. A
// message waiting there is not extended (only the one being handled is):
// one that waits longer than the consumer's AckWait is redelivered,
// spending one of the consumer's MaxDeliver, and one whose last delivery
// waits there is lost if the process dies. With WithPrefetch(n), that
// cannot happen as long as n handlings (h and Inbox.Process's commit,
// each) take less than the consumer's AckWait (or shortest BackOff step).
// A prefetch saves the round trip to JetStream that each message
// otherwise waits for (see BenchmarkConsumePrefetch); more Consume calls
// save it too. Negative n means 0. Consume stays within the consumer's
// MaxRequestBatch: one pull request takes the message to handle and those
// ahead, so a MaxRequestBatch of m bounds n at m-1.
func WithPrefetch(n int) ConsumeOption {
	return func(c *consumeConfig) { c.prefetch = max(n, 0) }
}

// pullMaxMessages is the nats.go pull size (PullMaxMessages) that holds at
// most prefetch messages fetched ahead while one is handled: nats.go's
// iterator keeps at most that many messages requested and not yet taken,
// and tops its requests up (to that many) only when Next is called, so
// while the message Next returned is handled, one fewer.
func pullMaxMessages(prefetch int) int { return prefetch + 1 }
