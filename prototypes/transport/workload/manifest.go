package workload

import _ "embed"

// Manifest is the full-stack extension's open-conduit-extension.json.
//
//go:embed manifest.json
var Manifest []byte

// KVNamespace is where the full-stack extension's push lands.
const KVNamespace = "bench"
