package idempotency

// WithStoreTimeout exposes the store-call bound to the external tests.
var WithStoreTimeout = withStoreTimeout
