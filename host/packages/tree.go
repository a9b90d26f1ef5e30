package packages

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/open-conduit/open-conduit/host"
	"github.com/open-conduit/open-conduit/protocol"
)

// The install tree's own entries under <config>/extensions. Discovery
// skips them: none is a directory holding a manifest.
const (
	// StagingDir holds packages being unpacked and the journal of a
	// change under way.
	StagingDir = ".staging"
	// PreviousDir keeps each package's previous release, for rollback.
	PreviousDir = ".previous"
	// LedgerFile is the install history (Ledger).
	LedgerFile = ".ledger.json"
	// lockFile serialises packaging commands on one tree.
	lockFile = ".lock"
)

// Hold points: where a change calls Tree.Hold, for a test that stops
// the process there.
const (
	// HoldStaged: the journal is written, nothing is renamed yet.
	HoldStaged = "staged"
	// HoldDisplaced: the old release is moved aside and the new one not
	// yet renamed in: the one moment the package's directory is absent.
	HoldDisplaced = "displaced"
)

// Tree is one install tree, <config>/extensions, held by one packaging
// command at a time (an flock on its .lock). Open recovers a change a
// crashed command left half done, so the tree always holds the old
// release or the new one of every package.
type Tree struct {
	root    string
	bundled string
	lock    *os.File
	now     func() time.Time
	// Hold, when set, is called at each hold point of a change.
	Hold func(point string)
}

// Open takes the install tree under root (creating it), with the bundled
// packages under bundled ("" for none), and recovers any change left half
// done. ErrBusy: another packaging command holds it.
func Open(root, bundled string) (*Tree, error) {
	root, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(root, StagingDir), 0o755); err != nil {
		return nil, fmt.Errorf("the install tree %s: %w", root, err)
	}
	f, err := lockTree(root)
	if err != nil {
		return nil, err
	}
	t := &Tree{root: root, bundled: bundled, lock: f, now: func() time.Time { return time.Now().UTC() }}
	if err := t.recover(); err != nil {
		t.Close()
		return nil, fmt.Errorf("recovering the install tree %s: %w", root, err)
	}
	return t, nil
}

// Recover finishes or undoes a change a crashed packaging command left
// half done under root, unless a packaging command holds the tree now (it
// recovers on its own). The daemon calls it before discovery.
func Recover(root string) error {
	if _, err := os.Stat(filepath.Join(root, StagingDir)); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	t, err := Open(root, "")
	if errors.Is(err, ErrBusy) {
		return nil
	}
	if err != nil {
		return err
	}
	t.Close()
	return nil
}

func lockTree(root string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(root, lockFile), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w on %s", ErrBusy, root)
		}
		return nil, err
	}
	return f, nil
}

// Close releases the tree.
func (t *Tree) Close() {
	if t.lock != nil {
		_ = syscall.Flock(int(t.lock.Fd()), syscall.LOCK_UN)
		t.lock.Close()
		t.lock = nil
	}
}

// Root is the tree's directory.
func (t *Tree) Root() string { return t.root }

// Dir is where package name is installed.
func (t *Tree) Dir(name string) string { return filepath.Join(t.root, name) }

// PreviousDir is where name's previous release is kept.
func (t *Tree) PreviousDir(name string) string { return filepath.Join(t.root, PreviousDir, name) }

func (t *Tree) staging(name string) string { return filepath.Join(t.root, StagingDir, name) }

// Ledger reads the install history.
func (t *Tree) Ledger() (Ledger, error) { return readLedger(filepath.Join(t.root, LedgerFile)) }

// Discover discovers the installed packages and then the bundled ones,
// as the daemon does.
func (t *Tree) Discover() ([]host.Package, []host.Problem, error) {
	return host.DiscoverAll(t.root, t.bundled)
}

// Installed reports whether a package directory is installed under name
// (admitted by discovery or not).
func (t *Tree) Installed(name string) bool {
	st, err := os.Stat(t.Dir(name))
	return err == nil && st.IsDir()
}

// Staged is a package unpacked or copied into the staging directory and
// validated: ready to commit.
type Staged struct {
	// Dir is its directory under .staging.
	Dir string
	// Source is the directory or archive it came from, absolute.
	Source   string
	Manifest *protocol.Manifest
	Digest   string
	id       string
	// fromPrevious marks the previous release being rolled back to.
	fromPrevious bool
}

// Discard removes a staged package that will not be committed.
func (s *Staged) Discard() {
	if s != nil {
		os.RemoveAll(s.Dir)
	}
}

func newID() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return time.Now().UTC().Format("20060102T150405") + "-" + hex.EncodeToString(b)
}

