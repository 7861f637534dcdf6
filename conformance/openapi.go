package conformance

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sort"
	"strings"

	"github.com/saferetry/saferetry/internal/contract"
)

// Operation is an operation of an OpenAPI document that takes an
// Idempotency-Key, or may (one of its parameters is a $ref that does not
// resolve, so it is Unusable), as FromOpenAPI finds it. It is a value: it may be read
// from several goroutines at once, but not changed (its Target's Body and
// Header included) while others read it.
type Operation struct {
	// Target is the operation as a target: its method, its URL on the
	// server, the example of its JSON request body (nil when it has none),
	// the body's media type in Header's Content-Type (with the example, or
	// the declared type when NeedsBody), KeyRequired when the header
	// parameter is required, and its operationId (or "METHOD path") as
	// Name. One standing for the operations of a path item whose $ref
	// does not resolve (PathItem) has no Method, and its path as Name;
	// one of an additionalOperations entry named "" has no Method either,
	// and is named `"" path` (or by its operationId).
	Target Target
	// Webhook is the name of the webhook (of the document's webhooks,
	// OpenAPI 3.1's) the operation is of; "" for one of its paths. Such
	// an operation is always Unusable, saying why: the API sends it, to a
	// consumer, so the checker cannot. It has no Path and no URL.
	Webhook string
	// PathItem reports that the Operation stands for every operation of
	// its path item, whose $ref does not resolve: which they are is
	// unknown. false for an operation of its own.
	PathItem bool
	// Path is the operation's path as the document writes it.
	Path string
	// Unusable says why the operation cannot be checked as it stands, the
	// first reason of: a path not beginning with "/" or holding a query or a
	// fragment, being an additionalOperations entry whose name is empty,
	// is no HTTP method, or is that of a method with a field of its own
	// (as OpenAPI forbids), its own $ref or its path item's that does not resolve ("its
	// path item's $ref ..."), a $ref of its parameters (or its path item's)
	// that does not resolve, named with its place ("its parameter 2: $ref
	// ..."), or parameters that are no array or a parameter no object, its
	// own (or its path item's) server URL unusable (relative without the
	// document's URL, a variable without a default), a parameter's or its
	// request body's required that is no boolean ("true"), its request body,
	// content or a media type no object, a $ref that does not resolve on the
	// way to a value it sends (a path, required query, header or cookie
	// parameter's example or schema, its request body or a required one's
	// example), a path parameter without an example, a required query (or
	// querystring) parameter without one, a required header (or cookie)
	// without one, a required request body without one. "" when it can.
	Unusable string
	// NeedsBody reports that the operation lacks a body the caller can
	// give: its required request body has no example. false when the
	// operation is usable, or when it lacks a path or query parameter,
	// which no body makes up for.
	NeedsBody bool
	// NeedsHeaders are the required header parameters without an
	// example, canonical, which the caller can give (a tenant, a
	// version), and Cookie when a required cookie parameter has none:
	// like NeedsBody, nil when the operation lacks a path or query
	// parameter.
	NeedsHeaders []string
}

