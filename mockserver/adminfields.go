package mockserver

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
)

// adminRange is the range of an admin request field, every one of which
// is an integer, inclusive.
type adminRange struct{ min, max int64 }

// adminRanges are the ranges of the admin request fields, by JSON name: a
// field of every admin request type has one (TestAdminFieldRanges).
var adminRanges = map[string]adminRange{
	"count":      {0, MaxFaultCount},
	"status":     {400, 599},
	"delay_ms":   {0, maxAdminMS},
	"latency_ms": {0, maxAdminMS},
}

// adminFieldDetail says what the admin field called name takes and what it
// got instead, got as written in JSON or as a kind of value ("a string"),
// in the API's words: the detail of a 400 answer, for a client in any
// language to read, where encoding/json's error names Go's types.
func adminFieldDetail(name, got string) string {
	r := adminRanges[name]
	detail := fmt.Sprintf("%s must be an integer from %d to %d; got %s", name, r.min, r.max, got)
	if strings.ContainsAny(got, ".eE") && strings.ContainsAny(got[:1], "-0123456789") {
		detail += ": an integer is written without a fraction or an exponent"
	}
	return detail
}

// adminDecodeDetail is the detail of a 400 answer to an admin body that
// encoding/json could not decode into its request type: what the field,
// or the body as a whole, must be, without Go's words.
func adminDecodeDetail(err error) string {
	var ute *json.UnmarshalTypeError
	if !errors.As(err, &ute) {
		return "body must be a JSON object of the documented fields: " + err.Error()
	}
	if _, ok := adminRanges[ute.Field]; ok {
		return adminFieldDetail(ute.Field, jsonValueName(ute.Value))
	}
	return "body must be a JSON object of the documented fields, not " + jsonValueName(ute.Value)
}

// jsonValueName names the JSON value that encoding/json's
// UnmarshalTypeError.Value describes: a number as written, when it is
// given, or its kind.
func jsonValueName(v string) string {
	if lit, ok := strings.CutPrefix(v, "number "); ok {
		return lit
	}
	switch v {
	case "bool":
		return "a boolean"
	case "array", "object":
		return "an " + v
	}
	return "a " + v
}

// checkAdminRanges refuses a field given in fr, an admin request, whose
// value is outside its range, with the field's detail as the error.
func checkAdminRanges[T any](fr T) error {
	v := reflect.ValueOf(fr)
	for i, name := range adminFields[T]() {
		f := v.Field(i)
		if f.IsNil() {
			continue
		}
		n := f.Elem().Int()
		if r := adminRanges[name]; n < r.min || n > r.max {
			return errors.New(adminFieldDetail(name, strconv.FormatInt(n, 10)))
		}
	}
	return nil
}
