package protocol

import "time"

// Limits of the wire. They bound what one side may ask of the other.
const (
	// MaxMessageBytes caps one JSON-RPC message (one line). A longer line is
	// a protocol error that closes the connection; anything larger belongs
	// in an artifact.
	MaxMessageBytes = 16 << 20

	// MaxChunkBytes caps one artifact chunk. Each chunk is acknowledged
	// before the next is sent: that acknowledgement is the backpressure.
	MaxChunkBytes = 256 << 10

	// MaxInflight is how many requests each side serves at once. Over it a
	// side answers overloaded rather than pausing its reader.
	MaxInflight = 64

	// InTransactionDeadlineMillis is the hard deadline of an in-transaction
	// method (recurrence.next, work_kind.trigger, dependency.filter,
	// emit.commit).
	InTransactionDeadlineMillis = 250

	// MaxPageLimit is the largest page a paged read returns (state.events,
	// state.work_events, state.works, kv.list). A larger limit reads this
	// many; a limit of zero or less reads the host's default page.
	MaxPageLimit = 1000
)

// InTransactionDeadline is InTransactionDeadlineMillis as a duration.
const InTransactionDeadline = InTransactionDeadlineMillis * time.Millisecond
