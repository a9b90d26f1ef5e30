package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
)

// Target is one of issue 18's targets, judged on this run's ratios.
type Target struct {
	What  string  `json:"what"`
	Ratio float64 `json:"ratio"`
	Bound string  `json:"bound"`
	Met   bool    `json:"met"`
}

// metric names one figure, how to read it and whether more is better.
type metric struct {
	key, title string
	get        func(Figures) float64
	unit       string
	higher     bool
}

var metrics = []metric{
	{"cold_start", "Cold start", func(f Figures) float64 { return f.ColdStartUS }, "µs", false},
	{"warm_restart", "Warm restart", func(f Figures) float64 { return f.WarmRestartUS }, "µs", false},
	{"version_mismatch", "Version mismatch", func(f Figures) float64 { return f.VersionRefuseUS }, "µs", false},
	{"echo_p50", "Echo p50", func(f Figures) float64 { return f.EchoP50US }, "µs", false},
	{"echo_p99", "Echo p99", func(f Figures) float64 { return f.EchoP99US }, "µs", false},
	{"echo_cpu", "Echo CPU (host+ext)", func(f Figures) float64 { return f.EchoHostCPUUS + f.EchoExtCPUUS }, "µs", false},
	{"host_callback", "Host callback", func(f Figures) float64 { return f.CallbackUS }, "µs", false},
	{"artifact", "Artifact 16 MiB / 64 KiB", func(f Figures) float64 { return f.ArtifactMiBps }, "MiB/s", true},
	{"cancel_seen", "Cancel seen", func(f Figures) float64 { return f.CancelSeenUS }, "µs", false},
	{"crash_detected", "Crash detected", func(f Figures) float64 { return f.CrashDetectUS }, "µs", false},
	{"binary", "Binary", func(f Figures) float64 { return f.BinaryMiB }, "MiB", false},
	{"module_deps", "Module deps", func(f Figures) float64 { return float64(f.ModuleDeps) }, "", false},
}

// pairs are the ratios the table prints: each is the first transport's
// figure over the second's, from this run.
var pairs = [][2]string{
	{"jsonrpc", "goplugin"},
	{"fullstack", "goplugin"},
	{"jsonrpc", "raw-reader"},
	{"jsonrpc", "raw-lockstep"},
	{"fullstack", "jsonrpc"},
	{"fullstack", "raw-reader"},
	{"raw-reader", "raw-lockstep"},
}

func byName(fs []Figures) map[string]Figures {
	m := map[string]Figures{}
	for _, f := range fs {
		m[f.Name] = f
	}
	return m
}

// compare computes every pair's ratio for every metric (a/b.metric) and
// judges the targets.
func compare(fs []Figures) (map[string]float64, []Target) {
	m := byName(fs)
	ratios := map[string]float64{}
	for _, a := range fs {
		for _, b := range fs {
			if a.Name == b.Name {
				continue
			}
			for _, mt := range metrics {
				if x, y := mt.get(a), mt.get(b); x > 0 && y > 0 {
					ratios[a.Name+"/"+b.Name+"."+mt.key] = x / y
				}
			}
		}
	}
	r := func(a, b, key string) float64 { return ratios[a+"/"+b+"."+key] }
	at := func(what string, ratio float64, max bool, bound float64) Target {
		op := "≤"
		met := ratio > 0 && ratio <= bound
		if !max {
			op, met = "≥", ratio >= bound
		}
		return Target{What: what, Ratio: ratio, Bound: fmt.Sprintf("%s %.2f", op, bound), Met: met}
	}
	crash := m["jsonrpc"].CrashDetectUS / 1000
	targets := []Target{
		at("echo p50: jsonrpc / goplugin", r("jsonrpc", "goplugin", "echo_p50"), true, 0.4),
		at("echo p50: jsonrpc / raw-reader", r("jsonrpc", "raw-reader", "echo_p50"), true, 1.5),
		at("echo p99: jsonrpc / goplugin", r("jsonrpc", "goplugin", "echo_p99"), true, 0.5),
		at("host callback: jsonrpc / goplugin", r("jsonrpc", "goplugin", "host_callback"), true, 0.5),
		at("artifact: fullstack / goplugin", r("fullstack", "goplugin", "artifact"), false, 4),
		at("artifact: fullstack / raw-reader", r("fullstack", "raw-reader", "artifact"), false, 0.4),
		at("cold start: jsonrpc / goplugin", r("jsonrpc", "goplugin", "cold_start"), true, 0.5),
		at("warm restart: jsonrpc / goplugin", r("jsonrpc", "goplugin", "warm_restart"), true, 0.5),
		{What: "crash detected: jsonrpc (ms)", Ratio: crash, Bound: "≤ 2.00 ms", Met: crash > 0 && crash <= 2},
		at("echo p50: fullstack / jsonrpc", r("fullstack", "jsonrpc", "echo_p50"), true, 1.2),
	}
	return ratios, targets
}

