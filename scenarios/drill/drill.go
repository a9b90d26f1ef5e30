package drill

import (
	"bufio"
	"debug/buildinfo"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/open-conduit/open-conduit/client"
	"github.com/open-conduit/open-conduit/scenarios"
)

// Environment a drill's daemon and packages see, set for every script.
const (
	// SecretEnv holds the secret notes' webhook deliveries are signed
	// with; a drill's configuration names it as env:NOTES_WEBHOOK_SECRET.
	SecretEnv = "NOTES_WEBHOOK_SECRET"
	// HoldFIFOEnv names the FIFO notes' test hold writes to
	// (notes.TestHoldEnv); a drill's configuration passes it to notes
	// with settings.pass_env.
	HoldFIFOEnv = "NOTES_TEST_HOLD_FIFO"
	// BinaryEnv names the open-conduit binary the drill runs (a job's
	// command calls it by this path).
	BinaryEnv = "OPEN_CONDUIT"
	// KillPointEnv chooses a kill point of a faultinject build
	// (NAME[:N]); `daemon start OPEN_CONDUIT_KILL_POINT=…` sets it for one
	// start.
	KillPointEnv = "OPEN_CONDUIT_KILL_POINT"
)

// DefaultWithin bounds every wait of a drill (a start, an await, a stop).
const DefaultWithin = 60 * time.Second

// drillSecret is the value of SecretEnv in a drill.
const drillSecret = "a drill's shared secret"

// Options say how drills run.
type Options struct {
	// Binary is the open-conduit executable the drills start.
	Binary string
	// Within bounds each wait (DefaultWithin when zero).
	Within time.Duration
	// Progress, when set, hears each step a drill command takes, as it
	// takes it.
	Progress io.Writer
}

// scriptKey keys a script's state in testscript's Env.Values.
type scriptKey struct{}

// script is one drill's state: its directories, its daemon, its held
// requests.
type script struct {
	bin       string
	work      string
	configDir string
	stateDir  string
	within    time.Duration
	progressW io.Writer
	vars      func(string) string
	d         *daemonProc
	c         *client.Client
	starts    int
	lastArgs  []string
	held      map[string]*heldRequest
	orphans   []client.Package // the package processes at the last daemon kill
	leftover  []int            // those expect none found still running
	started   []client.Package // the package processes when the daemon got ready
	dying     bool             // the start is daemon dies: an exit before ready is the point
}

func state(ts *testscript.TestScript) *script {
	s, ok := ts.Value(scriptKey{}).(*script)
	if !ok {
		ts.Fatalf("drill commands run only in a drill (drill.Params)")
	}
	s.vars = ts.Getenv
	return s
}

func (s *script) progress(format string, args ...any) {
	if s.progressW != nil {
		fmt.Fprintf(s.progressW, "  "+format+"\n", args...)
	}
}

// expand replaces $NAME and ${NAME} in text with the script's variables;
// a name the script has not set is left as it was, so a shell command in
// a configuration keeps its own ($$, $1, $HOME).
func (s *script) expand(text string) string {
	return os.Expand(text, func(name string) string {
		if v := s.vars(name); v != "" && isIdentifier(name) {
			return v
		}
		return "$" + name
	})
}

