package mockserver

import (
	"context"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/saferetry/saferetry/idempotency"
)

// methods maps the methods a path allows to their handlers.
type methods map[string]http.Handler

// route is one path of the API, a ServeMux pattern without a method, and
// the handler of each method it allows.
type route struct {
	pattern string
	methods methods
}

// routes builds the server's handler: the payments API, the admin API when
// c says so, and 404 and 405 problems for the rest.
func (s *Server) routes(c config) http.Handler {
	idemOpts := s.idempotencyOptions(c)
	payment := refuseUnderClaim(http.HandlerFunc(s.createPayment))
	if c.wrapHandler != nil {
		payment = c.wrapHandler(payment)
	}
	protected := idempotency.Middleware(guardRefused(s.store), idemOpts...)(payment)

	mux := http.NewServeMux()
	var pay http.Handler // POST /payments
	for _, rt := range s.apiRoutes(protected) {
		if rt.pattern == paymentsRoute {
			pay = rt.methods[http.MethodPost]
		}
		mux.Handle(rt.pattern, byMethod(rt.methods))
	}
	payPattern := muxPattern(http.MethodPost, paymentsRoute)
	if c.metrics != nil {
		mux.Handle(MetricsPath, byMethod(methods{http.MethodGet: c.metrics}))
	}
	if c.admin {
		for _, rt := range s.adminRoutes() {
			mux.Handle(rt.pattern, byMethod(rt.methods))
		}
	}
	mux.HandleFunc(AdminPrefix, func(w http.ResponseWriter, r *http.Request) {
		detail := "no admin endpoint " + r.URL.Path
		if !c.admin {
			detail = "the admin API is off on this server (WithAdminAPI; cmd/mockserver -admin)"
		}
		writeProblem(w, problem{Type: ProblemNotFound, Title: "Not Found", Status: http.StatusNotFound, Detail: detail})
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeProblem(w, problem{Type: ProblemNotFound, Title: "Not Found", Status: http.StatusNotFound,
			Detail: "no endpoint " + r.URL.Path})
	})

	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if faulty(r.URL.Path, c) {
			if d := s.faults.getLatency(); d > 0 {
				// The attempt's timing starts before the latency.
				r = r.WithContext(context.WithValue(r.Context(), arrivalKey{}, time.Now()))
				t := time.NewTimer(d)
				select {
				case <-t.C:
				case <-r.Context().Done():
					t.Stop()
					return // the client went away; nobody reads an answer
				}
				extendReadDeadline(w, r, c.readTimeout)
			}
		}
		if r.Method == http.MethodPost && r.URL.Path == paymentsRoute {
			// A payment, nearly every request, goes to its handler as the
			// mux would send it, without the mux's lookup: the unescaped
			// path is the pattern's, which no other pattern matches, and
			// is clean, so the mux neither redirects it nor refuses it.
			r.Pattern = payPattern
			pay.ServeHTTP(w, r)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// muxPattern is the Request.Pattern that a ServeMux sets, as it serves a
// request with method and path, on a pattern path without a method
// (none under GODEBUG=httpmuxgo121=1, whose mux sets none).
func muxPattern(method, path string) string {
	var got string
	mux := http.NewServeMux()
	mux.HandleFunc(path, func(_ http.ResponseWriter, r *http.Request) { got = r.Pattern })
	mux.ServeHTTP(nil, &http.Request{Method: method, URL: &url.URL{Path: path}, RequestURI: path, Host: "localhost"})
	return got
}

// extendReadDeadline gives the rest of a request's body, if it has one,
// readTimeout from now to arrive, after an injected wait that ran before
// the body was read: the connection's read deadline (http.Server.ReadTimeout)
// ran during the wait, and a body not yet buffered would otherwise be read
// past it and answered 400 as unreadable, a final answer to a valid request. The wait is
// the server's, not the client's, so it does not count against the client's
// time to send. readTimeout <= 0 sets no deadline, as the server sets none.
func extendReadDeadline(w http.ResponseWriter, r *http.Request, readTimeout time.Duration) {
	// Without a body net/http is reading already, for the client's
	// departure, with no deadline: one set now would end that read and
	// cancel the request though the client waits.
	if readTimeout <= 0 || r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		return
	}
	// An error means the writer cannot set deadlines (HTTP/2 through a
	// proxy, a test's recorder): there is no deadline of ours to move.
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(readTimeout))
}

