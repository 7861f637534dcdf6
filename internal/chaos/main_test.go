package chaos

import (
	"testing"

	"github.com/saferetry/saferetry/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m, testenv.Postgres) }
