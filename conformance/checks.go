package conformance

// check is one check of the table in the package documentation.
type check struct {
	id, title    string
	ietf, stripe Level
}

// The check IDs: stable, clients may match on them.
const (
	CheckFirstRequest       = "first-request"
	CheckReplay             = "replay"
	CheckReplayHeaders      = "replay-headers"
	CheckReplayMarker       = "replay-marker"
	CheckReuseRefused       = "reuse-refused"
	CheckReuseStatus        = "reuse-status"
	CheckConcurrentOnce     = "concurrent-once"
	CheckConcurrent409      = "concurrent-409"
	CheckConflictRetryAfter = "conflict-retry-after"
	CheckMissingKey         = "missing-key"
	CheckMalformedKey       = "malformed-key"
	CheckLongKey            = "long-key"
	CheckProblemJSON        = "problem-json"
	CheckCountOnce          = "count-once"
	CheckScopeIsolation     = "scope-isolation"
	CheckTTLExpiry          = "ttl-expiry"
)

// checks is every check, in report order.
var checks = []check{
	{CheckFirstRequest, "a request with a fresh key succeeds", LevelMust, LevelMust},
	{CheckReplay, "same key and body: same status and body, byte for byte", LevelMust, LevelMust},
	{CheckReplayHeaders, "same key and body: the first answer's allow-listed headers", LevelMust, LevelMust},
	{CheckReplayMarker, "the replay is marked Idempotent-Replayed: true", LevelInfo, LevelShould},
	{CheckReuseRefused, "same key, another body: refused, neither run nor replayed; at another path, not replayed", LevelMust, LevelMust},
	{CheckReuseStatus, "same key, another body: 422 (stripe: 400, 409 or 422)", LevelShould, LevelShould},
	{CheckConcurrentOnce, "concurrent requests with one key execute once", LevelMust, LevelMust},
	{CheckConcurrent409, "the other concurrent requests get 409 in progress", LevelShould, LevelShould},
	{CheckConflictRetryAfter, "a 409 carries Retry-After", LevelShould, LevelInfo},
	{CheckMissingKey, "no key, key required: 400", LevelShould, LevelShould},
	{CheckMalformedKey, "malformed key: 400", LevelShould, LevelInfo},
	{CheckLongKey, "key over 255 bytes: 400", LevelShould, LevelShould},
	{CheckProblemJSON, "errors are application/problem+json", LevelShould, LevelInfo},
	{CheckCountOnce, "one record per operation, not two (-count-url)", LevelMust, LevelMust},
	{CheckScopeIsolation, "one principal never gets another's answer (-auth-a, -auth-b)", LevelMust, LevelMust},
	{CheckTTLExpiry, "after the retention the key executes anew (-ttl)", LevelShould, LevelShould},
}

// Checks returns the IDs of every check, in report order.
func Checks() []string {
	ids := make([]string, len(checks))
	for i, c := range checks {
		ids[i] = c.id
	}
	return ids
}

func (c check) level(p Profile) Level {
	if p == ProfileStripe {
		return c.stripe
	}
	return c.ietf
}
