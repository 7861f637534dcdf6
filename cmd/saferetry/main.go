// Command saferetry checks whether an HTTP API honours Idempotency-Key, and
// runs the saferetry mock server.
//
// Usage:
//
//	saferetry check -url URL [flags]     check one endpoint
//	saferetry check -openapi URL_OR_FILE check every operation that declares an Idempotency-Key header
//	saferetry mock [flags]               run the mock payments server (the flags of cmd/mockserver)
//
// check sends requests, each with a fresh Idempotency-Key of its own, and
// prints a table of checks (see package conformance for what each one
// asks and at which level):
//
//	saferetry check -url http://127.0.0.1:8080/payments -key-required \
//		-body '{"amount":1250,"currency":"EUR","recipient":"alice"}' \
//		-count-url http://127.0.0.1:8080/payments
//
// Flags of check:
//
//	-url URL          the endpoint (with -openapi: the base URL its paths go after; default the document's server)
//	-method M         the request method (default POST; not with -openapi, whose operations have their own)
//	-body JSON        the request body
//	-body-file F      the request body, from a file
//	-other-body JSON  a body that asks for another operation (default: the body with one more member)
//	-header 'K: V'    a header sent on every request (repeatable)
//	-concurrency N    the size of the burst with one key (default 20, at most 1000)
//	-profile P        ietf (default) or stripe: the levels and statuses to hold the answers to
//	-key-required     the endpoint requires a key: check that a request without one gets 400
//	-count-url U      a GET that counts the records (#/json/pointer or #dotted.path for a count inside; required for a JSON object; default a JSON array's length, a JSON number, or a non-JSON body's size, which can only warn)
//	-ttl D            the retention the API states: re-send the first key after D (and a grace of 1 %, at least 100 ms), expect a new execution
//	-auth-a 'K: V'    a header of principal a (repeatable); with -auth-b, check that keys do not cross principals
//	-auth-b 'K: V'    a header of principal b (repeatable)
//	-openapi SRC      an OpenAPI 3.x JSON document (URL or file): check each operation that declares the key
//	-timeout D        bound on each request (default 10s)
//	-json             print one JSON document instead of the table; a target that could not be checked is under "errors", and "passed" is false; an -openapi operation skipped is under "skipped", with its method, path (or webhook) and why
//	-junit FILE       also write a JUnit XML report to FILE (valid against the strict Ant JUnit schema); a target that could not be checked is a test case in error, an -openapi operation skipped a test case skipped
//	-dry-run          print the requests it would send, and send none
//	-strict           exit 1 when a SHOULD check fails too (for CI), naming the failed SHOULDs on stderr; the report and -json's "passed" still count MUSTs only
//
// With -openapi, an operation that cannot be checked as its document
// stands (a path parameter without an example, a $ref that does not
// resolve; see conformance.FromOpenAPI), and a webhook's that declares
// the key, which the API sends rather than takes, is skipped, saying why
// on stderr and in the -json and -junit reports; the others are checked.
//
// Exit status: 0 when every MUST check passed, 1 when one failed, 2 on a
// usage error or when the endpoint could not be reached. A skipped
// operation changes none of these, but when every operation is skipped
// there is nothing to check, which exits 2 (the -json and -junit reports
// are still written, every operation in them skipped and -json's
// "passed" false). A failed SHOULD
// exits 0 unless -strict is given, which makes it exit 1 too. A usage
// error is told on stderr as cmd/mockserver tells it: in one line, with a
// hint for the usual mistakes (-json=true, not -json true; -ttl 5s, not
// -ttl 5), and a line that points at the subcommand's -h.
package main

import (
	"context"
	"os"

	"github.com/saferetry/saferetry/internal/mockcmd"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "mock" {
		// The mock server shuts down gracefully on SIGINT and SIGTERM.
		os.Exit(mockcmd.Main("saferetry mock", os.Args[2:]))
	}
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}