// FromOpenAPI returns the operations of the OpenAPI 3.x JSON document doc
// whose parameters, or their path's, include a header named
// Idempotency-Key (in any case), in path order, local $refs ("#/...")
// resolved. Its operations are those of a path item's method members,
// OpenAPI 3.2's query included, then of its additionalOperations (3.2),
// whose names are the methods as sent ("LINK"), then those of the
// document's webhooks (3.1), by name, Unusable as the checker cannot
// send them (Webhook). An operation's URL is
// base followed by its path; base "" takes the first server URL (its
// variables at their defaults) of the operation's servers, else its path
// item's, else the document's, resolved against docURL, the document's
// own URL, or its $self (OpenAPI 3.2's, itself resolved against docURL)
// when it has one. A relative server URL and no such URL, a variable
// with neither a default nor an enum, a query or a fragment, which no
// path can go after, or a URL that is or resolves to no http or https
// one, is an error for the document's server, and makes the operation
// Unusable for its own. A base that is not an absolute http or https
// URL, or has a query or a fragment, is an error.
//
// Path parameters are filled with their examples, as their styles write
// them, and so are required query, header and cookie parameters, the
// cookies in one Cookie header (or with their schema's default, or its
// enum's first value), and a required querystring parameter (OpenAPI
// 3.2's, the whole query). Examples are taken as the document writes
// them: a number keeps its digits, however large.
//
// A $ref that does not resolve (to nothing, into a cycle, or into
// another document, as a split document's path items are: FromOpenAPI
// reads no other) is never taken for an absent object. It makes Unusable
// the operations it hides, and only those, naming the ref and its place
// ("its parameter 2: $ref ..."): an operation's own $ref that operation;
// a path item's one Operation standing for all of the path's, without a
// Method; a parameter's, a request body's, or one on the way to an
// example the operation sends, its operation. Such an operation is
// returned even when no parameter is known to be the key, since the
// hidden one may be. So is one whose parameters are no array, or hold an
// entry that is no object; a path item or an operation that is no object
// is an error. Extension members of paths ("x-...") are no paths.
// Members beside a path item's $ref are read over its target's.
//
// A UTF-8 byte order mark before the document is skipped, and a
// document in UTF-16 with one is decoded; YAML, Swagger 2.0 and HTML (a
// page showing the document) are refused, saying so.
func FromOpenAPI(doc []byte, docURL, base string) ([]Operation, error) {
	doc, err := documentText(doc)
	if err != nil {
		return nil, err
	}
	if len(bytes.TrimSpace(doc)) == 0 { // a file written from nothing, a byte order mark at most
		return nil, errors.New("conformance: the OpenAPI document is empty")
	}
	v, err := decodeJSON(doc) // its examples' numbers as written
	if err != nil {
		switch t := bytes.TrimLeft(doc, " \t\r\n"); {
		case len(t) > 0 && t[0] == '<': // a documentation page, most likely
			return nil, fmt.Errorf("conformance: the OpenAPI document is HTML or XML, not JSON, the only form read (give the URL or file of the JSON document, not of a page that shows it): %w", err)
		case len(t) > 0 && t[0] != '{':
			return nil, fmt.Errorf("conformance: the OpenAPI document is not JSON, the only form read (YAML is not: convert it to JSON): %w", err)
		}
		return nil, fmt.Errorf("conformance: the OpenAPI document is not JSON: %w", err)
	}
	root, isObject := v.(map[string]any)
	if !isObject {
		return nil, fmt.Errorf("conformance: the document is %s, not an object (an OpenAPI document)", jsonKind(v))
	}
	if sw, ok := root["swagger"].(string); ok {
		return nil, fmt.Errorf("conformance: the document is Swagger %s: only OpenAPI 3.x, as JSON, is read (convert it to OpenAPI 3)", sw)
	}
	switch v, isString := root["openapi"].(string); {
	case root["openapi"] == nil:
		return nil, errors.New("conformance: the document has no openapi member (its version, such as \"3.1.0\"): only OpenAPI 3.x, as JSON, is read")
	case !isString:
		raw, _ := json.Marshal(root["openapi"])
		return nil, fmt.Errorf("conformance: the document's openapi is %s, not a string: write it as one (\"openapi\": \"3.1.0\")", raw)
	case !strings.HasPrefix(v, "3."):
		return nil, fmt.Errorf("conformance: the document is not OpenAPI 3.x, as JSON (openapi: %q)", v)
	}
	self, _ := root["$self"].(string) // OpenAPI 3.2's
	docURL = selfURL(docURL, self)
	if base != "" {
		if err := checkBase(base); err != nil {
			return nil, err
		}
	}
	paths, ok := root["paths"].(map[string]any)
	if !ok && root["paths"] != nil { // absent: a document of webhooks or components only
		return nil, errors.New("conformance: the document's paths is not an object (of paths to path items)")
	}
	names := make([]string, 0, len(paths))
	for p := range paths {
		names = append(names, p)
	}
	sort.Strings(names)
	var ops []Operation
	for _, path := range names {
		if strings.HasPrefix(path, "x-") { // an extension, not a path
			continue
		}
		var badPath string // a reason for each of its operations
		switch {
		case !strings.HasPrefix(path, "/"):
			badPath = fmt.Sprintf("its path %q does not begin with \"/\", as OpenAPI requires: no URL is made of it", path)
		case strings.Contains(path, "?"):
			badPath = fmt.Sprintf("its path %q has a query, which OpenAPI's paths never hold (query parameters describe it): no URL is made of it", path)
		case strings.Contains(path, "#"):
			badPath = fmt.Sprintf("its path %q has a fragment, which OpenAPI's paths never hold: no URL is made of it", path)
		}
		v, err := resolve(root, paths[path])
		if err != nil { // which operations it holds is unknown: it stands for them
			o, derr := unresolved(base, docURL, root, paths[path], path, "", "its path item's "+err.Error())
			if derr != nil {
				return nil, derr
			}
			o.PathItem, o.Target.Name = true, path
			ops = append(ops, o)
			continue
		}
		item, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("conformance: path %s: not an object (a path item)", path)
		}
		item = withSiblings(paths[path], item)
		shared, sharedErr := parameters(root, item["parameters"])
		if sharedErr != nil {
			sharedErr = fmt.Errorf("its path item's %w", sharedErr)
		}
		members, err := itemOperations(item)
		if err != nil {
			return nil, fmt.Errorf("conformance: path %s: %w", path, err)
		}
		for _, mo := range members {
			m := mo.method
			v, err := resolve(root, mo.op)
			if err != nil { // whether it takes a key is unknown
				o, derr := unresolved(base, docURL, root, item, path, m, cmp.Or(mo.forbidden, "its "+err.Error()))
				if derr != nil {
					return nil, derr
				}
				ops = append(ops, o)
				continue
			}
			op, ok := v.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("conformance: %s %s: not an object (an operation)", m, path)
			}
			own, refErr := parameters(root, op["parameters"])
			if refErr != nil {
				refErr = fmt.Errorf("its %w", refErr)
			} else {
				refErr = sharedErr
			}
			params := mergeParams(shared, own)
			key, ok := params[paramID{"header", strings.ToLower(contract.HeaderKey)}]
			if !ok && refErr == nil { // else the broken one may be the key
				continue
			}
			server, err := serverURL(base, docURL, op["servers"], item["servers"], root["servers"])
			if err != nil && !ownServers(op, item) {
				// The document's: no operation could be sent.
				return nil, documentServerError(err)
			}
			o := operation(root, server, path, m, op, params, key)
			switch {
			case badPath != "":
				o.Unusable, o.NeedsBody, o.NeedsHeaders = badPath, false, nil
			case mo.forbidden != "": // which of the two is meant is unknown
				o.Unusable, o.NeedsBody, o.NeedsHeaders = mo.forbidden, false, nil
			case refErr != nil: // what it sends is unknown
				o.Unusable, o.NeedsBody, o.NeedsHeaders = refErr.Error(), false, nil
			case err != nil: // its own: the others may still be checked
				o.Unusable, o.NeedsBody, o.NeedsHeaders = "its "+err.Error(), false, nil
			}
			ops = append(ops, o)
		}
	}
	return append(ops, webhookOperations(root)...), nil
}

