package mutants_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/certify"
	"github.com/open-conduit/open-conduit/internal/mutants"
	"github.com/open-conduit/open-conduit/internal/testbin"
	"github.com/open-conduit/open-conduit/protocol"
)

// MinKillRate is the share of the whole table certification must kill.
const MinKillRate = 0.95

// EnvMutants selects what TestMutants certifies: unset, the Sample; "all",
// every mutant; otherwise a comma-separated list of mutant names.
const EnvMutants = "OPEN_CONDUIT_MUTANTS"

// EnvCertifyBin names an open-conduit binary to certify the mutants with
// instead of one built from this checkout (a release's, or a build with a
// criterion weakened, which the sample must then fail).
const EnvCertifyBin = "OPEN_CONDUIT_MUTANTS_BIN"

func root(t *testing.T) string {
	t.Helper()
	dir, err := mutants.ModuleRoot(".")
	require.NoError(t, err)
	return dir
}

// TestTable needs no build: every mutant is well formed and still applies
// to today's source, so a refactor that moves the text a mutant edits
// fails here, in every run, rather than only when the whole set runs.
func TestTable(t *testing.T) {
	r := root(t)
	all := mutants.All()
	assert.GreaterOrEqual(t, len(all), 60, "the self-check needs at least 60 mutants")
	seen := map[string]bool{}
	byPackage := map[string]int{}
	for _, m := range append(all, mutants.Controls()...) {
		t.Run(m.Name, func(t *testing.T) {
			assert.False(t, seen[m.Name], "a second mutant named %s", m.Name)
			seen[m.Name] = true
			assert.NotEmpty(t, m.Breaks, "the obligation it breaks")
			require.NotEmpty(t, m.Edits)
			_, err := mutants.Apply(r, m)
			require.NoError(t, err)
			if strings.HasPrefix(m.Name, "control/") {
				return
			}
			component, _, _ := strings.Cut(m.Name, "/")
			byPackage[component]++
			if component != "sdk" {
				assert.Equal(t, m.Package, component, "a package's mutant is named after it")
			}
			c, ok := certify.Lookup(m.Caught)
			require.True(t, ok, "no criterion %q", m.Caught)
			man, err := protocol.LoadManifest(filepath.Join(r, "extensions", m.Package))
			require.NoError(t, err)
			if c.Applies != nil {
				applies, reason := c.Applies(man)
				assert.True(t, applies, "%s does not apply to %s: %s", m.Caught, m.Package, reason)
			}
		})
	}
	for _, p := range append(slices.Clone(mutants.Packages), "sdk") {
		assert.NotZero(t, byPackage[p], "no mutant of %s", p)
	}
	covered := map[string]bool{}
	for _, name := range mutants.Sample {
		m, ok := mutants.Lookup(name)
		require.True(t, ok, "the sample names %s, which is no mutant", name)
		component, _, _ := strings.Cut(m.Name, "/")
		covered[component] = true
	}
	for _, p := range append(slices.Clone(mutants.Packages), "sdk") {
		assert.True(t, covered[p], "the sample has no mutant of %s", p)
	}
	assert.LessOrEqual(t, len(mutants.Sample), 8)
}

// TestApplyRefusesStaleEdits: an edit that no longer matches the source
// is the generator's error, never a mutant that builds the original.
func TestApplyRefusesStaleEdits(t *testing.T) {
	r := root(t)
	good := mutants.Controls()[0]
	cases := map[string]mutants.Mutant{
		"old text absent":  {Name: "x/absent", Package: "notes", Edits: []mutants.Edit{{File: "extensions/notes/notes.go", Old: "no such text in notes.go", New: "x"}}},
		"old text twice":   {Name: "x/twice", Package: "notes", Edits: []mutants.Edit{{File: "extensions/notes/notes.go", Old: "return", New: "x"}}},
		"old equals new":   {Name: "x/same", Package: "notes", Edits: []mutants.Edit{{File: good.Edits[0].File, Old: good.Edits[0].Old, New: good.Edits[0].Old}}},
		"second edit lost": {Name: "x/lost", Package: "notes", Edits: []mutants.Edit{good.Edits[0], good.Edits[0]}},
	}
	for name, m := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := mutants.Apply(r, m)
			assert.ErrorIs(t, err, mutants.ErrEditDoesNotApply)
			_, err = mutants.Build(context.Background(), r, t.TempDir(), m)
			assert.ErrorIs(t, err, mutants.ErrEditDoesNotApply, "Build must refuse it too, before building anything")
		})
	}
	_, err := mutants.Apply(r, mutants.Mutant{Name: "x/pkg", Package: "nope", Edits: good.Edits})
	assert.ErrorIs(t, err, mutants.ErrUnknownPackage)
	files, err := mutants.Apply(r, good)
	require.NoError(t, err)
	assert.Contains(t, string(files[good.Edits[0].File]), good.Edits[0].New)
}

