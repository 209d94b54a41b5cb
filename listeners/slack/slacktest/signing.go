package slacktest

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strconv"
	"time"
)

// Sign computes Slack's request signature for body sent at ts:
// "v0=" + hex(HMAC-SHA256(secret, "v0:" + timestamp + ":" + body)), and the
// X-Slack-Request-Timestamp value (Unix seconds).
func Sign(secret string, ts time.Time, body []byte) (signature, timestamp string) {
	timestamp = strconv.FormatInt(ts.Unix(), 10)
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte("v0:" + timestamp + ":"))
	mac.Write(body)
	return "v0=" + hex.EncodeToString(mac.Sum(nil)), timestamp
}

// SignedRequest builds the POST Slack makes to an app's HTTP endpoint
// (events, interactivity, commands): body signed with secret at ts in
// X-Slack-Signature and X-Slack-Request-Timestamp. The Content-Type is
// application/json for a JSON body (events) and
// application/x-www-form-urlencoded otherwise (interactivity, commands).
//
// A wrong secret forges the signature; a ts more than five minutes old
// makes a replay Slack's verifiers must refuse.
func SignedRequest(url, secret string, body []byte, ts time.Time) (*http.Request, error) {
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	sig, stamp := Sign(secret, ts, body)
	ct := "application/x-www-form-urlencoded"
	if b := bytes.TrimSpace(body); len(b) > 0 && b[0] == '{' {
		ct = "application/json"
	}
	req.Header.Set("Content-Type", ct)
	req.Header.Set("User-Agent", "Slackbot 1.0 (+https://api.slack.com/robots)")
	req.Header.Set("X-Slack-Signature", sig)
	req.Header.Set("X-Slack-Request-Timestamp", stamp)
	return req, nil
}

// MarkRetry adds the headers Slack sets when it redelivers an Events API
// request: X-Slack-Retry-Num and X-Slack-Retry-Reason (e.g. "http_timeout").
func MarkRetry(req *http.Request, attempt int, reason string) {
	req.Header.Set("X-Slack-Retry-Num", strconv.Itoa(attempt))
	req.Header.Set("X-Slack-Retry-Reason", reason)
}
