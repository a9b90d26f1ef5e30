package packages

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// The operations a ledger records.
const (
	OpInstall  = "install"
	OpUpdate   = "update"
	OpRollback = "rollback"
	OpRemove   = "remove"
)

// Record is one change of the install tree, as the ledger keeps it.
type Record struct {
	// ID names the change; the journal of a change under way carries it,
	// so recovery knows whether the ledger has it yet.
	ID string `json:"id"`
	// Op is OpInstall, OpUpdate, OpRollback or OpRemove.
	Op      string `json:"op"`
	Name    string `json:"name"`
	Version string `json:"version,omitempty"`
	// KVVersion is the release's manifest kv_version.
	KVVersion int `json:"kv_version"`
	// Digest is the release's tree digest (Digest).
	Digest string `json:"digest,omitempty"`
	// Source is where the release came from: the directory or archive
	// given, or for a rollback the previous release.
	Source string    `json:"source,omitempty"`
	Time   time.Time `json:"time"`
	// Previous is the release this one displaced, kept for rollback.
	Previous *Release `json:"previous,omitempty"`
}

// Release is one release of a package as the ledger remembers it.
type Release struct {
	Version   string    `json:"version"`
	KVVersion int       `json:"kv_version"`
	Digest    string    `json:"digest"`
	Source    string    `json:"source,omitempty"`
	Time      time.Time `json:"time"`
}

// Ledger is the install history: one JSON document, rewritten whole and
// atomically (a temporary file synced, then renamed over) at each change.
// One file rather than an append-only log because the history is small
// (a record per operator command) and a reader then never meets a torn
// last line: the file is either the old history or the new.
type Ledger struct {
	Version int      `json:"version"`
	Records []Record `json:"records"`
}

// ledgerVersion is the ledger document's format.
const ledgerVersion = 1

// Current is the release the ledger says is installed under name, false
// when the last record of name is a removal or there is none.
func (l Ledger) Current(name string) (Record, bool) {
	for i := len(l.Records) - 1; i >= 0; i-- {
		if r := l.Records[i]; r.Name == name {
			return r, r.Op != OpRemove
		}
	}
	return Record{}, false
}

func (l Ledger) has(id string) bool {
	for _, r := range l.Records {
		if r.ID == id {
			return true
		}
	}
	return false
}

// maxLedgerBytes bounds the ledger file read.
const maxLedgerBytes = 16 << 20

func readLedger(path string) (Ledger, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Ledger{Version: ledgerVersion, Records: []Record{}}, nil
	}
	if err != nil {
		return Ledger{}, err
	}
	if len(data) > maxLedgerBytes {
		return Ledger{}, fmt.Errorf("the ledger %s is over %d bytes", path, maxLedgerBytes)
	}
	var l Ledger
	if err := json.Unmarshal(data, &l); err != nil {
		return Ledger{}, fmt.Errorf("the ledger %s is unreadable: %w", path, err)
	}
	if l.Version != ledgerVersion {
		return Ledger{}, fmt.Errorf("the ledger %s has format %d; this build reads %d", path, l.Version, ledgerVersion)
	}
	if l.Records == nil {
		l.Records = []Record{}
	}
	return l, nil
}

// writeFileAtomic writes data to path through a synced temporary file in
// the same directory renamed over it, then syncs the directory.
func writeFileAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return syncDir(dir)
}

func writeJSONAtomic(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(path, append(data, '\n'))
}

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
