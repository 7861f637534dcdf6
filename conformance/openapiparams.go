package conformance

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"

	"github.com/saferetry/saferetry/internal/contract"
)

// ignoredHeaders are the header parameters OpenAPI says to ignore
// (Accept, Content-Type, Authorization), and the key, which the checker
// sends itself.
var ignoredHeaders = map[string]bool{
	"accept": true, "content-type": true, "authorization": true,
	strings.ToLower(contract.HeaderKey): true,
}

// requiredQuery is the query string of the operation's required query
// parameters, each with its example (or its schema's default), in name
// order, an array as its style and explode say (listSeparator), then of
// its required querystring parameter (OpenAPI 3.2: the whole query;
// querystring); missing says which is the first that has none a query
// can carry ("required query parameter q has no example"), err the first
// whose value is behind a $ref that does not resolve.
func requiredQuery(root map[string]any, params map[paramID]map[string]any) (query, missing string, err error) {
	var names, whole []string
	for id, p := range params {
		req, _ := p["required"].(bool)
		switch {
		case req && id.in == "query":
			names = append(names, id.name)
		case req && id.in == "querystring":
			whole = append(whole, id.name)
		}
	}
	sort.Strings(names)
	sort.Strings(whole)
	var parts []string
	for _, name := range names {
		v, ok, err := paramValue(root, params[paramID{"query", name}])
		if err != nil {
			return "", "", fmt.Errorf("required query parameter %s: %w", name, err)
		}
		if !ok {
			return "", "required query parameter " + name + " has no example", nil
		}
		values, ok := scalars(v)
		if !ok {
			return "", "required query parameter " + name + " has an example that is an object: no query can carry it", nil
		}
		if _, isList := v.([]any); isList && len(values) > 0 {
			if sep := listSeparator(params[paramID{"query", name}]); sep != "" {
				for i, s := range values {
					values[i] = url.QueryEscape(s)
				}
				parts = append(parts, url.QueryEscape(name)+"="+strings.Join(values, sep))
				continue
			}
		}
		for _, s := range values {
			parts = append(parts, url.QueryEscape(name)+"="+url.QueryEscape(s))
		}
	}
	for _, name := range whole {
		q, why, err := querystring(root, params[paramID{"querystring", name}])
		if err != nil {
			return "", "", fmt.Errorf("required querystring parameter %s: %w", name, err)
		}
		if why != "" {
			return "", "required querystring parameter " + name + " " + why, nil
		}
		if q != "" {
			parts = append(parts, q)
		}
	}
	return strings.Join(parts, "&"), "", nil
}

// querystring is the query OpenAPI 3.2's querystring parameter p
// describes with the example of its content's media type: a JSON type's
// as JSON text, every reserved character escaped (escapeUnreserved), a
// string as written, but for what no query may hold (escapeQuery), a
// form's object encoded as a form (its keys in order), whatever the
// type's parameters (charset); why says it has none a query can carry
// ("has no example").
func querystring(root map[string]any, p map[string]any) (q, why string, err error) {
	content, _ := p["content"].(map[string]any)
	if len(content) == 0 {
		return "", "has no content (a media type and its example)", nil
	}
	mt := firstMedia(content)
	ex, ok, err := exampleOf(root, content[mt])
	switch {
	case err != nil:
		return "", "", err
	case !ok:
		return "", "has no example", nil
	}
	mt = strings.ToLower(mt)
	if t, _, err := mime.ParseMediaType(mt); err == nil { // without its parameters (charset)
		mt = t
	}
	s, isString := ex.(string)
	form, isObject := ex.(map[string]any)
	switch {
	case strings.Contains(mt, "json"):
		if raw, err := json.Marshal(ex); err == nil {
			return escapeUnreserved(string(raw)), "", nil
		}
	case isString:
		return escapeQuery(strings.TrimPrefix(s, "?")), "", nil
	case isObject && mt == "application/x-www-form-urlencoded":
		values := url.Values{}
		for k, v := range form {
			vs, ok := scalars(v)
			if !ok {
				return "", "has an example no query can carry", nil
			}
			values[k] = vs
		}
		return values.Encode(), "", nil
	}
	return "", "has an example no query can carry", nil
}

// listSeparator is what separates an array's values in the one value of
// the query parameter p ("," for the form style with explode false, "%20"
// for spaceDelimited, "%7C" for pipeDelimited), or "" when the array is
// exploded into one name=value each (form's default, explode true).
func listSeparator(p map[string]any) string {
	style, _ := p["style"].(string)
	explode, set := p["explode"].(bool)
	if !set {
		explode = style == "" || style == "form" // the default for form only
	}
	if explode {
		return ""
	}
	switch style {
	case "spaceDelimited":
		return "%20"
	case "pipeDelimited":
		return "%7C"
	}
	return ","
}

