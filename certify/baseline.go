package certify

import (
	"bufio"
	"io"
	"os"
	"strings"
)

// ParseBaseline reads a baseline: one criterion ID per line; blank lines
// and text after '#' are ignored. An ID listed twice or a line with more
// than one word is a usage error. Whether each ID names a criterion is
// checked by Run.
func ParseBaseline(r io.Reader) ([]string, error) {
	var ids []string
	seen := map[string]int{}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		fields := strings.Fields(line)
		switch {
		case len(fields) == 0:
			continue
		case len(fields) > 1:
			return nil, usagef("baseline line %d: one criterion ID per line, not %q", n, strings.TrimSpace(line))
		case seen[fields[0]] != 0:
			return nil, usagef("baseline line %d: %s is already listed on line %d", n, fields[0], seen[fields[0]])
		}
		seen[fields[0]] = n
		ids = append(ids, fields[0])
	}
	if err := sc.Err(); err != nil {
		return nil, usagef("baseline: %v", err)
	}
	return ids, nil
}

// ReadBaselineFile reads the baseline file at path (ParseBaseline).
func ReadBaselineFile(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, usagef("baseline: %v", err)
	}
	defer f.Close()
	ids, err := ParseBaseline(f)
	if err != nil {
		return nil, usagef("%s: %w", path, err)
	}
	return ids, nil
}

// checkBaseline refuses a baseline entry that names no criterion: a stale
// ID would otherwise hide nothing and mean nothing.
func checkBaseline(ids []string, all []Criterion) (map[string]bool, error) {
	known := make(map[string]bool, len(all))
	for _, c := range all {
		known[c.ID] = true
	}
	listed := make(map[string]bool, len(ids))
	for _, id := range ids {
		if !known[id] {
			return nil, usagef("baseline lists %q, which is no criterion of criteria version %d", id, CriteriaVersion)
		}
		listed[id] = true
	}
	return listed, nil
}
