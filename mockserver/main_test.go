package mockserver_test

import (
	"testing"

	"github.com/saferetry/saferetry/internal/testenv"
)

// TestMain checks the test Redis (the end-to-end tests share one) once
// before any test runs, and says how many tests skipped without it; see
// testenv.Main.
func TestMain(m *testing.M) { testenv.Main(m, testenv.Redis) }
