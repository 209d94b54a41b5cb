package discordtest

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"strconv"
	"time"
)

// NewKeyPair generates an Ed25519 key pair like the one Discord gives an
// application: the public key is what an app verifies interaction
// signatures against (hex-encoded in the Developer Portal).
func NewKeyPair() (ed25519.PublicKey, ed25519.PrivateKey, error) {
	return ed25519.GenerateKey(rand.Reader)
}

// Sign signs an interaction body sent at ts the way Discord does: an
// Ed25519 signature over timestamp+body, hex-encoded, with the timestamp
// in Unix seconds. It returns the X-Signature-Ed25519 and
// X-Signature-Timestamp values.
func Sign(priv ed25519.PrivateKey, ts time.Time, body []byte) (signature, timestamp string) {
	timestamp = strconv.FormatInt(ts.Unix(), 10)
	msg := append([]byte(timestamp), body...)
	return hex.EncodeToString(ed25519.Sign(priv, msg)), timestamp
}

// Verify reports whether signature (hex) is a valid signature of
// timestamp+body by pub, as an app must check before trusting an
// interaction.
func Verify(pub ed25519.PublicKey, signature, timestamp string, body []byte) bool {
	sig, err := hex.DecodeString(signature)
	if err != nil || len(sig) != ed25519.SignatureSize {
		return false
	}
	return ed25519.Verify(pub, append([]byte(timestamp), body...), sig)
}

// SignedInteraction builds the POST Discord makes to an application's
// Interactions Endpoint URL: body (an interaction object, see
// Interaction.Payload or PingBody) signed with priv at ts, in
// X-Signature-Ed25519 and X-Signature-Timestamp. Signing with another key
// forges the request; an app must answer 401 to it.
func SignedInteraction(url string, priv ed25519.PrivateKey, body []byte, ts time.Time) (*http.Request, error) {
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	sig, stamp := Sign(priv, ts, body)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "Discord-Interactions/1.0 (+https://discord.com)")
	req.Header.Set("X-Signature-Ed25519", sig)
	req.Header.Set("X-Signature-Timestamp", stamp)
	return req, nil
}
