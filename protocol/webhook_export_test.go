package protocol

// WebhookFastForTest reports whether the hand-written decoders of
// webhook.handle take their fast path for data, for the tests that the
// fast path is what they measure.
func WebhookFastForTest(data []byte) (params, result bool) {
	var p WebhookHandleParams
	var r WebhookHandleResult
	return decodeWebhookHandleParams(data, &p), decodeWebhookHandleResult(data, &r)
}
