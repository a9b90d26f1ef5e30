// Package mutants owns certify's self-check by mutants: a table of weakened
// variants of the shipped extensions (notes, runner, schedule, shell) and of
// the SDK they are built on, each breaking one spec obligation, and the
// generator that builds a mutant and certifies it.
//
// A mutant is one Mutant entry: the package it is certified as, the
// obligation it breaks, the criterion expected to catch it, and its source
// edits, exact old→new replacements in named files of this module. An edit
// whose old text does not occur exactly once is refused (ErrEditDoesNotApply),
// so a refactor cannot turn a mutant into a silent copy of the original.
//
// Build compiles the package's command (extensions/NAME/cmd/NAME) with
// `go build -overlay`: the mutated files are written to a temporary
// directory and the overlay points the build at them, so the module is never
// copied or touched and go's build cache serves everything the edits leave
// alone. The package directory it writes holds the binary and the manifest,
// whose command names that binary (the embedded manifest is rewritten the
// same way, so lifecycle/manifest-match still holds). Certify runs
// `open-conduit extension certify --json` on it and reads the verdicts.
package mutants

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/open-conduit/open-conduit/certify"
	"github.com/open-conduit/open-conduit/protocol"
)

// Edit is one exact replacement in one file.
type Edit struct {
	// File is the file's path in the module, slash-separated
	// ("extensions/notes/notes.go").
	File string
	// Old must occur exactly once in the file (after the mutant's earlier
	// edits of it); New replaces it.
	Old, New string
}

// Mutant is one weakened variant.
type Mutant struct {
	// Name is unique: the mutated component and a short description
	// ("notes/route-ignores-tag", "sdk/no-method-not-found").
	Name string
	// Package is the shipped extension the mutant is built and certified
	// as (an SDK mutant names the extension it is built into).
	Package string
	// Breaks is the spec obligation the edits break.
	Breaks string
	// Caught is the ID of the criterion expected to catch it.
	Caught string
	// Edits are applied in order.
	Edits []Edit
}

// Packages are the extensions mutants are built as: each has its command
// at extensions/NAME/cmd/NAME and its manifest in extensions/NAME.
var Packages = []string{"notes", "runner", "schedule", "shell"}

// ErrEditDoesNotApply is returned when an edit's old text does not occur
// exactly once in its file: the mutant no longer matches the source.
var ErrEditDoesNotApply = errors.New("mutant edit does not apply")

// ErrUnknownPackage is returned for a mutant whose Package is not one of
// Packages.
var ErrUnknownPackage = errors.New("mutant names an unknown package")

// ModuleRoot returns the directory of the module that holds dir.
func ModuleRoot(dir string) (string, error) {
	cmd := exec.Command("go", "env", "GOMOD")
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", fmt.Errorf("%s is not inside a module", dir)
	}
	return filepath.Dir(mod), nil
}

// Apply returns the mutated contents of every file m edits, by module
// path, reading the originals under root. It is refused (ErrEditDoesNotApply)
// when an edit's old text does not occur exactly once, or changes nothing.
func Apply(root string, m Mutant) (map[string][]byte, error) {
	if !slices.Contains(Packages, m.Package) {
		return nil, fmt.Errorf("%s: %w: %q", m.Name, ErrUnknownPackage, m.Package)
	}
	files := map[string][]byte{}
	for i, e := range m.Edits {
		data, ok := files[e.File]
		if !ok {
			var err error
			if data, err = os.ReadFile(filepath.Join(root, filepath.FromSlash(e.File))); err != nil {
				return nil, fmt.Errorf("%s: edit %d: %w", m.Name, i+1, err)
			}
		}
		if e.Old == e.New {
			return nil, fmt.Errorf("%s: edit %d of %s: %w: old and new are the same", m.Name, i+1, e.File, ErrEditDoesNotApply)
		}
		if n := bytes.Count(data, []byte(e.Old)); n != 1 {
			return nil, fmt.Errorf("%s: edit %d of %s: %w: the old text occurs %d times, not once: %q", m.Name, i+1, e.File, ErrEditDoesNotApply, n, e.Old)
		}
		files[e.File] = bytes.Replace(data, []byte(e.Old), []byte(e.New), 1)
	}
	return files, nil
}

// Built is a mutant built into a package directory.
type Built struct {
	Mutant Mutant
	// Dir is the package directory: the manifest and the binary.
	Dir string
}

