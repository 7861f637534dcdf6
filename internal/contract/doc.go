// Package contract is the wire contract that both halves of saferetry share
// (see CONTRACT.md): the client (the root package and its integrations) and
// the server (package idempotency and the mockserver built on it) call it,
// and nothing else in the module parses an Idempotency-Key, writes or reads
// a problem document, or says which statuses are retried and which stored.
//
// It holds:
//
//   - the Idempotency-Key grammar: [ParseKey], [ParseKeyFields],
//     [ValidKey], [FormatKey], [MaxKeyLen] and the header names;
//   - RFC 9457 problem documents: [WriteProblem] and [DecodeProblem];
//   - the headers every replay carries: [ReplayHeaders];
//   - the text of a UUID key, generated or derived: [EncodeUUID];
//   - the status tables: [Retried] (client rule 3) and [Stored] (the
//     server's rule of which outcomes are stored), defined side by side
//     because each half relies on the other's.
//
// It imports only the standard library, so both halves may depend on it
// without depending on each other.
package contract
