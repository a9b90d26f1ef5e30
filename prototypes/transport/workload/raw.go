package workload

import (
	"encoding/binary"
	"io"
)

// The raw pipe floor: frames of a 4-byte big-endian length and a payload,
// no JSON at all. The extension answers an echo frame ('E' first) with the
// same frame and any other (a chunk) with a 1-byte acknowledgement.

// WriteFrame writes one frame in a single write.
func WriteFrame(w io.Writer, buf, payload []byte) ([]byte, error) {
	buf = binary.BigEndian.AppendUint32(buf[:0], uint32(len(payload)))
	buf = append(buf, payload...)
	_, err := w.Write(buf)
	return buf, err
}

// ReadFrame reads one frame into buf (grown as needed).
func ReadFrame(r io.Reader, buf []byte) ([]byte, error) {
	var head [4]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return buf, err
	}
	n := int(binary.BigEndian.Uint32(head[:]))
	if cap(buf) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	_, err := io.ReadFull(r, buf)
	return buf, err
}