// unresolved is the Operation standing for what a $ref that does not
// resolve hides, the operation method (as sent) of path, Unusable for
// why, its URL the path after the server of the path item as written
// (item); the caller makes one standing for every operation of the path
// item a PathItem. derr is the error of a document whose own server no
// operation could be sent to.
func unresolved(base, docURL string, root map[string]any, item any, path, method, why string) (_ Operation, derr error) {
	written, _ := item.(map[string]any)
	server, err := serverURL(base, docURL, written["servers"], root["servers"])
	if err != nil && !ownServers(nil, written) {
		return Operation{}, documentServerError(err)
	}
	t := Target{Method: method, URL: server + path, Name: opName(method, path)}
	return Operation{Target: t, Path: path, Unusable: why}, nil
}

// withSiblings is target, what the object written's $ref resolved to,
// with the members written beside that $ref over its own, as OpenAPI 3.0
// allows beside a path item's; target itself when there are none.
func withSiblings(written any, target map[string]any) map[string]any {
	w, _ := written.(map[string]any)
	if _, isRef := w["$ref"]; !isRef || len(w) == 1 {
		return target
	}
	out := maps.Clone(target)
	for k, v := range w {
		if k != "$ref" {
			out[k] = v
		}
	}
	return out
}

// paramID identifies a parameter: its location and its name (lower case
// for a header, whose names are case-insensitive).
type paramID struct{ in, name string }

