package notify

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"maps"
	"net/mail"
	"slices"
	"strings"
	"time"

	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/job"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/strictjson"
	"github.com/ballet/ballet/internal/transition"
)

// Channel choices of a cause: mailed at once (and in the inbox), in the
// inbox only (and the digest), or not at all.
const (
	ChoiceMail  = "mail"
	ChoiceInbox = "inbox"
	ChoiceOff   = "off"
)

// Digest choices: every [digest] period, weekly, or none.
const (
	DigestPeriod = "period"
	DigestWeekly = "weekly"
	DigestOff    = "off"
)

// Where a person's address came from.
const (
	SourceOIDC    = "oidc"    // the identity provider's email claim, verified by it
	SourceEntered = "entered" // entered by the person; mailed only once confirmed
)

// Bounds of the settings.
const (
	MaxEmail = 254 // RFC 5321's longest path
	MaxZone  = 64
	// ConfirmFor is how long a confirmation link works.
	ConfirmFor = 24 * time.Hour
)

// SettingCauses are the causes a person chooses mail, inbox or off for:
// every cause, and a webhook disabled.
var SettingCauses = append(slices.Clone(Causes), CauseWebhookDisabled)

// DefaultChoice is a cause's choice for a person who made none: every
// cause mails at once, except a ticket done, which waits for the digest.
func DefaultChoice(cause string) string {
	if cause == CauseTicketDone {
		return ChoiceInbox
	}
	return ChoiceMail
}

// Settings are a person's notification choices, as they (and platform
// admins) read them.
type Settings struct {
	// Email is the address mail goes to (null: none known).
	Email *string `json:"email"`
	// EmailSource is where it came from: oidc (a verified claim of the
	// identity provider) or entered (null: no address).
	EmailSource *string `json:"email_source"`
	// EmailConfirmed: mail goes to an address only once confirmed (an oidc
	// address is).
	EmailConfirmed bool `json:"email_confirmed"`
	// Causes holds every cause's choice: mail, inbox or off.
	Causes map[string]string `json:"causes"`
	// Digest is period, weekly or off.
	Digest string `json:"digest"`
	// DigestHour is the hour of day (0–23, in TimeZone) a 24-hour digest
	// is sent at (null: none chosen).
	DigestHour *int `json:"digest_hour"`
	// TimeZone is an IANA time zone name (UTC by default).
	TimeZone string `json:"time_zone"`
	// Version counts the changes (0: the defaults, never changed).
	Version int64 `json:"version"`

	subject        string
	causesSet      map[string]string // only the choices made
	confirmHash    string
	confirmExpires time.Time
}

// SettingsUpdate is a change of a person's settings (PUT
// /api/v1/me/notifications): a field left out is unchanged.
type SettingsUpdate struct {
	// Email sets the address (null or "": none). A new address is
	// unconfirmed until its confirmation link, mailed to it, is opened.
	Email strictjson.Nullable[string] `json:"email,omitzero"`
	// Causes sets the choices of the causes it names (mail, inbox or off).
	Causes map[string]string `json:"causes,omitempty"`
	// Digest is period, weekly or off.
	Digest *string `json:"digest,omitempty"`
	// DigestHour is 0–23, or null for none.
	DigestHour strictjson.Nullable[int] `json:"digest_hour,omitzero"`
	// TimeZone is an IANA name such as Europe/Paris.
	TimeZone *string `json:"time_zone,omitempty"`
}

// Choice is person's choice for cause.
func (s Settings) Choice(cause string) string {
	if c, ok := s.causesSet[cause]; ok {
		return c
	}
	return DefaultChoice(cause)
}

// MailTo is the address mail of cause goes to ("": none, the person does
// not want it mailed or has no confirmed address).
func (s Settings) MailTo(cause string) string {
	if s.Email == nil || !s.EmailConfirmed || s.Choice(cause) != ChoiceMail {
		return ""
	}
	return *s.Email
}

