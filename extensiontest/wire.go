package extensiontest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/open-conduit/open-conduit/client"
)

// Bounds of a step's wire evidence: the bytes read back from the end of a
// package's wire log, and the characters shown of one line.
const (
	wireEvidenceBytes = 256 << 10
	wireEvidenceLine  = 2000
)

// wirePackages is the packages whose wire a failure shows: the package
// under test always, then every other one whose wire log grew during the
// step, by name.
func (h *H) wirePackages() []string {
	names := []string{h.pkg}
	var others []string
	for name, size := range h.d.wireSizes() {
		if name != h.pkg && size > h.wireMarks[name] {
			others = append(others, name)
		}
	}
	sort.Strings(others)
	return append(names, others...)
}

// wireSince is the last evidenceLines lines package name's wire log got
// since the step began, one a line: time, direction, the message.
func (h *H) wireSince(name string) string {
	f, err := os.Open(filepath.Join(h.d.wireLogDir(), name+client.WireLogSuffix))
	if err != nil {
		return ""
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return ""
	}
	from := h.wireMarks[name]
	if from > info.Size() {
		from = 0 // a new file (it never shrinks otherwise)
	}
	clipped := false
	if info.Size()-from > wireEvidenceBytes {
		from, clipped = info.Size()-wireEvidenceBytes, true
	}
	data, err := io.ReadAll(io.NewSectionReader(f, from, info.Size()-from))
	if err != nil {
		return ""
	}
	if clipped {
		// Start at a whole record.
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			data = data[i+1:]
		}
	}
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, wireEvidenceBytes+1)
	for sc.Scan() {
		lines = append(lines, wireLine(sc.Bytes()))
	}
	if len(lines) > evidenceLines {
		lines = lines[len(lines)-evidenceLines:]
	}
	return strings.Join(lines, "\n")
}

// wireLine is one wire log record as a failure shows it.
func wireLine(raw []byte) string {
	var rec client.WireLogRecord
	if err := json.Unmarshal(raw, &rec); err != nil {
		return clip(string(raw))
	}
	if rec.Full {
		return rec.Time.Format("15:04:05.000") + " (the wire log reached its bound: nothing after this was recorded)"
	}
	arrow := "daemon→package"
	if rec.Direction == client.WireFromExtension {
		arrow = "package→daemon"
	}
	body := rec.Text
	if len(rec.Message) > 0 {
		body = string(rec.Message)
	}
	if rec.Truncated > 0 {
		body += fmt.Sprintf(" (line of %d bytes, truncated)", rec.Truncated)
	}
	return fmt.Sprintf("%s %s %s", rec.Time.Format("15:04:05.000"), arrow, clip(body))
}

func clip(s string) string {
	if len(s) <= wireEvidenceLine {
		return s
	}
	return s[:wireEvidenceLine] + fmt.Sprintf("… (%d bytes)", len(s))
}
