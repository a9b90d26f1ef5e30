package sdk

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/open-conduit/open-conduit/protocol"
)

// A handler operation must be idempotent on its call's request id: the host
// commits a handler's result under the id only after the handler returns,
// so a crash, a cancellation or a restart in between makes the caller
// retry with the same id, and the handler runs again. IntentKey and Once
// make an effect that is not naturally idempotent happen once.

// IntentKey derives the identity of one effect of one call: the same
// request id and what give the same key, in this process or any other.
// Write it into what the effect creates (a comment's hidden marker, a
// record's field) so a retry can look for it before acting.
func IntentKey(requestID, what string) string {
	h := sha256.New()
	var n [8]byte
	for _, s := range [...]string{requestID, what} {
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	return "intent-" + hex.EncodeToString(h.Sum(nil)[:16])
}

// OnceNamespace is the KV namespace suffix Once keeps its records under:
// the extension's name + OnceNamespace.
const OnceNamespace = ".sdk-once"

// Intent is what Once tells the effect it guards.
type Intent struct {
	// Key is the intent's identity (the key Once was given).
	Key string
	// Resumed says an earlier attempt recorded the intent and did not
	// record finishing it: the effect may have happened. Look for Key in
	// what the effect creates before acting again.
	Resumed bool
}

type onceRecord struct {
	Done   bool            `json:"done"`
	Result json.RawMessage `json:"result,omitempty"`
}

// Once runs effect at most once to completion per key (a request id, or an
// IntentKey for one of several effects of a call), recording in the
// extension's KV that the intent started before effect runs and its
// result after. A later call with the same key returns the recorded
// result without running effect; one that finds the intent started but
// not finished runs effect again with Resumed set, so it can check
// whether the first attempt got through. An empty key records nothing and
// always runs effect (a call without a request id cannot be told from a
// new call). An error from effect is returned and leaves the intent
// started.
func Once(ctx context.Context, h *Host, key string, effect func(ctx context.Context, in Intent) (json.RawMessage, error)) (json.RawMessage, error) {
	if key == "" {
		return effect(ctx, Intent{})
	}
	if h.m == nil {
		return nil, errors.New("sdk: Once needs a Host that knows its manifest")
	}
	ns := h.m.Name + OnceNamespace
	var prior onceRecord
	found := false
	_, err := h.Update(ctx, func(t *Txn) error {
		prior, found = onceRecord{}, false
		var err error
		if found, err = t.GetJSON(ns, key, &prior); err != nil || found {
			return err
		}
		return t.Put(ns, key, onceRecord{})
	})
	if err != nil {
		return nil, fmt.Errorf("sdk: recording intent %s: %w", key, err)
	}
	if found && prior.Done {
		return prior.Result, nil
	}
	result, err := effect(ctx, Intent{Key: key, Resumed: found})
	if err != nil {
		return nil, err
	}
	done, err := json.Marshal(onceRecord{Done: true, Result: result})
	if err != nil {
		return nil, fmt.Errorf("sdk: recording intent %s: %w", key, err)
	}
	if _, err := h.Commit(ctx, protocol.KVCommitParams{Puts: []protocol.KVPut{{Namespace: ns, Key: key, Value: done}}}); err != nil {
		return nil, fmt.Errorf("sdk: recording intent %s done: %w", key, err)
	}
	return result, nil
}