// paymentsRoute is the path, and the ServeMux pattern, of the payments.
const paymentsRoute = "/payments"

// apiRoutes are the routes of the payments API, POST /payments answered
// by protected, and of its description: what OpenAPI describes.
func (s *Server) apiRoutes(protected http.Handler) []route {
	return []route{
		{paymentsRoute, methods{
			http.MethodPost: s.observe(s.requireJSON(protected)),
			http.MethodGet:  http.HandlerFunc(s.listPayments),
		}},
		{"/payments/{id}", methods{http.MethodGet: http.HandlerFunc(s.getPayment)}},
		{"/balance", methods{http.MethodGet: http.HandlerFunc(s.getBalance)}},
		{OpenAPIPath, methods{http.MethodGet: http.HandlerFunc(s.serveOpenAPI)}},
	}
}

// idempotencyOptions are the options of the Middleware in front of POST
// /payments: the logger, the user's options, then the server's own.
func (s *Server) idempotencyOptions(c config) []idempotency.Option {
	idemOpts := make([]idempotency.Option, 0, len(c.idemOpts)+5)
	if c.logger != nil {
		idemOpts = append(idemOpts, idempotency.WithLogger(c.logger))
	}
	idemOpts = append(idemOpts, c.idemOpts...)
	return append(idemOpts,
		idempotency.WithMethods(http.MethodPost),
		idempotency.WithKeyRequired(true),
		idempotency.WithScope(s.scope),
		idempotency.WithHook(s.outcomeSettled),
	)
}

// idempotencyTTL is the TTL that the Middleware given opts keeps its records
// for, read back from the options exactly (not from the policy's float
// seconds, which lose nanoseconds past 2^53 ns and overflow near
// math.MaxInt64): the Server's options have no TTL of their own, so the
// ledger's ref and the record cannot disagree.
func idempotencyTTL(opts []idempotency.Option) time.Duration {
	return idempotency.TTL(opts...)
}

// faulty reports whether injected latency applies to a request for path:
// the payments API, neither the admin API, nor the metrics, nor the
// OpenAPI description.
func faulty(path string, c config) bool {
	return !strings.HasPrefix(path, AdminPrefix) && (c.metrics == nil || path != MetricsPath) && path != OpenAPIPath
}

// methodHandler dispatches a request to the handler of its method, and
// answers a method the path does not allow with a 405 problem and an Allow
// header. ServeMux's own 405 would be text/plain, which is why the mux sees
// patterns without methods and the methods are dispatched here.
type methodHandler struct {
	methods methods
	allow   string // the Allow header: the methods, sorted, comma-separated
}

// byMethod returns the handler of the methods m. A GET handler answers HEAD
// too, as in ServeMux.
func byMethod(m methods) methodHandler {
	if h, ok := m[http.MethodGet]; ok {
		if _, ok := m[http.MethodHead]; !ok {
			m[http.MethodHead] = h
		}
	}
	return methodHandler{methods: m, allow: strings.Join(slices.Sorted(maps.Keys(m)), ", ")}
}

func (h methodHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if next, ok := h.methods[r.Method]; ok {
		next.ServeHTTP(w, r)
		return
	}
	w.Header().Set("Allow", h.allow)
	writeProblem(w, problem{Type: ProblemMethodNotAllowed, Title: "Method Not Allowed", Status: http.StatusMethodNotAllowed,
		Detail: r.Method + " " + r.URL.Path + " is not allowed; allowed: " + h.allow})
}