// IsArchive reports whether source names a gzip-compressed tar archive
// by its name.
func IsArchive(source string) bool {
	return strings.HasSuffix(source, ".tar.gz") || strings.HasSuffix(source, ".tgz")
}

// Stage reads source, a package directory or a .tar.gz of one (the
// manifest at the archive's top or in its one top directory), into the
// staging directory and validates it offline: the manifest strictly, the
// files it names, and the directory's name against the manifest's.
func (t *Tree) Stage(source string) (*Staged, error) {
	abs, err := filepath.Abs(source)
	if err != nil {
		return nil, err
	}
	info, err := os.Stat(abs)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidSource, err)
	}
	id := newID()
	s := &Staged{Dir: t.staging(id), Source: abs, id: id}
	switch {
	case info.IsDir():
		if err := os.Mkdir(s.Dir, 0o755); err != nil {
			return nil, err
		}
		if err := CopyTree(abs, s.Dir); err != nil {
			s.Discard()
			return nil, err
		}
	case info.Mode().IsRegular() && IsArchive(abs):
		if err := t.unpackArchive(abs, s.Dir); err != nil {
			s.Discard()
			return nil, err
		}
	default:
		return nil, fmt.Errorf("%w: %s is neither a package directory nor a .tar.gz of one", ErrInvalidSource, source)
	}
	if err := s.load(); err != nil {
		s.Discard()
		return nil, err
	}
	return s, nil
}

// unpackArchive unpacks the archive at path and leaves its package at dir.
func (t *Tree) unpackArchive(path, dir string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidSource, err)
	}
	defer f.Close()
	tmp := dir + ".unpack"
	if err := os.Mkdir(tmp, 0o755); err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if err := Unpack(f, tmp); err != nil {
		return err
	}
	top := tmp
	if _, err := os.Lstat(filepath.Join(tmp, protocol.ManifestFile)); errors.Is(err, fs.ErrNotExist) {
		entries, err := os.ReadDir(tmp)
		if err != nil {
			return err
		}
		if len(entries) != 1 || !entries[0].IsDir() {
			return fmt.Errorf("%w: the archive has no %s at its top or in its one directory", ErrInvalidSource, protocol.ManifestFile)
		}
		top = filepath.Join(tmp, entries[0].Name())
	}
	return os.Rename(top, dir)
}

// load validates the staged package and computes its digest.
func (s *Staged) load() error {
	m, err := protocol.LoadManifest(s.Dir)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidSource, strings.ReplaceAll(err.Error(), s.Dir, "<package>"))
	}
	s.Manifest = m
	if s.Digest, err = Digest(s.Dir); err != nil {
		return err
	}
	return nil
}

// CheckConflicts checks m against every package installed and bundled,
// the one it would replace (the same name) left out, as discovery will
// check the set; it reports the conflicts that involve m only, wrapped in
// ErrConflict.
func (t *Tree) CheckConflicts(m *protocol.Manifest) error {
	pkgs, _, err := t.Discover()
	if err != nil {
		return err
	}
	set := []host.Package{}
	for _, p := range pkgs {
		if p.Name != m.Name {
			set = append(set, p)
		}
	}
	set = append(set, host.Package{Name: m.Name, Manifest: m})
	var mine []error
	for _, e := range flatten(host.CheckConflicts(set, nil)) {
		var c host.Conflict
		if !errors.As(e, &c) || containsString(c.Owners, m.Name) {
			mine = append(mine, e)
		}
	}
	if len(mine) > 0 {
		return fmt.Errorf("%w: %w", ErrConflict, errors.Join(mine...))
	}
	return nil
}

