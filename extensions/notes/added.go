package notes

import "github.com/open-conduit/open-conduit/protocol/sdk"

// AddedNoteID is the ID of the note notes.add makes for a call under
// requestID: it derives from the call's intent (sdk.IntentKey), so every
// retry of the call names the same note. A check that an acknowledged
// call's effect happened once (the drill soak's) looks for exactly this
// note, and for no note it cannot account for.
func AddedNoteID(requestID string) string { return noteID(sdk.IntentKey(requestID, OpAdd)) }
