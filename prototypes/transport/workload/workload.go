// Package workload is what every transport of the prototype carries: the
// extension-side methods the host calls, the host callbacks the extension
// makes, and their wire shapes, so that each transport moves the same bytes
// of JSON and only the carrier differs.
package workload

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"math/rand/v2"
	"os"
	"sync"
)

// The extension-side methods. Over bare JSON-RPC they are the method names;
// over go-plugin they are the method of the JSON envelope; over the full
// stack each is an operation of the SDK extension, called with
// operation.call.
const (
	MethodInitialize  = "initialize"
	MethodEcho        = "bench.echo"
	MethodFail        = "bench.fail"
	MethodCallback    = "bench.callback"
	MethodPush        = "bench.push"
	MethodBlock       = "bench.block"
	MethodBlockStart  = "bench.block_started"
	MethodCancelSeen  = "bench.cancel_seen"
	MethodRelease     = "bench.release"
	MethodCrash       = "bench.crash"
	MethodStdout      = "bench.stdout"
	MethodUpload      = "bench.upload"         // full stack: the extension uploads to the host
	MethodChunk       = "bench.artifact_write" // bare and go-plugin: the host uploads to the extension
	MethodChunkCommit = "bench.artifact_commit"

	// Host-side methods the extension calls back.
	MethodHostEcho = "host.echo"
	MethodHostPush = "host.push"
)

// Version is the protocol version every extension of the prototype speaks;
// the version-mismatch figure offers only BadVersion.
const (
	Version    = 1
	BadVersion = 99
)

// Wire shapes.
type (
	InitializeParams struct {
		ProtocolVersions []int  `json:"protocol_versions"`
		BrokerID         uint32 `json:"broker_id,omitempty"` // go-plugin: where the host serves callbacks
	}
	InitializeResult struct {
		ProtocolVersion int    `json:"protocol_version"`
		Name            string `json:"name"`
	}
	EchoParams struct {
		Seq  int    `json:"seq"`
		Text string `json:"text"`
	}
	FailParams struct {
		Code       string `json:"code,omitempty"`
		Message    string `json:"message,omitempty"`
		Unauthored string `json:"unauthored,omitempty"`
	}
	CallbackParams struct {
		N int `json:"n"`
	}
	CallbackResult struct {
		Count int `json:"count"`
	}
	HostEcho struct {
		Seq int `json:"seq"`
	}
	PushParams struct {
		Value string `json:"value"`
	}
	PushAnswer struct {
		Ack string `json:"ack"`
	}
	PushResult struct {
		HostAnswer string `json:"host_answer"`
	}
	TokenParams struct {
		Token string `json:"token"`
	}
	SeenResult struct {
		Seen bool `json:"seen"`
		// SeenAt is when the handler saw its cancellation, in Unix
		// nanoseconds of the machine's wall clock.
		SeenAt int64 `json:"seen_at"`
	}
	OK struct {
		OK bool `json:"ok"`
	}
	ChunkParams struct {
		Upload string `json:"upload"`
		Offset int64  `json:"offset"`
		Data   []byte `json:"data"`
	}
	ChunkAck struct {
		Bytes int64 `json:"bytes"`
	}
	CommitParams struct {
		Upload string `json:"upload"`
		Bytes  int64  `json:"bytes"`
		SHA256 string `json:"sha256"`
	}
	CommitResult struct {
		Bytes  int64  `json:"bytes"`
		SHA256 string `json:"sha256"`
		// ChunksNanos is how long the writer took to have every chunk
		// acknowledged, the commit left out (on the full stack it makes
		// the blob durable: an fsync and a store transaction); the
		// artifact figure is Bytes over it.
		ChunksNanos int64 `json:"chunks_ns,omitempty"`
	}
	// UploadParams asks the full-stack extension to write an artifact of
	// Bytes bytes of Data(Seed) in chunks of Chunk to the host.
	UploadParams struct {
		RunID string `json:"run_id"`
		Bytes int    `json:"bytes"`
		Chunk int    `json:"chunk"`
		Seed  byte   `json:"seed"`
	}
)

// StrayOutput is what bench.stdout prints on the extension's os.Stdout.
const StrayOutput = "stray output from extension code\n"

// EchoText is the echo's payload: short, with characters that need escaping,
// as the transport suite's echo has.
const EchoText = "hello, extension \u00e9\"\\\n"

// Data returns n deterministic bytes for an upload, the same on both ends,
// and their Digest; both are made once per size and seed, so that a timed
// upload times the transport, not the generator or the hash.
func Data(n int, seed byte) ([]byte, string) {
	dataMu.Lock()
	defer dataMu.Unlock()
	k := dataKey{n, seed}
	if d, ok := dataMemo[k]; ok {
		return d.b, d.digest
	}
	b := make([]byte, n)
	_, _ = rand.NewChaCha8([32]byte{'u', 'p', seed}).Read(b)
	d := memo{b, Digest(b)}
	dataMemo[k] = d
	return d.b, d.digest
}

type dataKey struct {
	n    int
	seed byte
}

type memo struct {
	b      []byte
	digest string
}

var (
	dataMu   sync.Mutex
	dataMemo = map[dataKey]memo{}
)

// Digest is the hex SHA-256 of b.
func Digest(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// ErrUnknownMethod is what every transport's unknown-method answer maps to.
var ErrUnknownMethod = errors.New("method not found")

// ErrInternal is an unauthored failure, carried with no detail.
var ErrInternal = errors.New("internal error")

// ErrBroken is a broken transport: the extension is gone.
var ErrBroken = errors.New("transport broken")

// CrashNow is the crash hook of every extension binary.
func CrashNow() { os.Exit(3) }