func flatten(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// ReleaseAt describes the package directory dir as a Release, with its
// manifest.
func ReleaseAt(dir string) (Release, *protocol.Manifest, error) {
	m, err := protocol.LoadManifest(dir)
	if err != nil {
		return Release{}, nil, err
	}
	digest, err := Digest(dir)
	if err != nil {
		return Release{}, nil, err
	}
	return Release{Version: m.Version, KVVersion: m.KVVersion, Digest: digest}, m, nil
}

// journal is the intent of one change, written before anything moves:
// recovery reads it to finish the change (its record is in the ledger) or
// undo it (it is not).
type journal struct {
	Record Record `json:"record"`
	// Staged is the new release under .staging ("" for a removal);
	// Displaced is where the old one is moved aside.
	Staged    string `json:"staged,omitempty"`
	Displaced string `json:"displaced"`
	// FromPrevious: Staged is the previous release (a rollback), moved
	// into staging after the journal is written; an undo puts it back.
	FromPrevious bool `json:"from_previous,omitempty"`
	// HadOld: a release was installed when the change began.
	HadOld bool `json:"had_old,omitempty"`
}

func (t *Tree) journalPath(id string) string { return t.staging(id + ".journal.json") }

func (t *Tree) hold(point string) {
	if t.Hold != nil {
		t.Hold(point)
	}
}

// Commit installs the staged package as name's release (op OpInstall or
// OpUpdate, or OpRollback from Rollback): the old release, if any, is
// moved aside and the new one renamed into place, the ledger records the
// change (the commit point), and the old release becomes the previous one
// kept for rollback. A crash before the ledger write is undone by the
// next Open, and one after it finished, so the package's directory holds
// the old release or the new one, never a mix.
func (t *Tree) Commit(s *Staged, op string) (Record, error) {
	return t.commit(s, op)
}

func (t *Tree) commit(s *Staged, op string) (Record, error) {
	name := s.Manifest.Name
	rec := Record{ID: s.id, Op: op, Name: name, Version: s.Manifest.Version, KVVersion: s.Manifest.KVVersion,
		Digest: s.Digest, Source: s.Source, Time: t.now()}
	if t.Installed(name) {
		if prev, _, err := ReleaseAt(t.Dir(name)); err == nil {
			rec.Previous = &prev
			if cur, ok := t.currentRecord(name); ok && cur.Digest == prev.Digest {
				rec.Previous.Source, rec.Previous.Time = cur.Source, cur.Time
			}
		}
	}
	j := journal{Record: rec, Staged: s.id, Displaced: s.id + ".old", FromPrevious: s.fromPrevious, HadOld: t.Installed(name)}
	if err := writeJSONAtomic(t.journalPath(s.id), j); err != nil {
		return Record{}, err
	}
	if s.fromPrevious {
		// Moved only once the journal says where it goes back to.
		if err := os.Rename(t.PreviousDir(name), s.Dir); err != nil {
			os.Remove(t.journalPath(s.id))
			return Record{}, err
		}
	}
	t.hold(HoldStaged)
	if err := t.apply(j); err != nil {
		// Undo what moved; the journal goes with it.
		if rerr := t.undo(j); rerr != nil {
			return Record{}, fmt.Errorf("%w (and undoing it: %v)", err, rerr)
		}
		return Record{}, err
	}
	return rec, nil
}

// apply runs a journal's steps from the start.
func (t *Tree) apply(j journal) error {
	name := j.Record.Name
	if t.Installed(name) {
		if err := os.Rename(t.Dir(name), t.staging(j.Displaced)); err != nil {
			return err
		}
		if err := syncDir(t.root); err != nil {
			return err
		}
	}
	t.hold(HoldDisplaced)
	if j.Staged != "" {
		if err := os.Rename(t.staging(j.Staged), t.Dir(name)); err != nil {
			return err
		}
		if err := syncDir(t.root); err != nil {
			return err
		}
	}
	if err := t.appendRecord(j.Record); err != nil {
		return err
	}
	return t.finish(j)
}

// finish completes a change the ledger has recorded: the displaced
// release becomes the previous one (a removal drops both), and the
// journal goes.
func (t *Tree) finish(j journal) error {
	name := j.Record.Name
	displaced := t.staging(j.Displaced)
	if j.Record.Op == OpRemove {
		if err := os.RemoveAll(displaced); err != nil {
			return err
		}
		if err := os.RemoveAll(t.PreviousDir(name)); err != nil {
			return err
		}
	} else if _, err := os.Lstat(displaced); err == nil {
		if err := os.MkdirAll(filepath.Join(t.root, PreviousDir), 0o755); err != nil {
			return err
		}
		if err := os.RemoveAll(t.PreviousDir(name)); err != nil {
			return err
		}
		if err := os.Rename(displaced, t.PreviousDir(name)); err != nil {
			return err
		}
	}
	if err := os.Remove(t.journalPath(j.Record.ID)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return syncDir(filepath.Join(t.root, StagingDir))
}

// undo reverts a change the ledger has not recorded: the new release
// leaves the package's directory (back to the previous slot for a
// rollback, else removed) and the displaced one returns.
func (t *Tree) undo(j journal) error {
	name := j.Record.Name
	displaced := t.staging(j.Displaced)
	_, derr := os.Lstat(displaced)
	hasDisplaced := derr == nil
	if j.Staged != "" {
		staged := t.staging(j.Staged)
		// The new release is in place when it is no longer staged and the
		// old one was moved aside (or there was none). A rollback's
		// release not yet moved into staging is still in its slot.
		_, serr := os.Lstat(staged)
		inPlace := errors.Is(serr, fs.ErrNotExist) && t.Installed(name) && (hasDisplaced || !j.HadOld)
		if j.FromPrevious {
			_, perr := os.Lstat(t.PreviousDir(name))
			inPlace = inPlace && errors.Is(perr, fs.ErrNotExist)
		}
		if inPlace {
			if err := os.Rename(t.Dir(name), staged); err != nil {
				return err
			}
		}
		if j.FromPrevious {
			if _, err := os.Lstat(staged); err == nil {
				if err := os.Rename(staged, t.PreviousDir(name)); err != nil {
					return err
				}
			}
		} else if err := os.RemoveAll(staged); err != nil {
			return err
		}
	}
	if hasDisplaced && !t.Installed(name) {
		if err := os.Rename(displaced, t.Dir(name)); err != nil {
			return err
		}
	}
	if err := syncDir(t.root); err != nil {
		return err
	}
	if err := os.Remove(t.journalPath(j.Record.ID)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// recover settles every journal left in the staging directory, then
// removes what no journal names (a crash while staging).
func (t *Tree) recover() error {
	dir := filepath.Join(t.root, StagingDir)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	ledger, err := t.Ledger()
	if err != nil {
		return err
	}
	for _, e := range entries {
		id, ok := strings.CutSuffix(e.Name(), ".journal.json")
		if !ok {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return err
		}
		var j journal
		if err := json.Unmarshal(data, &j); err != nil || j.Record.ID != id {
			// A journal is written atomically, so this is no crash of ours.
			return fmt.Errorf("the journal %s is unreadable", e.Name())
		}
		if ledger.has(id) {
			err = t.finish(j)
		} else {
			err = t.undo(j)
		}
		if err != nil {
			return fmt.Errorf("settling %s of %s: %w", j.Record.Op, j.Record.Name, err)
		}
	}
	entries, err = os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

func (t *Tree) currentRecord(name string) (Record, bool) {
	l, err := t.Ledger()
	if err != nil {
		return Record{}, false
	}
	return l.Current(name)
}

func (t *Tree) appendRecord(r Record) error {
	l, err := t.Ledger()
	if err != nil {
		return err
	}
	if l.has(r.ID) {
		return nil
	}
	l.Records = append(l.Records, r)
	return writeJSONAtomic(filepath.Join(t.root, LedgerFile), l)
}

// Previous is name's previous release kept for rollback, with its
// manifest; ErrNoPrevious when none is kept.
func (t *Tree) Previous(name string) (Release, *protocol.Manifest, error) {
	dir := t.PreviousDir(name)
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return Release{}, nil, fmt.Errorf("%w of %s is kept", ErrNoPrevious, name)
	}
	rel, m, err := ReleaseAt(dir)
	if err != nil {
		return Release{}, nil, fmt.Errorf("the previous release of %s: %w", name, err)
	}
	if cur, ok := t.currentRecord(name); ok && cur.Previous != nil && cur.Previous.Digest == rel.Digest {
		rel.Source, rel.Time = cur.Previous.Source, cur.Previous.Time
	}
	return rel, m, nil
}

// Rollback makes name's previous release current again; the release it
// replaces becomes the previous one.
func (t *Tree) Rollback(name string) (Record, error) {
	if !t.Installed(name) {
		return Record{}, fmt.Errorf("%w: %s", ErrNotInstalled, name)
	}
	rel, m, err := t.Previous(name)
	if err != nil {
		return Record{}, err
	}
	id := newID()
	s := &Staged{Dir: t.staging(id), Source: rel.Source, Manifest: m, Digest: rel.Digest, id: id, fromPrevious: true}
	if s.Source == "" {
		s.Source = "previous release"
	}
	// commit undoes itself on failure, the release back in its slot.
	return t.commit(s, OpRollback)
}

// Remove removes the installed package name and its previous release.
// A bundled package of the same name is discovered again.
func (t *Tree) Remove(name string) (Record, error) {
	if !t.Installed(name) {
		return Record{}, fmt.Errorf("%w: %s", ErrNotInstalled, name)
	}
	id := newID()
	rec := Record{ID: id, Op: OpRemove, Name: name, Time: t.now()}
	if rel, _, err := ReleaseAt(t.Dir(name)); err == nil {
		rec.Version, rec.KVVersion, rec.Digest = rel.Version, rel.KVVersion, rel.Digest
	}
	j := journal{Record: rec, Displaced: id + ".old", HadOld: true}
	if err := writeJSONAtomic(t.journalPath(id), j); err != nil {
		return Record{}, err
	}
	t.hold(HoldStaged)
	if err := t.apply(j); err != nil {
		if rerr := t.undo(j); rerr != nil {
			return Record{}, fmt.Errorf("%w (and undoing it: %v)", err, rerr)
		}
		return Record{}, err
	}
	return rec, nil
}
