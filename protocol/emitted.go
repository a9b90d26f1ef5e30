package protocol

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
)

// EmittedEventIDPrefix starts every id EmittedEventID makes.
const EmittedEventIDPrefix = "evt_"

// EmittedEventID is the id the host gives an Event an extension emits with
// kv.commit, computed from the Event's identity alone so the extension can
// name the Event in the same batch's records before it is accepted, and so
// emitting the same identity again names the same Event.
//
// The id is "evt_" followed by the lower-case hex SHA-256 digest of
// len(source) as 8 bytes big-endian, source, len(deliveryID) as 8 bytes
// big-endian, and deliveryID. The length prefixes keep ("a", "bc") and
// ("ab", "c") apart. An extension in another language computes the same id
// the same way.
func EmittedEventID(source, deliveryID string) string {
	h := sha256.New()
	var n [8]byte
	for _, s := range [...]string{source, deliveryID} {
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	return EmittedEventIDPrefix + hex.EncodeToString(h.Sum(nil))
}
