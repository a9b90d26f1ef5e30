package protocol

// DecodeStrict decodes a JSON document into v (a pointer to a struct) by
// the rules the manifest reader applies: valid UTF-8, one value and
// nothing after it, no duplicate member, member names matched exactly, no
// unknown member, null only for lists, maps, pointers and interfaces,
// integers that fit, at most MaxManifestBytes and MaxManifestDepth. Every
// refusal is a *ManifestError naming the rule and the JSON path. The
// daemon reads its configuration with it. Raw JSON fields
// (json.RawMessage) are not supported; declare a free-form object as
// map[string]any.
func DecodeStrict(data []byte, v any) error { return decodeStrict(data, v) }
