package redisstore

import "time"

// SetWatchIdle makes s's subscription wait d, not watchset.Idle, for a
// message before it asks whether anybody still waits. Call it before the
// first Watch.
func SetWatchIdle(s *Store, d time.Duration) { s.watch.idle = d }