// Events of the settings.
func (SettingsChanged) EventType() string  { return "notification.settings_changed" }
func (AddressConfirmed) EventType() string { return "notification.address_confirmed" }

// SettingsChanged is the payload of notification.settings_changed: a
// person changed their choices (or a one-click unsubscribe did). The
// address itself is never in an event: only whether it changed.
type SettingsChanged struct {
	Subject      string            `json:"subject"`
	Causes       map[string]string `json:"causes,omitempty"` // the choices changed
	Digest       string            `json:"digest,omitempty"`
	EmailChanged bool              `json:"email_changed,omitempty"`
	EmailSource  string            `json:"email_source,omitempty"`
	Via          string            `json:"via"` // api, unsubscribe or sign-in
}

// AddressConfirmed is the payload of notification.address_confirmed: a
// person opened the confirmation link of the address they entered.
type AddressConfirmed struct {
	Subject string `json:"subject"`
}

const settingsColumns = `subject, email, email_source, email_confirmed_at, confirm_hash, confirm_expires_at, causes, digest,
digest_hour, time_zone, version`

// ReadSettings returns subject's settings (the defaults when they never
// chose anything).
func ReadSettings(ctx context.Context, s store.Store, subject string) (Settings, error) {
	rows, err := s.Query(ctx, `SELECT `+settingsColumns+` FROM notification_settings WHERE subject = ?`, subject)
	if err != nil {
		return Settings{}, fmt.Errorf("read notification settings: %w", err)
	}
	if rows.Len() == 0 {
		return defaults(subject), nil
	}
	return scanSettings(rows, 0)
}

func defaults(subject string) Settings {
	return Settings{subject: subject, Digest: DigestPeriod, TimeZone: "UTC", Causes: allChoices(nil), causesSet: map[string]string{}}
}

func scanSettings(rows *store.Rows, i int) (Settings, error) {
	var x Settings
	var email, source, hash sql.NullString
	var confirmed, expires, hour sql.NullInt64
	var causes string
	if err := rows.Scan(i, &x.subject, &email, &source, &confirmed, &hash, &expires, &causes, &x.Digest, &hour, &x.TimeZone,
		&x.Version); err != nil {
		return Settings{}, fmt.Errorf("scan notification settings: %w", err)
	}
	if email.Valid {
		x.Email = &email.String
	}
	if source.Valid {
		x.EmailSource = &source.String
	}
	x.EmailConfirmed = email.Valid && confirmed.Valid
	x.confirmHash = hash.String
	if expires.Valid {
		x.confirmExpires = store.Time(expires.Int64)
	}
	if hour.Valid {
		h := int(hour.Int64)
		x.DigestHour = &h
	}
	x.causesSet = map[string]string{}
	if err := json.Unmarshal([]byte(causes), &x.causesSet); err != nil {
		return Settings{}, fmt.Errorf("notification settings of %s: causes: %w", x.subject, err)
	}
	x.Causes = allChoices(x.causesSet)
	return x, nil
}

// allChoices is every cause's choice: set's, else the default.
func allChoices(set map[string]string) map[string]string {
	out := make(map[string]string, len(SettingCauses))
	for _, c := range SettingCauses {
		out[c] = DefaultChoice(c)
		if v, ok := set[c]; ok {
			out[c] = v
		}
	}
	return out
}

