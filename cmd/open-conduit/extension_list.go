package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/open-conduit/open-conduit/host"
	"github.com/open-conduit/open-conduit/host/packages"
	"github.com/open-conduit/open-conduit/protocol"
)

// ---- list ----

// extensionListCommand lists the installed and bundled packages from the
// disk, with the running daemon's state and restarts when one answers.
func extensionListCommand(args []string, stdout, stderr io.Writer) int {
	o := newPkg("extension list", stdout, stderr, false)
	if !o.parse(args, 0, 0) {
		return exitUsage
	}
	ctx, cancel := opsContext()
	defer cancel()
	cfg, err := o.configDir()
	if err != nil {
		return o.fail(err)
	}
	root := filepath.Join(cfg, "extensions")
	// A change a crash left half done is settled first, unless a
	// packaging command is at work on the tree (then it is listed as is).
	if err := packages.Recover(root); err != nil {
		return o.fail(err)
	}
	bundled, _ := host.BundledRoot()
	entries, err := packages.List(root, bundled)
	if err != nil {
		return o.fail(err)
	}
	if c := o.daemonClient(ctx); c != nil {
		defer c.Close()
		if st, err := c.Status(ctx); err == nil {
			for i := range entries {
				e := &entries[i]
				for _, p := range st.Packages {
					if p.Name == e.Name && p.Dir == e.Dir {
						e.Daemon, e.State, e.Restarts, e.Negotiated, e.LastError = true, p.State, p.Restarts, p.Protocol, p.LastError
					}
				}
				if !e.Daemon && e.Refused == "" {
					e.Daemon, e.State = true, "not loaded"
				}
			}
			// What the daemon runs that is no longer on disk (changed by
			// hand, not reloaded yet).
			for _, p := range st.Packages {
				found := false
				for _, e := range entries {
					found = found || e.Name == p.Name && e.Dir == p.Dir
				}
				if !found {
					entries = append(entries, packages.Entry{Name: p.Name, Version: p.Version, Origin: p.Origin, Dir: p.Dir,
						Permissions: append([]string{}, p.Permissions...), Daemon: true, State: p.State, Restarts: p.Restarts,
						Negotiated: p.Protocol, LastError: "not on disk any more: the daemon runs it until a reload"})
				}
			}
		}
	}
	return o.print(entries, func(w *tabwriter.Writer) {
		fmt.Fprintln(w, "NAME\tVERSION\tORIGIN\tPROTOCOL\tPERMISSIONS\tSTATE\tRESTARTS\tNOTE")
		for _, e := range entries {
			origin := e.Origin
			if e.ReplacesBundled {
				origin += " (replaces bundled)"
			}
			state, restarts := "-", "-"
			if e.Daemon {
				state, restarts = e.State, fmt.Sprint(e.Restarts)
			}
			note := e.Refused
			if note != "" {
				state, note = "refused", "refused: "+note
			} else if e.LastError != "" {
				note = e.LastError
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", e.Name, orDash(e.Version), origin, orDash(versionList(e.Protocol)),
				orDash(strings.Join(e.Permissions, ",")), state, restarts, orDash(oneLine(note, 100)))
		}
	})
}

func versionList(vs []protocol.Version) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = fmt.Sprint(v)
	}
	return strings.Join(parts, ",")
}

// ---- inspect ----

// inspection is what inspect prints with --json.
type inspection struct {
	packages.Description
	// Installed is the ledger's record of the installed release.
	Installed *packages.Record `json:"installed,omitempty"`
	// Previous is the release kept for rollback.
	Previous *packages.Release `json:"previous,omitempty"`
	// KVLayout is the KV layout the store records for the package, when
	// it could be read: no release with a lower kv_version runs on it.
	KVLayout *int `json:"kv_layout,omitempty"`
}

