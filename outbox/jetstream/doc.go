// Package jetstream connects package outbox to NATS JetStream: Publisher
// is the relay's outbox.Publisher, and Consume runs a consumer's handler
// through an outbox.Inbox, acknowledging each message only after its
// effect committed.
//
// Publisher sends each message with the Nats-Msg-Id header set to its ID,
// so that the stream drops a republished message (a relay killed between
// publishing and marking publishes its batch again) within the stream's
// Duplicates window (two minutes by default); past that window the
// consumer's inbox drops it. Consume gives the inbox the message ID from
// that same header, so the two deduplications agree.
package jetstream