// CheckUpdate checks u's values; the error is a 400 naming the field.
func CheckUpdate(u SettingsUpdate) error {
	if u.Email.Set && u.Email.Value != nil && *u.Email.Value != "" {
		if _, err := CleanAddress(*u.Email.Value); err != nil {
			return apperr.New(apperr.Invalid, "email: %v", err)
		}
	}
	for _, c := range slices.Sorted(maps.Keys(u.Causes)) {
		if !slices.Contains(SettingCauses, c) {
			return apperr.New(apperr.Invalid, "causes.%s: not a cause (one of %s)", c, strings.Join(SettingCauses, ", "))
		}
		switch u.Causes[c] {
		case ChoiceMail, ChoiceInbox, ChoiceOff:
		default:
			return apperr.New(apperr.Invalid, "causes.%s: %q is not mail, inbox or off", c, u.Causes[c])
		}
	}
	if u.Digest != nil {
		switch *u.Digest {
		case DigestPeriod, DigestWeekly, DigestOff:
		default:
			return apperr.New(apperr.Invalid, "digest: %q is not period, weekly or off", *u.Digest)
		}
	}
	if u.DigestHour.Value != nil && (*u.DigestHour.Value < 0 || *u.DigestHour.Value > 23) {
		return apperr.New(apperr.Invalid, "digest_hour: %d is not an hour of day (0–23)", *u.DigestHour.Value)
	}
	if u.TimeZone != nil {
		if len(*u.TimeZone) > MaxZone || *u.TimeZone == "" || strings.ContainsAny(*u.TimeZone, " \t\n") {
			return apperr.New(apperr.Invalid, "time_zone: %q is not an IANA time zone such as Europe/Paris", *u.TimeZone)
		}
		if _, err := time.LoadLocation(*u.TimeZone); err != nil || strings.EqualFold(*u.TimeZone, "local") {
			return apperr.New(apperr.Invalid, "time_zone: %q is not an IANA time zone such as Europe/Paris", *u.TimeZone)
		}
	}
	return nil
}

// CleanAddress checks a bare address (name@domain, no display name) and
// returns it trimmed.
func CleanAddress(s string) (string, error) {
	s = strings.TrimSpace(s)
	if len(s) > MaxEmail {
		return "", fmt.Errorf("has more than %d characters", MaxEmail)
	}
	a, err := mail.ParseAddress(s)
	if err != nil || a.Name != "" || a.Address != s || !strings.Contains(s[strings.LastIndexByte(s, '@')+1:], ".") {
		return "", fmt.Errorf("%q is not an address such as ada@example.com", s)
	}
	return s, nil
}

// settingsWrite is the upsert of x as it becomes (x.Version is the version
// read: 0 when no row exists), guarded by that version.
func settingsWrite(x Settings, now time.Time) (store.Statement, error) {
	causes, err := json.Marshal(x.causesSet)
	if err != nil {
		return store.Statement{}, err
	}
	var email, source, hash, confirmed, expires, hour any
	if x.Email != nil {
		email = *x.Email
	}
	if x.EmailSource != nil {
		source = *x.EmailSource
	}
	if x.EmailConfirmed {
		confirmed = now.UnixMilli()
	}
	if x.confirmHash != "" {
		hash, expires = x.confirmHash, x.confirmExpires.UnixMilli()
	}
	if x.DigestHour != nil {
		hour = *x.DigestHour
	}
	args := []any{x.subject, email, source, confirmed, hash, expires, string(causes), x.Digest, hour, x.TimeZone, now.UnixMilli()}
	if x.Version == 0 {
		return store.Stmt(`INSERT INTO notification_settings (subject, email, email_source, email_confirmed_at, confirm_hash,
confirm_expires_at, causes, digest, digest_hour, time_zone, updated_at, version) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1)
ON CONFLICT DO NOTHING`, args...), nil
	}
	// email_confirmed_at keeps its first time while the address stays confirmed.
	return store.Stmt(`UPDATE notification_settings SET email = ?, email_source = ?,
email_confirmed_at = CASE WHEN ? IS NULL THEN NULL ELSE COALESCE(email_confirmed_at, ?) END, confirm_hash = ?,
confirm_expires_at = ?, causes = ?, digest = ?, digest_hour = ?, time_zone = ?, updated_at = ?, version = version + 1
WHERE subject = ? AND version = ?`, email, source, confirmed, confirmed, hash, expires, string(causes), x.Digest, hour, x.TimeZone,
		now.UnixMilli(), x.subject, x.Version), nil
}

