package scenarios_test

import (
	"encoding/json"
	"strconv"

	"github.com/rogpeppe/go-internal/testscript"
)

// scriptCmds are the commands the scenarios add to testscript's, sorted.
var scriptCmds = map[string]func(ts *testscript.TestScript, neg bool, args []string){
	"count":  cmdCount,
	"status": cmdStatus,
}

// jsonReport is the part of certify's --json report the commands read.
type jsonReport struct {
	Criteria []struct {
		ID     string `json:"id"`
		Status string `json:"status"`
		Detail string `json:"detail"`
	} `json:"criteria"`
}

func readReport(ts *testscript.TestScript, file string) jsonReport {
	var r jsonReport
	if err := json.Unmarshal([]byte(ts.ReadFile(file)), &r); err != nil {
		ts.Fatalf("%s is not a certify JSON report: %v", file, err)
	}
	return r
}

// cmdStatus: status FILE ID STATUS — criterion ID of the JSON report FILE
// ended as STATUS.
func cmdStatus(ts *testscript.TestScript, neg bool, args []string) {
	if neg {
		ts.Fatalf("unsupported: ! status")
	}
	if len(args) != 3 {
		ts.Fatalf("usage: status FILE ID STATUS")
	}
	for _, c := range readReport(ts, args[0]).Criteria {
		if c.ID != args[1] {
			continue
		}
		if c.Status != args[2] {
			ts.Fatalf("criterion %s is %s, want %s: %s", c.ID, c.Status, args[2], c.Detail)
		}
		return
	}
	ts.Fatalf("the report has no criterion %s", args[1])
}

// cmdCount: count FILE STATUS N — exactly N criteria of the JSON report
// FILE ended as STATUS; the others are listed when it fails.
func cmdCount(ts *testscript.TestScript, neg bool, args []string) {
	if neg {
		ts.Fatalf("unsupported: ! count")
	}
	if len(args) != 3 {
		ts.Fatalf("usage: count FILE STATUS N")
	}
	want, err := strconv.Atoi(args[2])
	if err != nil {
		ts.Fatalf("count: N: %v", err)
	}
	var got int
	for _, c := range readReport(ts, args[0]).Criteria {
		if c.Status == args[1] {
			got++
			ts.Logf("%s %s: %s", c.Status, c.ID, c.Detail)
		}
	}
	if got != want {
		ts.Fatalf("%d criteria are %s, want %d", got, args[1], want)
	}
}
