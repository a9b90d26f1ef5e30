package extensiontest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/open-conduit/open-conduit/protocol/sdk"
)

// Webhook is one request to the daemon's webhook listener.
type Webhook struct {
	// Path is the path the package registered, such as "/notes/test/main".
	Path string
	// Body is the request body; when nil, JSON is marshalled instead.
	Body []byte
	JSON any
	// Header is added to the request (Content-Type defaults to
	// application/json).
	Header map[string]string
	// Sign, when set, signs the body as the package expects.
	Sign *Signature
	// Status is the HTTP status the listener must answer; 0 means any 2xx
	// (a delivery the daemon accepted durably).
	Status int
}

// Signature signs a webhook body: Header gets "sha256=<hex>" of the
// HMAC-SHA256 of the body under Secret (sdk.SignHMACSHA256, which
// sdk.VerifyHMACSHA256 checks on the package's side).
type Signature struct {
	Header string
	Secret []byte
}

// HMACSHA256 is a Signature in header under secret.
func HMACSHA256(header string, secret []byte) *Signature {
	return &Signature{Header: header, Secret: secret}
}

func (w *Webhook) wantStatus() string {
	if w.Status == 0 {
		return "2xx"
	}
	return fmt.Sprint(w.Status)
}

func (w *Webhook) body() ([]byte, error) {
	if w.Body != nil || w.JSON == nil {
		return w.Body, nil
	}
	return json.Marshal(w.JSON)
}

// deliver sends w to the listener and holds its status to w.Status.
func (h *H) deliver(ctx context.Context, w *Webhook) error {
	st, err := h.d.client.Status(ctx)
	if err != nil {
		return err
	}
	if st.Paths.Webhook == "" {
		return fmt.Errorf("the daemon serves no webhook listener")
	}
	body, err := w.body()
	if err != nil {
		return fmt.Errorf("encoding the body: %v", err)
	}
	req, err := http.NewRequestWithContext(ctx, "POST", "http://"+st.Paths.Webhook+w.Path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range w.Header {
		req.Header.Set(k, v)
	}
	if w.Sign != nil {
		req.Header.Set(w.Sign.Header, sdk.SignHMACSHA256(w.Sign.Secret, body))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	h.Logf("webhook POST %s (%d bytes): %s %s", w.Path, len(body), resp.Status, strings.TrimSpace(string(answer)))
	ok := resp.StatusCode/100 == 2
	if w.Status != 0 {
		ok = resp.StatusCode == w.Status
	}
	if !ok {
		return fmt.Errorf("answered %s: %s", resp.Status, strings.TrimSpace(string(answer)))
	}
	return nil
}