// requiredHeaders are the operation's required header parameters with
// their examples (or their schema's defaults); missing names, canonical
// and sorted, those without one, or with one no header can carry; err
// the first (by name) whose value is behind a $ref that does not
// resolve.
func requiredHeaders(root map[string]any, params map[paramID]map[string]any) (h http.Header, missing []string, err error) {
	ids := make([]paramID, 0, len(params))
	for id := range params {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b paramID) int { return cmp.Compare(a.name, b.name) })
	for _, id := range ids {
		p := params[id]
		req, _ := p["required"].(bool)
		if !req || id.in != "header" || ignoredHeaders[id.name] {
			continue
		}
		name := http.CanonicalHeaderKey(id.name)
		v, ok, verr := paramValue(root, p)
		if verr != nil && err == nil {
			err = fmt.Errorf("required header %s: %w", name, verr)
		}
		values, scalar := scalars(v)
		if !ok || !scalar {
			missing = append(missing, name)
			continue
		}
		if h == nil {
			h = http.Header{}
		}
		h.Set(name, strings.Join(values, ","))
	}
	sort.Strings(missing)
	return h, missing, err
}

// requiredCookies is the Cookie header of the operation's required
// cookie parameters, "name=value" each with its example (or its schema's
// default), in name order, the value percent-encoded as the form style
// (the default) says (escapeUnreserved), or as it is for OpenAPI 3.2's
// cookie style; missing reports one without, or with one no cookie can
// carry (of the cookie style, one holding a space or a ";"), or whose
// name is no token; err names the first whose value is behind a $ref
// that does not resolve.
func requiredCookies(root map[string]any, params map[paramID]map[string]any) (cookie string, missing bool, err error) {
	var names []string
	for id, p := range params {
		if req, _ := p["required"].(bool); req && id.in == "cookie" {
			names = append(names, id.name)
		}
	}
	sort.Strings(names)
	var pairs []string
	for _, name := range names {
		v, ok, verr := paramValue(root, params[paramID{"cookie", name}])
		if verr != nil {
			return "", false, fmt.Errorf("required cookie %s: %w", name, verr)
		}
		values, scalar := scalars(v)
		if !ok || !scalar || !contract.ValidToken(name) {
			missing = true
			continue
		}
		style, _ := params[paramID{"cookie", name}]["style"].(string)
		for i, s := range values {
			switch {
			case style != "cookie": // form's, the default: encoded
				values[i] = escapeUnreserved(s)
			case !cookieValue(s): // OpenAPI 3.2's cookie style: as it is
				missing = true
			}
		}
		if !missing {
			pairs = append(pairs, name+"="+strings.Join(values, ","))
		}
	}
	return strings.Join(pairs, "; "), missing, nil
}

// paramValue is the parameter's example, else that of the media type of
// its content (contentValue), else its schema's default, else the first
// value of its schema's enum (those beside the schema's $ref first); err
// names a $ref that does not resolve on the way (exampleOf).
func paramValue(root map[string]any, p map[string]any) (any, bool, error) {
	ex, ok, err := exampleOf(root, p)
	if ok || err != nil {
		return ex, ok, err
	}
	if ex, ok, err := contentValue(root, p["content"]); ok || err != nil {
		return ex, ok, err
	}
	beside, _ := p["schema"].(map[string]any) // as 3.1 writes a schema: beside its $ref
	r, _ := resolve(root, p["schema"])        // exampleOf resolved it
	target, _ := r.(map[string]any)
	for _, schema := range []map[string]any{beside, target} {
		if def, ok := schema["default"]; ok {
			return def, true, nil
		}
		if enum, _ := schema["enum"].([]any); len(enum) > 0 {
			return enum[0], true, nil
		}
	}
	return nil, false, nil
}

// contentValue is the example of the media type of a parameter's
// content (firstMedia), as that type
// serializes it: for a JSON type its JSON text, else as it is.
func contentValue(root map[string]any, v any) (any, bool, error) {
	content, _ := v.(map[string]any)
	if len(content) == 0 {
		return nil, false, nil
	}
	mt := firstMedia(content)
	ex, ok, err := exampleOf(root, content[mt])
	if !ok || err != nil {
		return nil, false, err
	}
	if strings.Contains(strings.ToLower(mt), "json") {
		raw, err := json.Marshal(ex)
		if err != nil {
			return nil, false, nil
		}
		return string(raw), true, nil
	}
	return ex, true, nil
}

// firstMedia is the media type of a parameter's content that is read,
// the first by name: OpenAPI allows it one.
func firstMedia(content map[string]any) string {
	return slices.Min(slices.Collect(maps.Keys(content)))
}

// scalars is v as the strings a query or a header carries: a scalar's
// text, or an array's scalars (the form style's exploded array); false
// for an object, or an array holding one.
func scalars(v any) ([]string, bool) {
	if list, ok := v.([]any); ok {
		out := make([]string, 0, len(list))
		for _, e := range list {
			s, ok := scalar(e)
			if !ok {
				return nil, false
			}
			out = append(out, s)
		}
		return out, true
	}
	s, ok := scalar(v)
	if !ok {
		return nil, false
	}
	return []string{s}, true
}

func scalar(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case nil:
		return "", true
	case map[string]any, []any:
		return "", false
	default: // json.Number, bool
		raw, err := json.Marshal(x)
		return string(raw), err == nil
	}
}