// selected is the set TestMutants certifies and whether it is the whole
// table.
func selected(t *testing.T) ([]mutants.Mutant, bool) {
	t.Helper()
	env := os.Getenv(EnvMutants)
	if env == "all" {
		return mutants.All(), true
	}
	names := mutants.Sample
	if env != "" {
		names = strings.Split(env, ",")
	}
	var ms []mutants.Mutant
	for _, n := range names {
		m, ok := mutants.Lookup(strings.TrimSpace(n))
		require.True(t, ok, "%s names no mutant: %q", EnvMutants, n)
		ms = append(ms, m)
	}
	return ms, false
}

// TestMutants builds each selected mutant, and the controls, certifies it
// with the real binary and checks the verdicts: the equivalent control
// survives with every criterion passing (so the harness can tell a kill
// from a broken build), every mutant still starts (its handshake passes
// unless that is what it breaks), and the kill rate is at least
// MinKillRate over the whole table, every mutant in a sample. A mutant is
// killed when a criterion fails or ends as harness_error; survivors are
// listed with the criterion that should have caught them.
func TestMutants(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and certifies mutants")
	}
	r := root(t)
	// The mutants and the certifier are built from the whole module.
	testbin.StatInputs(t, r)
	bin := os.Getenv(EnvCertifyBin)
	if bin == "" {
		var err error
		bin, err = testbin.Build(t.TempDir())
		require.NoError(t, err)
	}

	ms, whole := selected(t)
	controls := mutants.Controls()
	started := time.Now()
	results := certifyAll(t, r, bin, append(slices.Clone(controls), ms...))
	elapsed := time.Since(started)

	for _, c := range controls {
		res, ok := results[c.Name]
		require.True(t, ok, "the control %s did not build and certify", c.Name)
		assert.False(t, res.Killed(), "the equivalent control %s was killed: failed %v, harness_error %v\n%s",
			c.Name, res.Failed(), res.HarnessErrors(), clip(res.Output, 4000))
		assert.Equal(t, certify.ExitOK, res.ExitCode, "the equivalent control must certify\n%s", clip(res.Output, 4000))
	}

	var survivors []string
	killed, byHarness := 0, 0
	for _, m := range ms {
		res, ok := results[m.Name]
		if !ok {
			continue // its build or certification failed, reported already
		}
		failed, broken := res.Failed(), res.HarnessErrors()
		// Still starting: the handshake passes, or it is the criterion the
		// mutant is built to break (a foreign manifest, a wrong version).
		if res.Status("lifecycle/handshake") != certify.StatusPass && !slices.Contains(failed, m.Caught) {
			t.Errorf("mutant %s does not start (lifecycle/handshake %s)\n%s", m.Name, res.Status("lifecycle/handshake"), clip(res.Output, 4000))
		}
		verdict := "KILLED"
		switch {
		case len(failed) > 0:
			killed++
		case len(broken) > 0:
			killed++
			byHarness++
			verdict = "KILLED (harness_error only)"
		default:
			verdict = "SURVIVED"
			survivors = append(survivors, fmt.Sprintf("SURVIVED %s: breaks %q; %s should have caught it", m.Name, m.Breaks, m.Caught))
		}
		note := ""
		if verdict != "SURVIVED" && !slices.Contains(failed, m.Caught) {
			note = " (not by " + m.Caught + ", the criterion expected)"
		}
		t.Logf("%s %s: failed %v, harness_error %v%s", verdict, m.Name, failed, broken, note)
	}
	require.Equal(t, len(ms)+len(controls), len(results), "every mutant must build and certify")
	rate := float64(killed) / float64(len(ms))
	t.Logf("%d of %d mutants killed (%.1f%%; %d by harness_error only), %d survived, in %v",
		killed, len(ms), 100*rate, byHarness, len(survivors), elapsed.Round(time.Second))
	for _, s := range survivors {
		t.Log(s)
	}
	if whole {
		assert.GreaterOrEqual(t, rate, MinKillRate, "kill rate below %.0f%%:\n%s", 100*MinKillRate, strings.Join(survivors, "\n"))
	} else {
		assert.Empty(t, survivors, "a sampled mutant survived")
	}
}

// clip cuts s to at most n bytes.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// certifyAll builds and certifies ms, at most two at a time (or one on a
// single core), and returns the results by name; a mutant that does not
// build or certify is a test failure.
func certifyAll(t *testing.T, root, bin string, ms []mutants.Mutant) map[string]mutants.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	work := t.TempDir()
	jobs := make(chan int)
	var mu sync.Mutex
	results := map[string]mutants.Result{}
	var wg sync.WaitGroup
	for range min(2, runtime.GOMAXPROCS(0)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				m := ms[i]
				dir := filepath.Join(work, fmt.Sprint(i))
				err := os.Mkdir(dir, 0o755)
				var b mutants.Built
				if err == nil {
					b, err = mutants.Build(ctx, root, dir, m)
				}
				var res mutants.Result
				if err == nil {
					res, err = mutants.Certify(ctx, bin, nil, b)
				}
				if err != nil {
					t.Errorf("%s: %v", m.Name, err)
					continue
				}
				mu.Lock()
				results[m.Name] = res
				mu.Unlock()
			}
		}()
	}
	for i := range ms {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	return results
}
