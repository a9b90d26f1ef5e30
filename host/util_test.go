package host_test

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/open-conduit/open-conduit/host"
	"github.com/open-conduit/open-conduit/runtime"
)

type runtimeTx = runtime.Tx

func putLayout(tx runtime.Tx, name string, v int) error {
	b, _ := json.Marshal(v)
	return tx.KVCommit(runtime.KVBatch{Puts: []runtime.KVPut{{Namespace: host.KVLayoutNamespace, Key: name, Value: b}}})
}

var farDue = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

func fmtSprintf(format string, args ...any) string { return fmt.Sprintf(format, args...) }
