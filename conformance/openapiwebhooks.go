package conformance

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/saferetry/saferetry/internal/contract"
)

// webhookOperations are the operations of the document's webhooks
// (OpenAPI 3.1's) that declare Idempotency-Key, their own or their path
// item's, in webhook then method order, each Unusable: the API sends a
// webhook's requests, to its consumers, so no request the checker sends
// to the API checks it. They are told rather than passed over, as a
// document may take a key only there. A webhook whose path item or
// operation does not resolve, or is no object, is passed over: whether
// it takes a key is unknown, and it could not be checked anyway.
func webhookOperations(root map[string]any) []Operation {
	hooks, _ := root["webhooks"].(map[string]any)
	var ops []Operation
	for _, name := range slices.Sorted(maps.Keys(hooks)) {
		v, err := resolve(root, hooks[name])
		item, _ := v.(map[string]any)
		if err != nil || item == nil {
			continue
		}
		item = withSiblings(hooks[name], item)
		shared, _ := parameters(root, item["parameters"])
		members, _ := itemOperations(item)
		for _, mo := range members {
			v, err := resolve(root, mo.op)
			op, _ := v.(map[string]any)
			if err != nil || op == nil {
				continue
			}
			own, _ := parameters(root, op["parameters"])
			key, ok := mergeParams(shared, own)[paramID{"header", strings.ToLower(contract.HeaderKey)}]
			if !ok {
				continue
			}
			t := Target{Method: mo.method, Name: opName(mo.method, "webhook "+name)}
			t.KeyRequired, _ = key["required"].(bool)
			if id, _ := op["operationId"].(string); id != "" {
				t.Name = id
			}
			ops = append(ops, Operation{Target: t, Webhook: name, Unusable: webhookReason(name)})
		}
	}
	return ops
}

// webhookReason is the Unusable of an operation of the webhook name.
func webhookReason(name string) string {
	return fmt.Sprintf("webhook %q: the API sends its requests, to a consumer, and the checker only sends requests to the API, "+
		"so it cannot check it (to check how a consumer honours the key, give the consumer's endpoint as -url)", name)
}
