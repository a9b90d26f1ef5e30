package notes

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Record is one note as the note store keeps it: the upstream's own
// format, apart from any payload schema. Rev is the note's revision; a
// new revision is a change.
type Record struct {
	ID    string   `json:"id"`
	Rev   string   `json:"rev"`
	Title string   `json:"title"`
	Body  string   `json:"body,omitempty"`
	Tags  []string `json:"tags,omitempty"`
	Link  string   `json:"link,omitempty"`
}

// Note is the record as a current payload.
func (r Record) Note() Note {
	tags := r.Tags
	if tags == nil {
		tags = []string{}
	}
	return Note{ID: r.ID, Title: r.Title, Body: r.Body, Tags: tags, Link: r.Link}
}

// Store is a note store: a directory holding one <id>.json file per note.
// Reads list it in file-name order, so a scan is deterministic. Writes
// replace a file atomically (write, then rename).
type Store struct {
	Dir string
}

const recordExt = ".json"

// validID keeps an ID a plain, printable file name.
func validID(id string) error {
	if id == "" || len(id) > 128 || !utf8.ValidString(id) || strings.ContainsAny(id, `/\`) || strings.HasPrefix(id, ".") ||
		strings.ContainsFunc(id, func(r rune) bool { return !unicode.IsPrint(r) }) {
		return fmt.Errorf("note id %q is not a plain name of 1 to 128 printable bytes", id)
	}
	return nil
}

// Put writes r, replacing the note with its ID.
func (s Store) Put(r Record) error {
	if err := validID(r.ID); err != nil {
		return err
	}
	data, err := json.Marshal(r)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(s.Dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(s.Dir, ".put-*")
	if err != nil {
		return err
	}
	_, werr := tmp.Write(data)
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), filepath.Join(s.Dir, r.ID+recordExt))
}

// Get reads one note; found is false when there is none.
func (s Store) Get(id string) (r Record, found bool, err error) {
	if err := validID(id); err != nil {
		return Record{}, false, err
	}
	data, err := os.ReadFile(filepath.Join(s.Dir, id+recordExt))
	if errors.Is(err, fs.ErrNotExist) {
		return Record{}, false, nil
	}
	if err != nil {
		return Record{}, false, err
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return Record{}, false, fmt.Errorf("note %s: %w", id, err)
	}
	return r, true, nil
}

// IDs lists the store's note IDs in order. A store that does not exist
// yet is empty.
func (s Store) IDs() ([]string, error) {
	entries, err := os.ReadDir(s.Dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, e := range entries {
		name := e.Name()
		if e.Type().IsRegular() && strings.HasSuffix(name, recordExt) && !strings.HasPrefix(name, ".") {
			ids = append(ids, strings.TrimSuffix(name, recordExt))
		}
	}
	slices.Sort(ids)
	return ids, nil
}

// Page reads up to limit notes after the ID after, in order; more says
// whether any follow.
func (s Store) Page(after string, limit int) (page []Record, more bool, err error) {
	ids, err := s.IDs()
	if err != nil {
		return nil, false, err
	}
	i, _ := slices.BinarySearch(ids, after)
	if i < len(ids) && ids[i] == after {
		i++
	}
	for ; i < len(ids); i++ {
		if len(page) == limit {
			return page, true, nil
		}
		r, found, err := s.Get(ids[i])
		if err != nil {
			return nil, false, err
		}
		if found {
			page = append(page, r)
		}
	}
	return page, false, nil
}