func format(v float64, unit string) string {
	switch {
	case unit == "":
		return fmt.Sprintf("%.0f", v)
	case v == 0:
		return "-"
	case unit == "µs" && v >= 1000:
		return fmt.Sprintf("%.1f ms", v/1000)
	case unit == "µs":
		return fmt.Sprintf("%.0f µs", v)
	case unit == "":
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f %s", v, unit)
}

func printTable(w io.Writer, res Result) {
	fmt.Fprintf(w, "%s %s, %d CPUs, %s\n\n", res.Platform, res.GoVersion, res.CPUs, res.When.Format("2006-01-02 15:04 UTC"))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	head := []string{"Transport"}
	for _, mt := range metrics {
		head = append(head, mt.title)
	}
	head = append(head, "Semantic checks")
	fmt.Fprintln(tw, strings.Join(head, "\t"))
	for _, f := range res.Transports {
		row := []string{f.Name}
		for _, mt := range metrics {
			row = append(row, format(mt.get(f), mt.unit))
		}
		checks := "floor: n/a"
		if c, ok := res.Checks[f.Name]; ok {
			checks = fmt.Sprintf("%d/%d passed", len(c.Passed), len(c.Passed)+len(c.Failed))
		} else if !strings.HasPrefix(f.Name, "raw") {
			checks = "not run"
		}
		row = append(row, checks)
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	tw.Flush()

	fmt.Fprintln(w, "\nRatios in this run (first / second; below 1 is the first one faster or smaller, except artifact MiB/s where above 1 is faster):")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	head = []string{"Pair"}
	for _, mt := range metrics {
		head = append(head, mt.title)
	}
	fmt.Fprintln(tw, strings.Join(head, "\t"))
	for _, p := range pairs {
		row := []string{p[0] + " / " + p[1]}
		for _, mt := range metrics {
			if v, ok := res.Ratios[p[0]+"/"+p[1]+"."+mt.key]; ok {
				row = append(row, fmt.Sprintf("%.2fx", v))
			} else {
				row = append(row, "-")
			}
		}
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	tw.Flush()

	fmt.Fprintln(w, "\nEcho p50 ratio round by round (the interleaved rounds; the table's figure pools them):")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  Pair\tRounds\tMin\tMedian\tMax\tHost GCs in timed echoes")
	m := byName(res.Transports)
	for _, p := range pairs {
		rs := roundRatios(m[p[0]].EchoRoundP50US, m[p[1]].EchoRoundP50US)
		if len(rs) == 0 {
			continue
		}
		fmt.Fprintf(tw, "  %s / %s\t%d\t%.2fx\t%.2fx\t%.2fx\t%d, %d\n", p[0], p[1], len(rs), rs[0], rs[len(rs)/2], rs[len(rs)-1],
			m[p[0]].EchoGCs, m[p[1]].EchoGCs)
	}
	tw.Flush()

	fmt.Fprintln(w, "\nTargets (issue 18):")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, t := range res.Targets {
		verdict := "met"
		if !t.Met {
			verdict = "MISSED"
		}
		fmt.Fprintf(tw, "  %s\t%.2f\t%s\t%s\n", t.What, t.Ratio, t.Bound, verdict)
	}
	tw.Flush()
	for name, c := range res.Checks {
		for check, why := range c.Failed {
			fmt.Fprintf(w, "FAILED %s %s: %s\n", name, check, why)
		}
	}
}

// roundRatios is a's p50 over b's for each round both have, sorted.
func roundRatios(a, b []float64) []float64 {
	var out []float64
	for i := range min(len(a), len(b)) {
		if a[i] > 0 && b[i] > 0 {
			out = append(out, a[i]/b[i])
		}
	}
	slices.Sort(out)
	return out
}