// extensionInspectCommand describes a package: an installed or bundled
// one by name, or a directory.
func extensionInspectCommand(args []string, stdout, stderr io.Writer) int {
	o := newPkg("extension inspect", stdout, stderr, false)
	if !o.parse(args, 1, 1) {
		return exitUsage
	}
	cfg, err := o.configDir()
	if err != nil {
		return o.fail(err)
	}
	root := filepath.Join(cfg, "extensions")
	arg := o.args[0]
	var out inspection
	dir, origin := "", ""
	if protocol.IsIdentifier(arg) && !strings.Contains(arg, string(filepath.Separator)) {
		if err := packages.Recover(root); err != nil {
			return o.fail(err)
		}
		cands := []struct{ dir, origin string }{{filepath.Join(root, arg), packages.OriginInstalled}}
		if bundled, err := host.BundledRoot(); err == nil {
			cands = append(cands, struct{ dir, origin string }{filepath.Join(bundled, arg), packages.OriginBundled})
		}
		// An installed package replaces the bundled one of its name.
		for _, cand := range cands {
			if st, err := os.Stat(cand.dir); err == nil && st.IsDir() {
				dir, origin = cand.dir, cand.origin
				break
			}
		}
	}
	if dir == "" {
		st, err := os.Stat(arg)
		if errors.Is(err, fs.ErrNotExist) || err == nil && !st.IsDir() {
			return o.fail(fmt.Errorf("%s is neither an installed or bundled package nor a package directory", arg))
		}
		if err != nil {
			return o.fail(err)
		}
		if dir, err = filepath.Abs(arg); err != nil {
			return o.fail(err)
		}
		origin = "directory"
	}
	rel, m, err := packages.ReleaseAt(dir)
	if err != nil {
		return o.fail(err)
	}
	out.Description = o.describe(m, rel.Digest, dir, origin)
	if origin != "directory" {
		ctx, cancel := opsContext()
		if layouts, err := o.kvLayouts(ctx); err == nil {
			v := layouts[m.Name]
			out.KVLayout = &v
		}
		cancel()
	}
	if origin == packages.OriginInstalled {
		if tree, err := packages.Open(root, ""); err == nil {
			if l, err := tree.Ledger(); err == nil {
				if r, ok := l.Current(m.Name); ok && r.Digest == rel.Digest {
					out.Installed = &r
				}
			}
			if prev, _, err := tree.Previous(m.Name); err == nil {
				out.Previous = &prev
			}
			tree.Close()
		}
	}
	if o.json {
		o.writeJSON(out)
		return exitOK
	}
	out.Description.WriteText(stdout)
	if out.Installed != nil {
		fmt.Fprintf(stdout, "  installed:    %s from %s at %s\n", out.Installed.Op, out.Installed.Source, out.Installed.Time.Format("2006-01-02 15:04:05Z"))
	}
	if out.KVLayout != nil {
		fmt.Fprintf(stdout, "  kv layout:    %d recorded in the store (a release below it is refused)\n", *out.KVLayout)
	}
	if out.Previous != nil {
		note := ""
		if out.KVLayout != nil && out.Previous.KVVersion < *out.KVLayout {
			note = "; refused: the KV was migrated past it"
		}
		fmt.Fprintf(stdout, "  rollback to:  %s (kv_version %d, %s%s)\n", out.Previous.Version, out.Previous.KVVersion, out.Previous.Digest, note)
	}
	return exitOK
}

// ---- bundle ----

// bundleResult is what bundle prints with --json.
type bundleResult struct {
	Binary   string   `json:"binary"`
	Packages []string `json:"packages"`
}

// extensionBundleCommand writes the release layout into DIR: a copy of
// this binary and, beside it, extensions/<name>/ for every extension it
// serves itself, each a manifest that runs `open-conduit extension-run
// NAME`, which the copy discovers as its bundled packages.
func extensionBundleCommand(args []string, stdout, stderr io.Writer) int {
	o := newOps("extension bundle", stdout, stderr)
	if !o.parse(args, 1, 1) {
		return exitUsage
	}
	dir := o.args[0]
	exe, err := os.Executable()
	if err == nil {
		exe, err = filepath.EvalSymlinks(exe)
	}
	if err != nil {
		return o.fail(fmt.Errorf("finding this binary: %w", err))
	}
	if err := os.MkdirAll(filepath.Join(dir, "extensions"), 0o755); err != nil {
		return o.fail(err)
	}
	res := bundleResult{Binary: filepath.Join(dir, "open-conduit"), Packages: []string{}}
	for _, name := range bundledNames() {
		m, err := protocol.ParseManifest(bundled[name]().Manifest)
		if err != nil {
			return o.fail(fmt.Errorf("the bundled %s's manifest: %w", name, err))
		}
		if !m.RunsOnHost() || m.Name != name {
			return o.fail(fmt.Errorf("the bundled %s's manifest does not run `open-conduit extension-run %s`", name, name))
		}
		pkgDir := filepath.Join(dir, "extensions", name)
		if err := os.MkdirAll(pkgDir, 0o755); err != nil {
			return o.fail(err)
		}
		if err := writeFileReplacing(filepath.Join(pkgDir, protocol.ManifestFile), bundled[name]().Manifest, 0o644); err != nil {
			return o.fail(err)
		}
		if !o.json {
			fmt.Fprintf(stderr, "wrote %s\n", pkgDir)
		}
		res.Packages = append(res.Packages, name)
	}
	if err := copyBinary(exe, res.Binary); err != nil {
		return o.fail(err)
	}
	return o.print(res, func(w *tabwriter.Writer) {
		fmt.Fprintf(w, "bundled %s beside %s\n", strings.Join(res.Packages, ", "), res.Binary)
	})
}

// copyBinary copies the executable src to dst through a temporary file
// renamed over it, so a running copy is never written in place.
func copyBinary(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	data, err := io.ReadAll(in)
	if err != nil {
		return err
	}
	return writeFileReplacing(dst, data, 0o755)
}

func writeFileReplacing(path string, data []byte, perm os.FileMode) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, perm); err != nil {
		return err
	}
	if err := os.Chmod(tmp, perm); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}
