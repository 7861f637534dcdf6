// Package outbox publishes events exactly when the transaction that
// records them commits (the transactional outbox), and lets their
// consumers take effect once per event (the inbox), over PostgreSQL.
//
// A service writes its business rows and, with Enqueue, its events in one
// transaction; in idempotency's transactional mode (pgstore.NewTx) that is
// also the transaction of the idempotency record, so a request, its stored
// answer and its events commit together or not at all. A Relay publishes
// what committed through a Publisher (package outbox/jetstream: NATS
// JetStream). A consumer runs its effect with Inbox.Process, which records
// the message ID in the effect's own transaction.
//
// # What it guarantees
//
//   - A rolled-back transaction publishes nothing; a committed one
//     publishes each of its messages at least once, whatever relay dies
//     when.
//   - Enqueueing a message ID that is already there adds nothing: the
//     default ID is the protected request's idempotency.DerivedKey, so a
//     re-run of the request after a takeover enqueues no second event.
//   - No committed message is skipped: relays select rows by state, never
//     by a position in a sequence, so transactions committing out of ID
//     order are all published.
//   - Several relays (several instances) share the work without holding a
//     message at once, and hand the messages of one Key to their Publisher
//     in the order their transactions committed, a Key's next message only
//     after its earlier ones are published or failed.
//   - A message whose publication keeps failing is put off with backoff,
//     then marked failed after WithMaxAttempts: kept, listed by Failed,
//     put back by Redrive; never dropped. One its Publisher can never
//     publish as it is (ErrUnpublishable: a header the broker would
//     change, a message too large, a subject the broker cannot take) is
//     marked failed at once, so its Key's next messages go on.
//   - Inbox.Process runs a consumer's effect at most once per (consumer,
//     message ID), committed with the record of it; a failed effect leaves
//     nothing, so the redelivery runs it again.
//
// At least once plus a deduplicating consumer is exactly one effect per
// event: JetStream drops a republished message ID within its stream's
// Duplicates window, and the inbox drops whatever comes again after that.
//
// # Under which faults
//
//	fault                                       outcome
//	handler's transaction rolls back            no message
//	relay killed between publish and mark       batch republished (broker dedup, inbox drops it)
//	relay's database connection lost            batch rolled back, republished later
//	publisher fails (broker down, timeouts)     backoff, attempts counted, failed after the limit
//	publisher panics                            the same for its batch; the panic goes up through Run or RunOnce
//	broker refuses for now (no stream, full)    the same, the message's Key held meanwhile
//	broker can never take the message as it is  failed at once (ErrUnpublishable), its Key goes on
//	two relays at once                          row locks: each message held by one relay
//	LISTEN connection lost                      polling (WithPollInterval) until it is back
//	consumer killed after commit, before ack    redelivered, inbox says duplicate, acked
//	consumer's effect fails                     rolled back with its inbox row, redelivered, run again
//
// Ordering holds at the Publisher: a Publisher that pipelines a batch (as
// the jetstream one does) and loses one message in flight while a later
// one of the same Key gets through delivers that Key out of order. A
// redriven message is published after its Key's pending ones.
//
// # Costs
//
// Enqueue is one round trip in the caller's transaction and holds a per-Key
// advisory lock until commit (transactions of one Key commit one after the
// other; use an entity's ID as Key). A relay batch is one transaction of
// two round trips (BEGIN with the claim; the marks with COMMIT) around one
// Publish call, committed without waiting for the disk (a lost mark only
// republishes); WithWorkers keeps several batches in flight. A claim looks
// at a bounded window of the oldest pending rows (4 × the batch size + 64),
// whatever the backlog. A known limit follows: when the window fills with
// rows that wait out a backoff (one Key holding more pending rows than the
// window with its oldest failing, or as many Keys as the window whose
// oldest rows all fail, as a topic the broker refuses, keyed by entity,
// makes them), the rows behind the window wait too, until those messages
// are published or marked failed (with the default batch of 100 and
// backoff, about 50 s for 10 attempts, the nine waits between them 0.1 s
// doubling to 25.6 s, plus the polls; for ever with a WithMaxAttempts that
// never gives up). Unkeyed rows in backoff leave the window to the rest. A
// batch whose first message the broker refuses for now (nothing of it
// published: a full stream, a subject no stream takes) leaves that
// message's topic out of the relay's claims for a poll interval (its
// Keys wait behind it), rather than hand the rest of the topic's backlog
// to a broker that refuses it, batch after batch; the other topics'
// messages go on being published (a broker that refuses every topic, as
// a full stream that takes them all does, is handed one batch per topic
// per poll interval). A batch that the Publisher fails as a whole (with
// an error that is no *PublishError) ends the relay's run of batches
// until the poll interval passes or a message is enqueued. Published
// rows are deleted after the retention period (WithRetention), inbox rows
// when the caller says (Inbox.DeleteProcessed).
package outbox