// Build applies m's edits, builds its package's command against them with
// an overlay, and writes a package directory under work (which must exist
// and be m's alone). The build's output is part of the error when it fails.
func Build(ctx context.Context, root, work string, m Mutant) (Built, error) {
	files, err := Apply(root, m)
	if err != nil {
		return Built{}, err
	}
	binName := m.Package + "-mutant"
	manifestPath := "extensions/" + m.Package + "/" + protocol.ManifestFile
	manifest, ok := files[manifestPath]
	if !ok {
		if manifest, err = os.ReadFile(filepath.Join(root, filepath.FromSlash(manifestPath))); err != nil {
			return Built{}, err
		}
	}
	if manifest, err = withCommand(manifest, m.Package, binName); err != nil {
		return Built{}, fmt.Errorf("%s: %w", m.Name, err)
	}
	files[manifestPath] = manifest

	overlayDir := filepath.Join(work, "overlay")
	pkgDir := filepath.Join(work, "package")
	replace := map[string]string{}
	for name, data := range files {
		dst := filepath.Join(overlayDir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return Built{}, err
		}
		if err := os.WriteFile(dst, data, 0o644); err != nil {
			return Built{}, err
		}
		replace[filepath.Join(root, filepath.FromSlash(name))] = dst
	}
	overlay, err := json.Marshal(map[string]any{"Replace": replace})
	if err != nil {
		return Built{}, err
	}
	overlayFile := filepath.Join(work, "overlay.json")
	if err := os.WriteFile(overlayFile, overlay, 0o644); err != nil {
		return Built{}, err
	}
	if err := os.MkdirAll(pkgDir, 0o755); err != nil {
		return Built{}, err
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-overlay", overlayFile, "-ldflags=-s -w", "-o", filepath.Join(pkgDir, binName),
		"./extensions/"+m.Package+"/cmd/"+m.Package)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return Built{}, fmt.Errorf("%s: go build: %v\n%s", m.Name, err, out)
	}
	if err := os.WriteFile(filepath.Join(pkgDir, protocol.ManifestFile), manifest, 0o644); err != nil {
		return Built{}, err
	}
	// The author's inputs travel with the package.
	inputs := filepath.Join(root, "extensions", m.Package, "certify", "inputs.json")
	if data, err := os.ReadFile(inputs); err == nil {
		if err := os.MkdirAll(filepath.Join(pkgDir, "certify"), 0o755); err != nil {
			return Built{}, err
		}
		if err := os.WriteFile(filepath.Join(pkgDir, "certify", "inputs.json"), data, 0o644); err != nil {
			return Built{}, err
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return Built{}, err
	}
	return Built{Mutant: m, Dir: pkgDir}, nil
}

// withCommand replaces the manifest's host-run command with the binary
// beside it, as an exact edit: the rest of the manifest stays byte for byte.
func withCommand(manifest []byte, name, bin string) ([]byte, error) {
	old, err := json.Marshal(protocol.HostRunCommand(name))
	if err != nil {
		return nil, err
	}
	// The shipped manifests write the array with a space after each comma.
	spaced := bytes.ReplaceAll(old, []byte(`","`), []byte(`", "`))
	with, _ := json.Marshal([]string{bin})
	for _, o := range [][]byte{spaced, old} {
		if bytes.Count(manifest, o) == 1 {
			return bytes.Replace(manifest, o, with, 1), nil
		}
	}
	return nil, fmt.Errorf("%w: the manifest's command is not %s exactly once", ErrEditDoesNotApply, old)
}

// Verdict is one criterion's result in a mutant's certification.
type Verdict struct {
	ID     string         `json:"id"`
	Status certify.Status `json:"status"`
	Detail string         `json:"detail"`
}

// Result is what certifying a mutant found.
type Result struct {
	Mutant   Mutant
	ExitCode int
	Criteria []Verdict
	// Output is certify's progress output, for a survivor's message.
	Output string
}

// Failed lists the criteria that failed.
func (r Result) Failed() []string { return r.with(certify.StatusFail) }

// HarnessErrors lists the criteria that ended as harness_error.
func (r Result) HarnessErrors() []string { return r.with(certify.StatusHarnessError) }

func (r Result) with(s certify.Status) []string {
	var ids []string
	for _, c := range r.Criteria {
		if c.Status == s {
			ids = append(ids, c.ID)
		}
	}
	return ids
}

// Status returns the status criterion id ended with ("" when it was not in
// the report).
func (r Result) Status(id string) certify.Status {
	for _, c := range r.Criteria {
		if c.ID == id {
			return c.Status
		}
	}
	return ""
}

// Killed reports whether certification caught the mutant: a criterion
// failed, or ended as harness_error (the runner could not certify it,
// which no release may ship with either).
func (r Result) Killed() bool { return len(r.Failed())+len(r.HarnessErrors()) > 0 }

// Certify runs `bin extension certify --json` on the built mutant, with
// env as its environment (nil for this process's), and returns the
// verdicts. An exit status that is neither pass, fail nor harness is an
// error: the certifier did not run.
func Certify(ctx context.Context, bin string, env []string, b Built) (Result, error) {
	report := filepath.Join(filepath.Dir(b.Dir), "report.json")
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, "extension", "certify", "--json", report, b.Dir)
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.Env = env
	err := cmd.Run()
	code := 0
	if exit := (*exec.ExitError)(nil); errors.As(err, &exit) {
		code = exit.ExitCode()
	} else if err != nil {
		return Result{}, fmt.Errorf("%s: certify: %w", b.Mutant.Name, err)
	}
	if code != certify.ExitOK && code != certify.ExitFail && code != certify.ExitHarness {
		return Result{}, fmt.Errorf("%s: certify exited %d\n%s", b.Mutant.Name, code, out.String())
	}
	data, err := os.ReadFile(report)
	if err != nil {
		return Result{}, fmt.Errorf("%s: certify wrote no report (exit status %d): %w\n%s", b.Mutant.Name, code, err, out.String())
	}
	var parsed struct {
		ExitCode int       `json:"exit_code"`
		Criteria []Verdict `json:"criteria"`
	}
	if err := json.Unmarshal(data, &parsed); err != nil {
		return Result{}, fmt.Errorf("%s: the report: %w", b.Mutant.Name, err)
	}
	if len(parsed.Criteria) == 0 {
		return Result{}, fmt.Errorf("%s: the report holds no criterion", b.Mutant.Name)
	}
	return Result{Mutant: b.Mutant, ExitCode: code, Criteria: parsed.Criteria, Output: out.String()}, nil
}
