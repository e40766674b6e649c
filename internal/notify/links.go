package notify

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"

	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/transition"
)

// LinkKeyName is the key mail links are signed with (notify_keys).
const LinkKeyName = "mail-links"

// KeyCreated is the payload of notification.key_created: Ballet made the
// key its mail links are signed with (once per installation). The key is
// never in an event.
type KeyCreated struct {
	Name string `json:"name"`
}

func (KeyCreated) EventType() string { return "notification.key_created" }

// Keys signs and checks the links of Ballet's mail (one-click unsubscribe,
// address confirmation) with a key kept in the database (notify_keys):
// made on first use by whichever Core instance needs it first, the same
// for every instance, never in the configuration, an event or a log.
type Keys struct {
	Store   store.Store
	Applier *transition.Applier
	Clock   clock.Clock

	mu  sync.Mutex
	key []byte
}

// secret returns the link key, making it when there is none yet.
func (k *Keys) secret(ctx context.Context) ([]byte, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.key != nil {
		return k.key, nil
	}
	for range 3 {
		rows, err := k.Store.Query(ctx, `SELECT secret FROM notify_keys WHERE name = ?`, LinkKeyName)
		if err != nil {
			return nil, fmt.Errorf("read the mail link key: %w", err)
		}
		if rows.Len() == 1 {
			var hexKey string
			if err := rows.Scan(0, &hexKey); err != nil {
				return nil, err
			}
			if k.key, err = hex.DecodeString(hexKey); err != nil {
				return nil, fmt.Errorf("the mail link key: %w", err)
			}
			return k.key, nil
		}
		b := make([]byte, 32)
		rand.Read(b) // never fails (crypto/rand, Go 1.24+)
		// Guarded: of two instances making it at once, one wins; the other
		// reads the winner's.
		err = k.Applier.Apply(ctx, &transition.Transition{Events: []event.Event{event.Of(Actor, "", "", LinkKeyName, KeyCreated{Name: LinkKeyName})},
			Guarded: []store.Statement{store.Stmt(`INSERT INTO notify_keys (name, secret, created_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING`,
				LinkKeyName, hex.EncodeToString(b), k.Clock.Now().UnixMilli())}})
		if err != nil && !errors.Is(err, store.ErrLostRace) {
			return nil, fmt.Errorf("make the mail link key: %w", err)
		}
	}
	return nil, errors.New("make the mail link key: lost every race")
}

func (k *Keys) mac(ctx context.Context, parts ...string) ([]byte, error) {
	key, err := k.secret(ctx)
	if err != nil {
		return nil, err
	}
	h := hmac.New(sha256.New, key)
	h.Write([]byte(strings.Join(parts, "\x00")))
	return h.Sum(nil), nil
}

var b64 = base64.RawURLEncoding

// UnsubscribeDigest is what a digest's unsubscribe link turns off: the
// person's digest (it takes a cause's place in the token).
const UnsubscribeDigest = "digest"

// UnsubscribeLink is the absolute one-click unsubscribe link (under base,
// Core's public URL) of subject's mail of cause, or of their digest
// (UnsubscribeDigest).
func (k *Keys) UnsubscribeLink(ctx context.Context, base, subject, cause string) (string, error) {
	tok, err := k.UnsubscribeToken(ctx, subject, cause)
	if err != nil {
		return "", err
	}
	return strings.TrimRight(base, "/") + UnsubscribePath + "?t=" + url.QueryEscape(tok), nil
}

// UnsubscribeToken is the token of subject's one-click unsubscribe link
// for cause (or UnsubscribeDigest): subject and cause, signed. It does not expire (a mail's link
// keeps working); it can do nothing but turn that cause's mail off.
func (k *Keys) UnsubscribeToken(ctx context.Context, subject, cause string) (string, error) {
	sig, err := k.mac(ctx, "unsubscribe", subject, cause)
	if err != nil {
		return "", err
	}
	return b64.EncodeToString([]byte(subject)) + "~" + cause + "~" + b64.EncodeToString(sig), nil
}

// CheckUnsubscribe checks an unsubscribe token and returns whose it is
// and for which cause (or UnsubscribeDigest).
func (k *Keys) CheckUnsubscribe(ctx context.Context, token string) (subject, cause string, err error) {
	parts := strings.Split(token, "~") // causes hold dots; base64url holds no ~
	bad := apperr.New(apperr.NotFound, "this unsubscribe link is not valid")
	if len(parts) != 3 || len(token) > 1024 {
		return "", "", bad
	}
	sub, err1 := b64.DecodeString(parts[0])
	sig, err2 := b64.DecodeString(parts[2])
	if err1 != nil || err2 != nil || !(isCause(parts[1]) || parts[1] == UnsubscribeDigest) {
		return "", "", bad
	}
	want, err := k.mac(ctx, "unsubscribe", string(sub), parts[1])
	if err != nil {
		return "", "", err
	}
	if !hmac.Equal(sig, want) {
		return "", "", bad
	}
	return string(sub), parts[1], nil
}

// ConfirmToken is the token of the confirmation link of subject's address
// addr entered at settings version: derived, not stored (its SHA-256 is,
// in confirm_hash), so the job that mails it holds no secret.
func (k *Keys) ConfirmToken(ctx context.Context, subject, addr string, version int64) (string, error) {
	sig, err := k.mac(ctx, "confirm", subject, addr, strconv.FormatInt(version, 10))
	if err != nil {
		return "", err
	}
	return b64.EncodeToString(sig), nil
}

// hashToken is what is stored of a confirmation token.
func hashToken(token string) string {
	h := sha256.Sum256([]byte(token))
	return hex.EncodeToString(h[:])
}

func isCause(c string) bool {
	for _, x := range SettingCauses {
		if x == c {
			return true
		}
	}
	return false
}
