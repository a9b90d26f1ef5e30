package scenarios_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/txtar"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/scenarios/drill"
)

// WeakenedEnv set to "all" makes TestWeakenedBuildsFailDrills build and
// drill every weakening; otherwise it takes one a day, in turn, so the
// normal run stays short and every weakening still gets its turn.
const WeakenedEnv = "OPEN_CONDUIT_WEAKENED_DRILLS"

// weakening is one testdata/weakened/*.txtar: a change to one source file
// (old replaced by new, which must occur exactly once) that breaks the
// behaviour the drills it names drill.
type weakening struct {
	name   string
	doc    string
	drills []string
	file   string
	// pairs are the replacements, in order: an old text, then its new.
	pairs      [][2]string
	sourceText string
}

func readWeakenings(t *testing.T) []weakening {
	t.Helper()
	files, err := filepath.Glob("testdata/weakened/*.txtar")
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(files), 5, "at least five drills are shown to fail on a weakened build")
	var out []weakening
	for _, f := range files {
		a, err := txtar.ParseFile(f)
		require.NoError(t, err)
		w := weakening{name: strings.TrimSuffix(filepath.Base(f), ".txtar"), doc: string(a.Comment)}
		for _, line := range strings.Split(string(a.Comment), "\n") {
			if rest, ok := strings.CutPrefix(line, "drills: "); ok {
				w.drills = strings.Fields(rest)
			}
		}
		for _, sec := range a.Files {
			switch sec.Name {
			case "file":
				w.file = strings.TrimSpace(string(sec.Data))
			case "old":
				w.pairs = append(w.pairs, [2]string{string(sec.Data)})
			case "new":
				require.NotEmpty(t, w.pairs, "%s: a new section follows its old one", f)
				w.pairs[len(w.pairs)-1][1] = string(sec.Data)
			default:
				t.Fatalf("%s: unknown section %q (want file, then old and new pairs)", f, sec.Name)
			}
		}
		require.NotEmpty(t, w.pairs, "%s replaces something", f)
		require.NotEmpty(t, w.drills, "%s names the drills it must fail (a drills: line)", f)
		require.NotEmpty(t, w.file, "%s names its file", f)
		src, err := os.ReadFile(filepath.Join("..", w.file))
		require.NoError(t, err, "%s: its file", f)
		text := string(src)
		for _, p := range w.pairs {
			require.Equal(t, 1, strings.Count(text, p[0]),
				"%s: the text it replaces must occur exactly once in %s; update the weakening to the source:\n%s", f, w.file, p[0])
			text = strings.Replace(text, p[0], p[1], 1)
		}
		w.sourceText = text
		out = append(out, w)
	}
	return out
}

// build builds the binary with the weakening applied through go build
// -overlay (the source tree is untouched), with the build tags given (a
// drill at the daemon's kill points needs faultinject).
func (w weakening) build(t *testing.T, tags ...string) string {
	t.Helper()
	dir := t.TempDir()
	weak := filepath.Join(dir, filepath.Base(w.file))
	require.NoError(t, os.WriteFile(weak, []byte(w.sourceText), 0o600))
	abs, err := filepath.Abs(filepath.Join("..", w.file))
	require.NoError(t, err)
	overlay, err := json.Marshal(map[string]any{"Replace": map[string]string{abs: weak}})
	require.NoError(t, err)
	ov := filepath.Join(dir, "overlay.json")
	require.NoError(t, os.WriteFile(ov, overlay, 0o600))
	bin := filepath.Join(dir, "open-conduit")
	args := []string{"build", "-overlay", ov, "-o", bin}
	if len(tags) > 0 {
		args = append(args, "-tags", strings.Join(tags, ","))
	}
	out, err := exec.Command("go", append(args, "github.com/open-conduit/open-conduit/cmd/open-conduit")...).CombinedOutput()
	require.NoError(t, err, "building with %s weakened:\n%s", w.file, out)
	return bin
}

// TestWeakenedBuildsFailDrills: each drill named by a weakening fails on
// the binary built with it, and passes on the real one (TestDrills): the
// drills detect the behaviour they drill breaking, not just run.
func TestWeakenedBuildsFailDrills(t *testing.T) {
	all := readWeakenings(t)
	known := map[string]bool{}
	needs := map[string]string{} // the build a drill needs
	list, err := drill.List()
	require.NoError(t, err)
	for _, d := range list {
		known[d.Name] = true
		needs[d.Name] = d.Needs
	}
	for _, w := range all {
		for _, d := range w.drills {
			require.True(t, known[d], "weakening %s names drill %s, which does not exist", w.name, d)
		}
	}
	selected := all
	if os.Getenv(WeakenedEnv) != "all" {
		day := int(time.Now().Unix() / 86400)
		selected = all[day%len(all) : day%len(all)+1]
		t.Logf("sampled weakening %s (%s=all runs every one)", selected[0].name, WeakenedEnv)
	}
	for _, w := range selected {
		t.Run(w.name, func(t *testing.T) {
			var tags []string
			for _, d := range w.drills {
				if needs[d] != "" && !slices.Contains(tags, needs[d]) {
					tags = append(tags, needs[d])
				}
			}
			bin := w.build(t, tags...)
			for _, name := range w.drills {
				res, err := drill.Run(name, drill.RunOptions{Options: drill.Options{Binary: bin, Within: 10 * time.Second}})
				require.NoError(t, err)
				assert.False(t, res.Passed, "drill %s passed on a build where %s", name, strings.TrimSpace(w.doc))
				if !res.Passed {
					t.Logf("drill %s failed as it must:\n%s", name, lastLines(res.Log, 4))
				}
			}
		})
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return fmt.Sprint(strings.Join(lines, "\n"))
}
