package protocol

// WebhookFastForTest reports whether the hand-written decoders of
// webhook.handle take their fast path for data, for the tests that the
// fast path is what they measure.
func WebhookFastForTest(data []byte) (params, result bool) {
	var p WebhookHandleParams
	var r WebhookHandleResult
	return decodeWebhookHandleParams(data, &p), decodeWebhookHandleResult(data, &r, false)
}

// WebhookResultCheckedFastForTest reports whether
// WebhookHandleResult.DecodeCheckedJSON takes its fast path for data.
func WebhookResultCheckedFastForTest(data []byte) bool {
	var r WebhookHandleResult
	return decodeWebhookHandleResult(data, &r, true)
}
