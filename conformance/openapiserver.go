package conformance

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// ownServers reports whether the operation or its path item has servers
// of its own, which replace the document's.
func ownServers(op, item map[string]any) bool {
	for _, l := range []any{op["servers"], item["servers"]} {
		if servers, _ := l.([]any); len(servers) > 0 {
			return true
		}
	}
	return false
}

// selfURL is the URL relative server URLs resolve against: OpenAPI
// 3.2's $self, self, resolved against docURL (the URL the document was
// read from), as a base URI the document states comes before the one it
// was retrieved from; docURL when self is "" or resolves to no absolute
// URL.
func selfURL(docURL, self string) string {
	s, err := url.Parse(self)
	if self == "" || err != nil {
		return docURL
	}
	if d, err := url.Parse(docURL); err == nil && d.IsAbs() {
		s = d.ResolveReference(s)
	}
	if !s.IsAbs() {
		return docURL
	}
	return s.String()
}

// errNoServer is serverURL's error when no list names a server and the
// default, "/", has no document URL to resolve against.
var errNoServer = errors.New("names no server (servers), and was not read from a URL: give the base URL (-url)")

// documentServerError is FromOpenAPI's error for err, serverURL's for the
// document's own servers: no operation could be sent.
func documentServerError(err error) error {
	if errors.Is(err, errNoServer) {
		return fmt.Errorf("conformance: the document %w", err)
	}
	return fmt.Errorf("conformance: the document's %w", err)
}

// serverURL is the base URL an operation's path goes after: base when
// given, else the first server of the first of lists (the operation's,
// its path item's, the document's) that has one, its variables at their
// values (serverVariable), resolved against docURL when relative; "/"
// when none has one (errNoServer without docURL). A variable without a
// value, a relative URL without docURL, or a URL that is or resolves to
// no http or https one (ftp://..., against a URN), is an error.
func serverURL(base, docURL string, lists ...any) (string, error) {
	if base != "" {
		return strings.TrimRight(base, "/"), nil
	}
	s := "/"
	var servers []any
	for _, l := range lists {
		if servers, _ = l.([]any); len(servers) > 0 {
			break
		}
	}
	if len(servers) > 0 {
		if first, _ := servers[0].(map[string]any); first != nil {
			if u, _ := first["url"].(string); u != "" {
				s = u
			}
			vars, _ := first["variables"].(map[string]any)
			filled, err := fillServerVariables(s, vars)
			if err != nil {
				return "", fmt.Errorf("server URL %q: %w: give the base URL (-url)", s, err)
			}
			s = filled
		}
	}
	u, err := url.Parse(s)
	if err != nil {
		return "", fmt.Errorf("server URL %q: %w", s, err)
	}
	if err := noQuery(s); err != nil {
		return "", fmt.Errorf("server URL %q %w: give the base URL (-url)", s, err)
	}
	if !u.IsAbs() {
		d, err := url.Parse(docURL)
		switch {
		case (docURL == "" || err != nil || !d.IsAbs()) && len(servers) == 0:
			return "", errNoServer
		case docURL == "" || err != nil || !d.IsAbs():
			return "", fmt.Errorf("server URL %q is relative: give the base URL (-url)", s)
		}
		u = d.ResolveReference(u)
		if !httpURL(u) { // against a $self that is a URN, say
			return "", fmt.Errorf("server URL %q resolves to %q, not an http or https URL: give the base URL (-url)", s, u)
		}
	}
	if !httpURL(u) {
		return "", fmt.Errorf("server URL %q is not an http or https URL: give the base URL (-url)", s)
	}
	return strings.TrimRight(u.String(), "/"), nil
}

// httpURL reports whether u is an absolute http or https URL, with a
// host: one a request can be sent to.
func httpURL(u *url.URL) bool {
	return (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

// checkBase refuses a base URL (-url) that no path can go after: one
// not absolute http or https, or with a query or a fragment.
func checkBase(base string) error {
	u, err := url.Parse(base)
	if err == nil && !httpURL(u) {
		err = errors.New("is not an absolute http or https URL")
	}
	if err == nil {
		err = noQuery(base)
	}
	if err != nil {
		return fmt.Errorf("conformance: the base URL %q (-url) %w", base, err)
	}
	return nil
}

// noQuery refuses the URL s with a query or a fragment, even an empty
// one ("?", "#"), which no path can go after.
func noQuery(s string) error {
	switch {
	case strings.Contains(s, "?"):
		return errors.New("has a query, which no path can go after")
	case strings.Contains(s, "#"):
		return errors.New("has a fragment, which no path can go after")
	}
	return nil
}

// fillServerVariables replaces the {variables} of the server URL s with
// their values among vars, each once, left to right: a value holding
// braces is not read again.
func fillServerVariables(s string, vars map[string]any) (string, error) {
	var b strings.Builder
	for {
		i := strings.IndexByte(s, '{')
		j := strings.IndexByte(s[max(i, 0):], '}')
		if i < 0 || j < 0 {
			b.WriteString(s)
			return b.String(), nil
		}
		j += i
		v, err := serverVariable(vars, s[i+1:j])
		if err != nil {
			return "", err
		}
		b.WriteString(s[:i] + v)
		s = s[j+1:]
	}
}

// serverVariable is the value of the server variable name: its default,
// else its enum's first value; one written as a number or a boolean (a
// port, say), though OpenAPI asks for a string, as its text.
func serverVariable(vars map[string]any, name string) (string, error) {
	v, declared := vars[name]
	if !declared {
		return "", fmt.Errorf("variable %s is not declared (in the server's variables)", name)
	}
	spec, _ := v.(map[string]any)
	what := "default"
	raw, ok := spec["default"]
	if enum, _ := spec["enum"].([]any); !ok && len(enum) > 0 {
		what, raw, ok = "enum's first value", enum[0], true
	}
	if !ok {
		return "", fmt.Errorf("variable %s has no default", name)
	}
	switch x := raw.(type) {
	case string:
		return x, nil
	case json.Number:
		return x.String(), nil
	case bool:
		return fmt.Sprint(x), nil
	}
	js, _ := json.Marshal(raw)
	return "", fmt.Errorf("variable %s's %s %s is not a string", name, what, js)
}