// SettingsService changes people's notification settings.
type SettingsService struct {
	Store   store.Store
	Applier *transition.Applier
	Clock   interface{ Now() time.Time }
	Keys    *Keys
	// MailOn tells whether mail is configured: without it, an entered
	// address cannot be confirmed, and entering one is refused.
	MailOn bool
}

// Update applies u to subject's settings (checked with CheckUpdate first)
// and returns them as they became. A new entered address gets its
// confirmation mail (a durable job notify.confirm in the same batch).
func (s *SettingsService) Update(ctx context.Context, actor event.Actor, subject string, u SettingsUpdate) (Settings, error) {
	if err := CheckUpdate(u); err != nil {
		return Settings{}, err
	}
	if u.Email.Set && s.MailOn {
		// The link key exists before the change is decided (making it is
		// a write of its own, not part of this one).
		if _, err := s.Keys.secret(ctx); err != nil {
			return Settings{}, err
		}
	}
	var out Settings
	_, err := s.Applier.Do(ctx, func(ctx context.Context) (*transition.Transition, error) {
		cur, err := ReadSettings(ctx, s.Store, subject)
		if err != nil {
			return nil, err
		}
		now := s.Clock.Now().Truncate(time.Millisecond)
		next, changed := cur, SettingsChanged{Subject: subject, Via: "api"}
		next.causesSet = maps.Clone(cur.causesSet)
		for c, v := range u.Causes {
			if cur.Choice(c) != v {
				if changed.Causes == nil {
					changed.Causes = map[string]string{}
				}
				changed.Causes[c] = v
			}
			next.causesSet[c] = v
		}
		if u.Digest != nil {
			next.Digest = *u.Digest
			if *u.Digest != cur.Digest {
				changed.Digest = *u.Digest
			}
		}
		if u.DigestHour.Set {
			next.DigestHour = u.DigestHour.Value
		}
		if u.TimeZone != nil {
			next.TimeZone = *u.TimeZone
		}
		var jobs []job.Spec
		if u.Email.Set {
			addr := ""
			if u.Email.Value != nil {
				addr, _ = CleanAddress(*u.Email.Value) // checked
			}
			switch {
			case addr == "":
				next.Email, next.EmailSource, next.EmailConfirmed, next.confirmHash = nil, nil, false, ""
			case cur.Email != nil && strings.EqualFold(*cur.Email, addr) && cur.EmailConfirmed:
				// the same confirmed address: unchanged
			default: // a new address, or the same one still unconfirmed: a (new) confirmation link
				if !s.MailOn {
					return nil, apperr.New(apperr.Invalid, "email: mail is not configured on this Ballet ([notify.email] smtp_url), so an address cannot be confirmed")
				}
				src := SourceEntered
				next.Email, next.EmailSource, next.EmailConfirmed = &addr, &src, false
				token, err := s.Keys.ConfirmToken(ctx, subject, addr, cur.Version+1)
				if err != nil {
					return nil, err
				}
				next.confirmHash, next.confirmExpires = hashToken(token), now.Add(ConfirmFor)
				jobs = append(jobs, job.New(ConfirmArgs{Subject: subject, Version: cur.Version + 1}))
			}
			changed.EmailChanged = cur.Email == nil || next.Email == nil || *cur.Email != *next.Email || next.EmailConfirmed != cur.EmailConfirmed
			if next.EmailSource != nil {
				changed.EmailSource = *next.EmailSource
			}
		}
		stmt, err := settingsWrite(next, now)
		if err != nil {
			return nil, err
		}
		next.Version = cur.Version + 1
		next.Causes = allChoices(next.causesSet)
		out = next
		return &transition.Transition{Events: []event.Event{event.Of(actor, "", "", subject, changed)},
			Guarded: []store.Statement{stmt}, Jobs: jobs}, nil
	})
	return out, err
}