// parameters are the parameter objects of the list v by their paramID;
// err says that v is no list, or names the first entry whose $ref does
// not resolve or that is no object ("parameter 2: $ref ..."), whose
// place the others are returned without.
func parameters(root map[string]any, v any) (_ map[paramID]map[string]any, err error) {
	list, ok := v.([]any)
	if !ok && v != nil {
		return nil, errors.New("parameters: not an array (of parameter objects)")
	}
	out := make(map[paramID]map[string]any, len(list))
	for i, p := range list {
		r, rerr := resolve(root, p)
		pm, _ := r.(map[string]any)
		if rerr == nil && pm == nil {
			rerr = errors.New("not an object")
		}
		if rerr != nil && err == nil {
			err = fmt.Errorf("parameter %d: %w", i+1, rerr)
		}
		if pm == nil {
			continue
		}
		in, _ := pm["in"].(string)
		name, _ := pm["name"].(string)
		if in == "header" {
			name = strings.ToLower(name)
		}
		out[paramID{in, name}] = pm
	}
	return out, err
}

// mergeParams is the path item's parameters overridden by the
// operation's.
func mergeParams(shared, own map[paramID]map[string]any) map[paramID]map[string]any {
	out := make(map[paramID]map[string]any, len(shared)+len(own))
	for k, v := range shared {
		out[k] = v
	}
	for k, v := range own {
		out[k] = v
	}
	return out
}

func operation(root map[string]any, server, path, method string, op map[string]any, params map[paramID]map[string]any, key map[string]any) Operation {
	o := Operation{Path: path}
	t := Target{Method: method}
	t.KeyRequired, _ = key["required"].(bool)
	if id, _ := op["operationId"].(string); id != "" {
		t.Name = id
	} else {
		t.Name = opName(method, path)
	}
	filled, missing, pathErr := fillPath(root, path, params)
	query, missingQuery, queryErr := requiredQuery(root, params)
	t.URL = server + filled
	if query != "" {
		t.URL += "?" + query
	}
	header, missingHeaders, headerErr := requiredHeaders(root, params)
	cookie, missingCookie, cookieErr := requiredCookies(root, params)
	switch {
	case missingCookie: // the caller's -header gives them all
		missingHeaders = append(missingHeaders, "Cookie")
		slices.Sort(missingHeaders)
	case cookie != "":
		if header == nil {
			header = http.Header{}
		}
		header.Set("Cookie", cookie)
	}
	if len(header) > 0 {
		t.Header = header
	}
	hard := true // a reason the caller cannot make up for
	switch {
	case missing != "":
		o.Unusable = "path parameter " + missing + " has no example"
	case missingQuery != "":
		o.Unusable = missingQuery
	default:
		hard = false
		o.NeedsHeaders = missingHeaders
		if len(missingHeaders) > 0 {
			o.Unusable = MissingHeaderReason(missingHeaders[0])
		}
	}
	reqErr := requiredErrors(params)
	body, mediaType, required, bodyErr := requestExample(root, op)
	switch {
	case body != nil:
		t.Body = body
		t = withHeader(t, "Content-Type", mediaType)
	case required && !hard:
		o.NeedsBody = true
		if o.Unusable == "" {
			o.Unusable = MissingBodyReason
		}
		// The caller's body is then sent as the type the document
		// declares, not left to the JSON default.
		if mediaType != "" {
			t = withHeader(t, "Content-Type", mediaType)
		}
	}
	// A value behind a $ref that does not resolve is unknown: no flag
	// stands in for it, as the document is to be mended.
	if err := cmp.Or(reqErr, pathErr, queryErr, headerErr, cookieErr, bodyErr); err != nil {
		o.Unusable, o.NeedsBody, o.NeedsHeaders = err.Error(), false, nil
	}
	o.Target = t
	return o
}

