package extensiontest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Certify certifies the package in dir as `open-conduit extension certify`
// does (the same binary the cases run) and reports each criterion as a
// subtest named by its ID: a pass passes, a failure fails with the
// criterion's detail and evidence, a criterion that does not apply skips
// with the reason certification gave. The package is staged as a case
// installs it (a Go main package is built first).
func Certify(t *testing.T, dir string) {
	t.Helper()
	bin, err := Binary()
	if err != nil {
		t.Fatalf("extensiontest: %v", err)
	}
	scratch, err := os.MkdirTemp("", "oc-et-cert-")
	if err != nil {
		t.Fatal(err)
	}
	keep := os.Getenv(KeepEnv) == "1"
	defer func() {
		if keep || t.Failed() {
			t.Logf("extensiontest: certification directory kept: %s", scratch)
			return
		}
		os.RemoveAll(scratch)
	}()
	m, err := install(scratch, dir)
	if err != nil {
		t.Fatalf("extensiontest: staging %s: %v", dir, err)
	}
	staged := filepath.Join(scratch, "extensions", m.Name)
	reportFile := filepath.Join(scratch, "report.json")
	cmd := exec.Command(bin, "extension", "certify", "--json", reportFile, staged)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	runErr := cmd.Run()
	data, err := os.ReadFile(reportFile)
	if err != nil {
		t.Fatalf("extensiontest: certify wrote no report (%v): %v\n%s", runErr, err, out.String())
	}
	var rep certifyReport
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatalf("extensiontest: certify's report does not decode: %v", err)
	}
	if len(rep.Criteria) == 0 {
		t.Fatalf("extensiontest: certify reported no criteria (exit %v):\n%s", runErr, out.String())
	}
	for _, c := range rep.Criteria {
		t.Run(c.ID, func(t *testing.T) {
			switch c.Status {
			case "pass":
			case "skip":
				t.Skipf("%s does not apply: %s", c.ID, c.Detail)
			default:
				msg := fmt.Sprintf("%s %s: %s (%s)\n%s", c.ID, strings.ToUpper(c.Status), c.Title, c.Section, c.Detail)
				if len(c.Evidence) > 0 && string(c.Evidence) != "null" {
					var pretty bytes.Buffer
					if json.Indent(&pretty, c.Evidence, "  ", "  ") == nil {
						msg += "\nevidence:\n  " + pretty.String()
					}
				}
				t.Error(msg)
			}
		})
	}
	if !rep.OK && !t.Failed() {
		t.Errorf("extensiontest: certify failed the run (exit code %d) though no criterion failed:\n%s", rep.ExitCode, out.String())
	}
}

// certifyReport is the part of certify's JSON report (--json) Certify
// reads.
type certifyReport struct {
	OK       bool `json:"ok"`
	ExitCode int  `json:"exit_code"`
	Criteria []struct {
		ID       string          `json:"id"`
		Title    string          `json:"title"`
		Section  string          `json:"section"`
		Status   string          `json:"status"`
		Detail   string          `json:"detail"`
		Evidence json.RawMessage `json:"evidence"`
	} `json:"criteria"`
}
