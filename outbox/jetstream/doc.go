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
//
// A consumer that reads the stream without an inbox (a plain JetStream
// subscriber) sees a message twice whenever it is published again after
// the window. The relay leaves pending, for the next relay that runs, a
// batch whose marks it could not write (a relay killed, or its database
// lost, after publishing), and, when its Run stops, the messages of the
// batch in flight whose acknowledgements had not come (the Publisher
// stops waiting when the relay's context ends, though the stream may
// store them a moment later); when no relay runs again within the window
// (a single instance down for longer than two minutes, say), the stream
// stores them a second time. So it does with a message that failed on an
// acknowledgement that never came (the stream had it) and is published
// again after the window: retried after a backoff longer than the window
// (WithBackoff), or redriven later (Outbox.Redrive). Such a consumer needs
// a Duplicates window longer than any of these delays, or an inbox.
//
// A message's Headers travel as NATS headers, and Consume hands each name
// and value back as it was enqueued (names differing only in case stay
// distinct). NATS cannot carry every header so: nats.go trims a value's
// leading and trailing spaces and tabs, turns CR and LF into spaces and
// refuses names outside printable ASCII; JetStream refuses a header block
// over 64 KiB and reads Nats-* names as directives; and the Publisher
// sets Nats-Msg-Id and Outbox-Key itself. Rather than publish such a
// message changed, the Publisher refuses it (ErrHeaderNotCarried, which
// wraps outbox.ErrUnpublishable): the relay logs the error and marks the
// message failed at once, kept and listed by Outbox.Failed with the
// offending header named, while its Key's next messages are published.
// A message larger than the server's max_payload, or than its stream's
// MaxMsgSize (ErrTooLarge), or whose subject JetStream cannot take (white
// space, an empty token, a wildcard token, a $JS.API., $JS.<domain>.API.
// or $JS.ACK. beginning, over 3,840 bytes: ErrInvalidSubject), is failed
// so too. Call the
// Publisher's CheckMessage (or, without a Publisher, the package's, which
// checks the headers alone) before Enqueue to refuse such messages in the
// request instead; neither knows the stream's MaxMsgSize.
//
// Every other refusal is taken for one that may pass, so the relay
// retries it with backoff, holding the message's Key, and marks the
// message failed after WithMaxAttempts: no stream takes the subject (none
// made yet, or deleted while the relay runs: "no response from stream"),
// the stream is full under DiscardNew (MaxMsgs, MaxBytes,
// MaxMsgsPerSubject: "maximum messages exceeded"), sealed, or over its
// account's JetStream limits ("resource limits exceeded for account"), and
// the connection is down or closed. A closed nats.Conn never reconnects,
// so each message fails in turn: connect the Publisher's with
// nats.MaxReconnects(-1).
//
// Consume goes on after a NATS server restart once the connection is
// back, and returns ErrConnectionClosed when the connection closes for
// good, and ErrConsumerDeleted when its consumer, or its stream, is
// deleted (a consumer made again under that name is another: call
// Consume with it). While a handler runs, it extends its message's AckWait
// (working acknowledgements every third of it), so a slow handler's
// message is not redelivered meanwhile, nor its MaxDeliver spent. Consume
// fetches a message only once it is ready to handle it, so that no
// message waits behind a handler, unextended, and is redelivered (one of
// its MaxDeliver spent, and lost if that was its last and the process
// dies) without having been handled. WithPrefetch lets it fetch ahead, for
// throughput where a round trip to JetStream weighs against a handler's
// transaction: that holds then as long as that many handlings take less
// than AckWait. A Consume that stops hands back the messages it fetched
// and did not handle, to be redelivered at once, but handles before
// returning those on their last delivery (MaxDeliver), which JetStream
// would not redeliver (all of them, though a handler panics on one); so
// does a Consume that a handler's panic ends, before the panic goes up. A
// process that dies loses those it held on their
// last delivery: without WithPrefetch, at most the one it was handling or
// receiving.
package jetstream
