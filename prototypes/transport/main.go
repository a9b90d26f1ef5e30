// Command transport runs one workload over the project's JSON-RPC transport,
// the full stack (the real host service and an SDK extension),
// hashicorp/go-plugin over gRPC and a raw pipe floor, checks that every
// transport keeps the seed's semantics, and prints every figure of the
// seed's table with each transport's ratio to the others, measured in the
// same run. -json writes the result file.
//
//	go run . [-json results.json] [-echoes 20000] [-checks=true] [-only jsonrpc,fullstack] [-cpuprofile FILE]
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"time"
)

func main() {
	jsonPath := flag.String("json", "results.json", "write the results as JSON to this file (empty: none)")
	echoN := flag.Int("echoes", 20000, "sequential echoes measured for p50 and p99 per transport, in interleaved rounds of 500")
	runChecksFlag := flag.Bool("checks", true, "run the semantic checks")
	only := flag.String("only", "", "comma-separated transports to run (default all)")
	cpuProfile := flag.String("cpuprofile", "", "write the host side's CPU profile to this file; TRANSPORT_EXT_CPUPROFILE=FILE does the same for each ext-sdk process, as FILE.PID")
	flag.Parse()
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "transport:", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	if err := run(*jsonPath, *echoN, *runChecksFlag, *only); err != nil {
		pprof.StopCPUProfile()
		fmt.Fprintln(os.Stderr, "transport:", err)
		os.Exit(1)
	}
}

// The transports, in the table's order. Each ext-* command is its own
// binary, built by run.
func transports() []*transport {
	return []*transport{
		{name: "jsonrpc", binary: "ext-jsonrpc", start: startJSONRPC},
		{name: "fullstack", binary: "ext-sdk", start: startFullStack, restarts: true},
		{name: "goplugin", binary: "ext-goplugin", start: startPlugin},
		{name: "raw-reader", binary: "ext-raw", start: startRaw(false), floor: true},
		{name: "raw-lockstep", binary: "ext-raw", start: startRaw(true), floor: true},
	}
}

// Result is the JSON result file.
type Result struct {
	When       time.Time              `json:"when"`
	GoVersion  string                 `json:"go_version"`
	Platform   string                 `json:"platform"`
	CPUs       int                    `json:"cpus"`
	Transports []Figures              `json:"transports"`
	Ratios     map[string]float64     `json:"ratios"`
	Targets    []Target               `json:"targets"`
	Checks     map[string]CheckResult `json:"checks"`
}

// CheckResult is one transport's semantic checks: those that passed and
// the failures by name.
type CheckResult struct {
	Passed []string          `json:"passed"`
	Failed map[string]string `json:"failed,omitempty"`
}

func run(jsonPath string, echoN int, doChecks bool, only string) error {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "transport-bins-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	logPath := filepath.Join(os.TempDir(), "transport-extensions.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logFile.Close()
	extensionLog = logFile
	fmt.Fprintf(os.Stderr, "extensions' stderr goes to %s\n", logPath)
	ts := transports()
	if only != "" {
		ts = slices.DeleteFunc(ts, func(t *transport) bool { return !slices.Contains(strings.Split(only, ","), t.name) })
		if len(ts) == 0 {
			return fmt.Errorf("-only %q names no transport", only)
		}
	}
	built := map[string]string{}
	for _, t := range ts {
		if built[t.binary] == "" {
			out := filepath.Join(dir, t.binary)
			fmt.Fprintf(os.Stderr, "building %s\n", t.binary)
			cmd := exec.Command("go", "build", "-o", out, "./cmd/"+t.binary)
			cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
			if err := cmd.Run(); err != nil {
				return fmt.Errorf("building %s: %w", t.binary, err)
			}
			built[t.binary] = out
		}
		t.binary = built[t.binary]
	}
	res := Result{When: time.Now().UTC(), GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH,
		CPUs: runtime.NumCPU(), Checks: map[string]CheckResult{}}
	for _, t := range ts {
		if doChecks && !t.floor {
			fmt.Fprintf(os.Stderr, "checking %s\n", t.name)
			failed := runChecks(ctx, t)
			cr := CheckResult{Failed: failed}
			for _, c := range checks {
				if _, bad := failed[c.name]; !bad {
					cr.Passed = append(cr.Passed, c.name)
				}
			}
			res.Checks[t.name] = cr
		}
		fmt.Fprintf(os.Stderr, "measuring %s\n", t.name)
		f, err := measure(ctx, t)
		if err != nil {
			return fmt.Errorf("%s: %w", t.name, err)
		}
		res.Transports = append(res.Transports, f)
	}
	fmt.Fprintf(os.Stderr, "measuring cold starts and echoes, interleaved\n")
	if err := measureInterleaved(ctx, ts, res.Transports, echoN); err != nil {
		return err
	}
	res.Ratios, res.Targets = compare(res.Transports)
	printTable(os.Stdout, res)
	if jsonPath != "" {
		b, err := json.MarshalIndent(res, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(jsonPath, append(b, '\n'), 0o644); err != nil {
			return err
		}
	}
	for name, c := range res.Checks {
		if len(c.Failed) > 0 {
			return fmt.Errorf("%s failed semantic checks: %s", name, strings.Join(slices.Sorted(maps.Keys(c.Failed)), ", "))
		}
	}
	return nil
}
