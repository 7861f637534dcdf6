package idempotency

// WithStoreTimeout exposes the store-call bound to the external tests.
var WithStoreTimeout = withStoreTimeout

// WithClock exposes the clock seam to the external tests.
var WithClock = withClock