// requiredOf is the required member of a parameter or request body
// object, false when absent; one that is no boolean ("true") is an error
// showing it, as what the document means by it is unknown.
func requiredOf(obj map[string]any) (bool, error) {
	v, ok := obj["required"]
	if !ok {
		return false, nil
	}
	b, ok := v.(bool)
	if !ok {
		raw, _ := json.Marshal(v)
		return false, fmt.Errorf("required is %s, not a boolean: write true or false", raw)
	}
	return b, nil
}

// requiredErrors names the first parameter, by location and name, whose
// required is no boolean (requiredOf).
func requiredErrors(params map[paramID]map[string]any) error {
	ids := make([]paramID, 0, len(params))
	for id := range params {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b paramID) int { return cmp.Or(cmp.Compare(a.in, b.in), cmp.Compare(a.name, b.name)) })
	for _, id := range ids {
		if _, err := requiredOf(params[id]); err != nil {
			name, _ := params[id]["name"].(string)
			return fmt.Errorf("its %s parameter %s: %w", id.in, name, err)
		}
	}
	return nil
}

// MissingBodyReason is an Operation's Unusable when its required request
// body has no example.
const MissingBodyReason = "its request body has no example: give -body"

// MissingHeaderReason is an Operation's Unusable when the required header
// name has no example; for Cookie, which stands for the required cookie
// parameters, when one of them has none (or one no cookie can carry).
func MissingHeaderReason(name string) string {
	if name == "Cookie" {
		return "a required cookie has no example a cookie can carry: give -header 'Cookie: name=value; ...'"
	}
	return "required header " + name + " has no example: give -header '" + name + ": ...'"
}

// withHeader is t with name set to value in a Header of its own.
func withHeader(t Target, name, value string) Target {
	h := t.Header.Clone()
	if h == nil {
		h = http.Header{}
	}
	h.Set(name, value)
	t.Header = h
	return t
}

// fillPath replaces the path's {parameters} with their values
// (paramValue), as their styles write them (pathSegment); missing names the first one without, err the first whose
// value is behind a $ref that does not resolve.
func fillPath(root map[string]any, path string, params map[paramID]map[string]any) (filled, missing string, err error) {
	var b strings.Builder
	rest := path
	for {
		i := strings.IndexByte(rest, '{')
		j := strings.IndexByte(rest, '}')
		if i < 0 || j < i {
			b.WriteString(rest)
			return b.String(), missing, err
		}
		b.WriteString(rest[:i])
		name := rest[i+1 : j]
		ex, ok, verr := paramValue(root, params[paramID{"path", name}])
		if verr != nil && err == nil {
			err = fmt.Errorf("path parameter %s: %w", name, verr)
		}
		seg, styled := pathSegment(params[paramID{"path", name}], name, ex)
		switch {
		case ok && styled:
			b.WriteString(seg)
		case ok: // no style writes it: as JSON text
			raw, _ := json.Marshal(ex)
			b.WriteString(escapeUnreserved(string(raw)))
		default:
			if missing == "" {
				missing = name
			}
			b.WriteString(rest[i : j+1])
		}
		rest = rest[j+1:]
	}
}