// RecordVerifiedEmail keeps the address an identity provider vouched for
// (a verified email claim at sign-in) as subject's, confirmed. Nothing is
// written when it is already theirs.
func (s *SettingsService) RecordVerifiedEmail(ctx context.Context, subject, email string) error {
	addr, err := CleanAddress(email)
	if err != nil {
		return nil // an address Ballet cannot mail is not kept
	}
	_, err = s.Applier.Do(ctx, func(ctx context.Context) (*transition.Transition, error) {
		cur, err := ReadSettings(ctx, s.Store, subject)
		if err != nil {
			return nil, err
		}
		if cur.Email != nil && *cur.Email == addr && cur.EmailConfirmed {
			return nil, nil
		}
		now := s.Clock.Now().Truncate(time.Millisecond)
		src := SourceOIDC
		next := cur
		next.Email, next.EmailSource, next.EmailConfirmed, next.confirmHash = &addr, &src, true, ""
		stmt, err := settingsWrite(next, now)
		if err != nil {
			return nil, err
		}
		return &transition.Transition{Events: []event.Event{event.Of(Actor, "", "", subject,
			SettingsChanged{Subject: subject, EmailChanged: true, EmailSource: SourceOIDC, Via: "sign-in"})},
			Guarded: []store.Statement{stmt}}, nil
	})
	return err
}

// TurnMailOff sets subject's choice for cause to inbox (a one-click
// unsubscribe), or, for UnsubscribeDigest, their digest to off: nothing is
// written when it is off already.
func (s *SettingsService) TurnMailOff(ctx context.Context, subject, cause string) error {
	_, err := s.Applier.Do(ctx, func(ctx context.Context) (*transition.Transition, error) {
		cur, err := ReadSettings(ctx, s.Store, subject)
		if err != nil {
			return nil, err
		}
		next, changed := cur, SettingsChanged{Subject: subject, Via: "unsubscribe"}
		switch {
		case cause == UnsubscribeDigest:
			if cur.Digest == DigestOff {
				return nil, nil
			}
			next.Digest, changed.Digest = DigestOff, DigestOff
		case cur.Choice(cause) != ChoiceMail:
			return nil, nil
		default:
			next.causesSet = maps.Clone(cur.causesSet)
			next.causesSet[cause] = ChoiceInbox
			changed.Causes = map[string]string{cause: ChoiceInbox}
		}
		stmt, err := settingsWrite(next, s.Clock.Now().Truncate(time.Millisecond))
		if err != nil {
			return nil, err
		}
		return &transition.Transition{Events: []event.Event{event.Of(Actor, "", "", subject, changed)},
			Guarded: []store.Statement{stmt}}, nil
	})
	return err
}

// Confirm confirms the address whose link holds token: once, before it
// expires.
func (s *SettingsService) Confirm(ctx context.Context, token string) error {
	h := hashToken(token)
	_, err := s.Applier.Do(ctx, func(ctx context.Context) (*transition.Transition, error) {
		rows, err := s.Store.Query(ctx, `SELECT `+settingsColumns+` FROM notification_settings WHERE confirm_hash = ?`, h)
		if err != nil {
			return nil, fmt.Errorf("read notification settings: %w", err)
		}
		if rows.Len() == 0 {
			return nil, apperr.New(apperr.NotFound, "this confirmation link is not valid (used already, or replaced by a newer one)")
		}
		cur, err := scanSettings(rows, 0)
		if err != nil {
			return nil, err
		}
		now := s.Clock.Now().Truncate(time.Millisecond)
		if now.After(cur.confirmExpires) {
			return nil, apperr.New(apperr.Invalid, "this confirmation link expired: enter the address again to get a new one")
		}
		next := cur
		next.EmailConfirmed, next.confirmHash = true, ""
		stmt, err := settingsWrite(next, now)
		if err != nil {
			return nil, err
		}
		return &transition.Transition{Events: []event.Event{event.Of(Actor, "", "", cur.subject, AddressConfirmed{Subject: cur.subject})},
			Guarded: []store.Statement{stmt}}, nil
	})
	return err
}
