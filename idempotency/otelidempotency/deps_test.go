package otelidempotency_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestCoreImportsNoOpenTelemetry: the middleware, its stores and the client
// compile without OpenTelemetry; only this package brings it in. Nor do
// they compile the OpenAPI validator, which only their tests use
// (internal/openapitest).
func TestCoreImportsNoOpenTelemetry(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to list dependencies with")
	}
	pkgs := []string{
		"github.com/saferetry/saferetry",
		"github.com/saferetry/saferetry/idempotency",
		"github.com/saferetry/saferetry/idempotency/memstore",
		"github.com/saferetry/saferetry/idempotency/redisstore",
		"github.com/saferetry/saferetry/idempotency/pgstore",
		"github.com/saferetry/saferetry/mockserver",
	}
	out, err := exec.Command(goTool, append([]string{"list", "-deps"}, pkgs...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.Contains(dep, "opentelemetry") || strings.Contains(dep, "prometheus") || strings.Contains(dep, "pb33f") {
			t.Errorf("%s is a dependency of the core packages", dep)
		}
	}
}
