package discordtest_test

import (
	"bytes"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/switchboard-gw/switchboard/listeners/discord/discordtest"
)

func TestSignedInteractionVerifies(t *testing.T) {
	pub, priv, err := discordtest.NewKeyPair()
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"type":1,"id":"1","application_id":"2","token":"t","version":1}`)
	ts := time.Unix(1700000000, 0)
	req, err := discordtest.SignedInteraction("http://127.0.0.1/discord/interactions", priv, body, ts)
	if err != nil {
		t.Fatal(err)
	}
	sig, stamp := req.Header.Get("X-Signature-Ed25519"), req.Header.Get("X-Signature-Timestamp")
	if stamp != "1700000000" || req.Method != http.MethodPost || req.Header.Get("Content-Type") != "application/json" {
		t.Errorf("request %s %s", req.Method, stamp)
	}
	raw, _ := hex.DecodeString(sig)
	if !ed25519.Verify(pub, append([]byte(stamp), body...), raw) {
		t.Error("crypto/ed25519 rejects the signature")
	}
	if !discordgo.VerifyInteraction(req, pub) {
		t.Error("discordgo.VerifyInteraction rejects the signature")
	}
	if got, _ := io.ReadAll(req.Body); !bytes.Equal(got, body) {
		t.Errorf("body after verification = %s", got)
	}
	if !discordtest.Verify(pub, sig, stamp, body) {
		t.Error("Verify rejects the signature")
	}

	// Signed with another key: forged.
	_, other, _ := discordtest.NewKeyPair()
	forged, _ := discordtest.SignedInteraction("http://127.0.0.1/discord/interactions", other, body, ts)
	if discordgo.VerifyInteraction(forged, pub) {
		t.Error("forged request verified")
	}
	// A tampered body or timestamp fails too.
	tampered, _ := discordtest.SignedInteraction("http://127.0.0.1/discord/interactions", priv, body, ts)
	tampered.Body = io.NopCloser(bytes.NewReader([]byte(`{"type":2}`)))
	if discordgo.VerifyInteraction(tampered, pub) {
		t.Error("tampered body verified")
	}
	if discordtest.Verify(pub, sig, "1700000001", body) {
		t.Error("changed timestamp verified")
	}
}

// interactionsApp is a minimal HTTP interactions endpoint: it verifies the
// signature, answers PING with PONG and commands with an inline message.
func interactionsApp(t *testing.T, pub ed25519.PublicKey) *httptest.Server {
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !discordgo.VerifyInteraction(r, pub) {
			http.Error(w, "invalid request signature", http.StatusUnauthorized)
			return
		}
		var in discordgo.Interaction
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		switch in.Type {
		case discordgo.InteractionPing:
			_ = json.NewEncoder(w).Encode(discordgo.InteractionResponse{Type: discordgo.InteractionResponsePong})
		default:
			_ = json.NewEncoder(w).Encode(discordgo.InteractionResponse{Type: discordgo.InteractionResponseChannelMessageWithSource,
				Data: &discordgo.InteractionResponseData{Content: "hello over HTTP"}})
		}
	}))
	t.Cleanup(app.Close)
	return app
}

func TestPostInteractionToAnHTTPEndpoint(t *testing.T) {
	srv := newServer(t)
	app := interactionsApp(t, srv.PublicKey())
	url := app.URL + "/discord/interactions"

	ping := srv.NewPing()
	d, err := srv.PostInteraction(waitCtx(t), url, ping)
	if err != nil {
		t.Fatal(err)
	}
	if d.Status != http.StatusOK || string(bytes.TrimSpace(d.Body)) != `{"type":1}` || !d.Accepted {
		t.Errorf("PING delivery = %+v %s", d, d.Body)
	}

	cmd, err := srv.NewCommandInteraction(discordtest.CommandInteraction{ChannelID: discordtest.DefaultChannelID, UserID: alice})
	if err != nil {
		t.Fatal(err)
	}
	d, err = srv.PostInteraction(waitCtx(t), url, cmd)
	if err != nil {
		t.Fatal(err)
	}
	if !d.Accepted || d.Error != nil {
		t.Errorf("command delivery = %+v %s", d, d.Body)
	}
	msgs := srv.Messages(discordtest.DefaultChannelID)
	if len(msgs) != 1 || msgs[0].Content != "hello over HTTP" || msgs[0].InteractionID != cmd.ID {
		t.Errorf("messages = %+v", msgs)
	}
	if acks := srv.Acks(); len(acks) != 2 || acks[0].Type != discordtest.CallbackPong {
		t.Errorf("acks = %+v", acks)
	}

	// A request signed with another key is refused by the app.
	_, other, _ := discordtest.NewKeyPair()
	forged, _ := discordtest.SignedInteraction(url, other, ping.Payload, time.Now())
	resp, err := http.DefaultClient.Do(forged)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("forged request answered %d", resp.StatusCode)
	}
}