// environ is the daemon's environment: this process's, with the drill's
// variables as the script has them.
func (s *script) environ() []string {
	env := os.Environ()
	for _, k := range []string{"PATH", "HOME", "TMPDIR", SecretEnv, HoldFIFOEnv, KillPointEnv} {
		if v := s.vars(k); v != "" {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// Params are the testscript parameters that run drills against
// opts.Binary: the commands (Cmds), the setup of each script and the
// faultinject condition. Files or Dir is the caller's to set.
func Params(opts Options) testscript.Params {
	within := opts.Within
	if within == 0 {
		within = DefaultWithin
	}
	faultinject := hasTag(opts.Binary, "faultinject")
	return testscript.Params{
		Cmds:                Cmds,
		RequireUniqueNames:  true,
		RequireExplicitExec: true,
		Condition: func(cond string) (bool, error) {
			switch cond {
			case "faultinject":
				return faultinject, nil
			}
			return false, fmt.Errorf("unknown condition %q (drills know faultinject)", cond)
		},
		Setup: func(env *testscript.Env) error {
			work := env.WorkDir
			s := &script{bin: opts.Binary, work: work, configDir: filepath.Join(work, "config"),
				stateDir: filepath.Join(work, "state"), within: within, progressW: opts.Progress,
				held: map[string]*heldRequest{}, vars: env.Getenv}
			if len(filepath.Join(s.stateDir, client.SocketName)) >= 104 {
				return fmt.Errorf("the work directory %s is too long for a unix socket under it", work)
			}
			for _, dir := range []string{s.configDir, s.stateDir} {
				if err := os.MkdirAll(dir, 0o700); err != nil {
					return err
				}
			}
			fifo := filepath.Join(work, "hold")
			if err := syscall.Mkfifo(fifo, 0o600); err != nil {
				return fmt.Errorf("the test hold's FIFO: %w", err)
			}
			env.Setenv(HoldFIFOEnv, fifo)
			env.Setenv(SecretEnv, drillSecret)
			env.Setenv(BinaryEnv, opts.Binary)
			env.Setenv("PATH", filepath.Dir(opts.Binary)+string(os.PathListSeparator)+env.Getenv("PATH"))
			env.Values[scriptKey{}] = s
			env.Defer(s.shutdown)
			return nil
		},
	}
}

// hasTag reports whether bin was built with the build tag.
func hasTag(bin, tag string) bool {
	info, err := buildinfo.ReadFile(bin)
	if err != nil {
		return false
	}
	for _, s := range info.Settings {
		if s.Key == "-tags" && slices.Contains(strings.Split(s.Value, ","), tag) {
			return true
		}
	}
	return false
}

// Drill is one embedded drill.
type Drill struct {
	// Name is the file's name without .txtar.
	Name string `json:"name"`
	// Row is the crash-table row (or spec section) it drills, from its
	// "# row:" line.
	Row string `json:"row"`
	// Summary is the script's first comment line.
	Summary string `json:"summary"`
	// Needs names the build the drill needs ("faultinject"), empty for
	// any build.
	Needs string `json:"needs,omitempty"`
}

// List is every embedded drill, by name.
func List() ([]Drill, error) {
	files, err := fs.Glob(scenarios.Drills, "testdata/drills/*.txtar")
	if err != nil {
		return nil, err
	}
	var out []Drill
	for _, f := range files {
		b, err := fs.ReadFile(scenarios.Drills, f)
		if err != nil {
			return nil, err
		}
		d := Drill{Name: strings.TrimSuffix(path.Base(f), ".txtar")}
		sc := bufio.NewScanner(strings.NewReader(string(b)))
		for sc.Scan() {
			line := sc.Text()
			if strings.HasPrefix(line, "-- ") {
				break
			}
			switch {
			case d.Summary == "" && strings.HasPrefix(line, "# "):
				d.Summary = strings.TrimPrefix(line, "# ")
			case strings.HasPrefix(line, "# row: "):
				d.Row = strings.TrimPrefix(line, "# row: ")
			case strings.HasPrefix(line, "[!faultinject] skip"):
				d.Needs = "faultinject"
			}
		}
		out = append(out, d)
	}
	return out, nil
}

// ErrNoDrill is a name that is no embedded drill.
var ErrNoDrill = errors.New("no such drill")

// Extract writes the embedded drills named (all when names is empty) into
// dir and returns their paths, for testscript's Params.Files.
func Extract(dir string, names ...string) ([]string, error) {
	all, err := List()
	if err != nil {
		return nil, err
	}
	if len(names) == 0 {
		for _, d := range all {
			names = append(names, d.Name)
		}
	}
	var files []string
	for _, name := range names {
		if !slices.ContainsFunc(all, func(d Drill) bool { return d.Name == name }) {
			return nil, fmt.Errorf("%w %q (open-conduit drill list names them)", ErrNoDrill, name)
		}
		b, err := fs.ReadFile(scenarios.Drills, "testdata/drills/"+name+".txtar")
		if err != nil {
			return nil, err
		}
		p := filepath.Join(dir, name+".txtar")
		if err := os.WriteFile(p, b, 0o600); err != nil {
			return nil, err
		}
		files = append(files, p)
	}
	return files, nil
}

func isIdentifier(name string) bool {
	for i, r := range name {
		if r != '_' && !(r >= 'a' && r <= 'z') && !(r >= 'A' && r <= 'Z') && (i == 0 || !(r >= '0' && r <= '9')) {
			return false
		}
	}
	return name != ""
}
