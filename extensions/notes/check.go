package notes

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/protocol/sdk"
)

// checkStores is the doctor check: every configured entry's note store is
// a readable directory. A store that does not exist yet is a warning (it
// reads as empty, so reconcile would infer every note absent).
func (x *extension) checkStores(ctx context.Context, host *sdk.Host, p protocol.CheckRunParams) (protocol.CheckRunResult, error) {
	entries, _ := x.snapshot()
	if len(entries) == 0 {
		return protocol.CheckRunResult{Status: protocol.CheckInfo, Code: "notes_no_entries", Detail: "no notes entry is configured"}, nil
	}
	var problems []string
	for _, e := range entries {
		info, err := os.Stat(e.Store.Dir)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			problems = append(problems, fmt.Sprintf("%s/%s: the note store %s does not exist", e.ScopeID, e.ID, e.Store.Dir))
		case err != nil:
			problems = append(problems, fmt.Sprintf("%s/%s: %v", e.ScopeID, e.ID, err))
		case !info.IsDir():
			problems = append(problems, fmt.Sprintf("%s/%s: the note store %s is not a directory", e.ScopeID, e.ID, e.Store.Dir))
		default:
			if _, err := e.Store.IDs(); err != nil {
				problems = append(problems, fmt.Sprintf("%s/%s: %v", e.ScopeID, e.ID, err))
			}
		}
	}
	if len(problems) > 0 {
		return protocol.CheckRunResult{Status: protocol.CheckWarn, Code: "notes_store_unreadable",
			Detail: fmt.Sprintf("%d of %d note stores cannot be read", len(problems), len(entries)), Items: problems}, nil
	}
	return protocol.CheckRunResult{Status: protocol.CheckOK, Detail: fmt.Sprintf("%d note stores readable", len(entries))}, nil
}
