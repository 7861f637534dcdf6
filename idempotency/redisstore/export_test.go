package redisstore

import "time"

// SetWatchIdle makes s's subscription wait d, not watchset.Idle, for a
// message before it asks whether anybody still waits and sends a PING, and
// d, not watchset.PingWait, for its answer. Call it before the first
// Watch.
func SetWatchIdle(s *Store, d time.Duration) { s.watch.idle, s.watch.pingWait = d, d }
