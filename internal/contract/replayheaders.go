package contract

// ReplayHeaders returns the response headers a replay carries whatever
// the configuration, in canonical form (CONTRACT.md, server rules:
// "Replayed headers come from an allow-list (Content-Type, Location, ETag,
// Last-Modified, Link, Content-Location, and configured extras)"). The
// server stores them with an outcome and replays them; the conformance
// checker holds a replay to them. Each call returns a new slice.
func ReplayHeaders() []string {
	return []string{"Content-Type", "Location", "Etag", "Last-Modified", "Link", "Content-Location"}
}
