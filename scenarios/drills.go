package scenarios

import "embed"

// Drills holds the fault drills, testdata/drills/*.txtar, embedded so a
// release binary replays them (open-conduit drill run NAME) without the
// repository. Package drill runs them; TestDrills runs every one.
//
//go:embed testdata/drills/*.txtar
var Drills embed.FS
