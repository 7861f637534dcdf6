package conformance_test

import (
	"slices"
	"testing"

	"github.com/saferetry/saferetry/conformance"
)

// TestFromOpenAPIWebhooks: an operation of the document's webhooks
// (OpenAPI 3.1) that declares Idempotency-Key, its own or its path
// item's, through a $ref or not, is returned after the paths' operations,
// in webhook order, unusable: the API sends it, to a consumer, so the
// checker cannot. They were passed over without a word, and a document
// of webhooks only found no operation at all.
func TestFromOpenAPIWebhooks(t *testing.T) {
	key := `"parameters": [{"name": "Idempotency-Key", "in": "header"}]`
	webhooks := `"webhooks": {
		"paymentSucceeded": {"post": {"operationId": "onPaymentSucceeded", ` + key + `}},
		"refunded": {"$ref": "#/components/pathItems/refunded"},
		"ping": {"post": {"operationId": "onPing"}}},
		"components": {"pathItems": {"refunded": {` + key + `, "put": {}}}}`
	for _, tc := range []struct {
		name, paths string
		want        []string
	}{
		{"with paths", `"paths": {"/payments": {"post": {"operationId": "createPayment", ` + key + `}}},`,
			[]string{"createPayment", "onPaymentSucceeded", "PUT webhook refunded"}},
		{"webhooks only", "", []string{"onPaymentSucceeded", "PUT webhook refunded"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc := []byte(`{"openapi": "3.1.0", "info": {"title": "t", "version": "1"}, "servers": [{"url": "http://h"}], ` + tc.paths + webhooks + `}`)
			ops, err := conformance.FromOpenAPI(doc, "", "")
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, o := range ops {
				names = append(names, o.Target.Name)
			}
			if !slices.Equal(names, tc.want) {
				t.Fatalf("operations %q; want %q", names, tc.want)
			}
			for _, o := range ops {
				if o.Target.Name == "createPayment" {
					if o.Unusable != "" {
						t.Errorf("createPayment: Unusable %q; want it usable", o.Unusable)
					}
					continue
				}
				if o.Target.URL != "" || o.Path != "" {
					t.Errorf("%s: URL %q, path %q; want none, as a webhook has neither", o.Target.Name, o.Target.URL, o.Path)
				}
				hook := map[string]string{"onPaymentSucceeded": `"paymentSucceeded"`, "PUT webhook refunded": `"refunded"`}[o.Target.Name]
				saysAll(t, o.Target.Name+": Unusable", o.Unusable, []string{"webhook " + hook, "the API sends", "consumer"})
			}
		})
	}
}