// requestExample returns the JSON example of op's request body, its media
// type, and whether the body is required. Without an example, mediaType is
// the type a body given instead should be sent as: the first JSON type the
// body declares, else its first type, never a wildcard or a multipart type
// (whose boundary only the body's maker knows; "" when none). err names
// a $ref that does not resolve on the way: the request body's, or a
// required body's example's before one is found (an optional body's is
// passed over: the operation can be sent without one); or the request
// body, its content, or a media type of it that is no object.
func requestExample(root map[string]any, op map[string]any) (body []byte, mediaType string, required bool, err error) {
	v, err := resolve(root, op["requestBody"])
	if err != nil {
		return nil, "", false, fmt.Errorf("its request body: %w", err)
	}
	if v == nil {
		return nil, "", false, nil
	}
	rb, ok := v.(map[string]any)
	if !ok {
		return nil, "", false, errors.New("its request body: not an object")
	}
	if required, err = requiredOf(rb); err != nil {
		return nil, "", false, fmt.Errorf("its request body: %w", err)
	}
	content, ok := rb["content"].(map[string]any)
	if !ok && rb["content"] != nil {
		return nil, "", false, errors.New("its request body's content: not an object (of media types)")
	}
	types := make([]string, 0, len(content))
	for mt := range content {
		types = append(types, mt)
	}
	sort.Strings(types)
	for _, mt := range types { // the first in name order, whichever is read
		if _, ok := content[mt].(map[string]any); !ok {
			return nil, "", false, fmt.Errorf("its request body's content (%s): not an object (a media type)", mt)
		}
	}
	var declared string
	for _, mt := range types {
		isJSON := strings.Contains(strings.ToLower(mt), "json")
		// A wildcard is no type to send, and a multipart type needs the
		// boundary of the body the caller gives (-H sets it).
		sendable := !strings.Contains(mt, "*") && !strings.HasPrefix(strings.ToLower(mt), "multipart/")
		if sendable && (declared == "" || isJSON && !strings.Contains(strings.ToLower(declared), "json")) {
			declared = mt
		}
		if !isJSON {
			continue
		}
		ex, ok, err := exampleOf(root, content[mt])
		if err != nil && !required { // sent without, as one that has none
			continue
		}
		if err != nil {
			return nil, "", false, fmt.Errorf("its request body's example (%s): %w", mt, err)
		}
		if ok {
			if raw, err := json.Marshal(ex); err == nil {
				return raw, mt, required, nil
			}
		}
	}
	return nil, declared, required, nil
}

// exampleOf returns the example of a parameter or media type object: its
// example, the value of its first examples entry (by name) that has one,
// or its schema's example (one beside the schema's $ref first). A $ref that does not resolve before one is
// found is an error: the example may be behind it.
func exampleOf(root map[string]any, v any) (any, bool, error) {
	r, err := resolve(root, v)
	if err != nil {
		return nil, false, err
	}
	obj, _ := r.(map[string]any)
	if obj == nil {
		return nil, false, nil
	}
	if ex, ok := obj["example"]; ok {
		return ex, true, nil
	}
	if exs, _ := obj["examples"].(map[string]any); len(exs) > 0 {
		names := make([]string, 0, len(exs))
		for n := range exs {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names { // one with only an externalValue is not read
			r, err := resolve(root, exs[n])
			if err != nil {
				return nil, false, fmt.Errorf("examples entry %q: %w", n, err)
			}
			if e, _ := r.(map[string]any); e != nil {
				if val, ok := e["value"]; ok {
					return val, true, nil
				}
			}
		}
	}
	beside, _ := obj["schema"].(map[string]any)
	if ex, ok := schemaExample(beside); ok { // beside its $ref, as 3.1 writes a schema
		return ex, true, nil
	}
	if r, err = resolve(root, obj["schema"]); err != nil {
		return nil, false, fmt.Errorf("schema: %w", err)
	}
	schema, _ := r.(map[string]any)
	ex, ok := schemaExample(schema)
	return ex, ok, nil
}

// schemaExample is the schema's example, else the first of its examples;
// the schema is taken as it is, its $ref not followed.
func schemaExample(schema map[string]any) (any, bool) {
	if ex, ok := schema["example"]; ok {
		return ex, true
	}
	if exs, _ := schema["examples"].([]any); len(exs) > 0 {
		return exs[0], true
	}
	return nil, false
}
