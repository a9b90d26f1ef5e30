package runtime

// Limits a Store enforces on what it is asked to keep. Input over a limit is
// refused before anything is written.
const (
	// MaxKVValueBytes caps one KV value (1 MiB); a larger value is
	// ErrTooLarge. Anything bigger belongs in an artifact.
	MaxKVValueBytes = 1 << 20

	// MaxNamespaceBytes caps a KV namespace. A namespace must be non-empty,
	// valid UTF-8 and free of control characters.
	MaxNamespaceBytes = 128

	// MaxKeyBytes caps a KV key. A key must be non-empty valid UTF-8.
	MaxKeyBytes = 512

	// MaxPayloadBytes caps an Event payload and every other JSON document a
	// record carries (Work display and context, recovery metadata, timer
	// payloads, toolbelt results); a larger one is ErrTooLarge.
	MaxPayloadBytes = 1 << 20

	// MaxIdentifierBytes caps identifiers: record IDs, sources, delivery
	// IDs, families, types, schemas, kinds, keys of Work and Waits. An
	// identifier must be valid UTF-8 without control characters.
	MaxIdentifierBytes = 512

	// MaxJSONDepth caps the nesting of a JSON document.
	MaxJSONDepth = 256

	// DefaultPageLimit is the page size of a read whose limit is zero or
	// negative; MaxPageLimit is the largest page a read returns.
	DefaultPageLimit = 100
	MaxPageLimit     = 1000
)
