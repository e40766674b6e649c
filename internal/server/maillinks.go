package server

import (
	"context"
	"errors"
	"html/template"
	"log/slog"
	"net/http"

	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/notify"
)

// MailLinks serves the pages the links of Ballet's mail open, without a
// login (the link's signature, or its confirmation token, is the
// credential): one-click unsubscribe (RFC 8058: a POST turns that cause's
// mail off; a GET shows a page with the button) and the confirmation of
// an entered address (a GET shows the button, its POST confirms, so a
// mail scanner fetching links confirms nothing).
type MailLinks struct {
	Keys     *notify.Keys
	Settings *notify.SettingsService
	Log      *slog.Logger
}

// Register installs the pages on mux.
func (h *MailLinks) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET "+notify.UnsubscribePath, h.unsubscribePage)
	mux.HandleFunc("POST "+notify.UnsubscribePath, h.unsubscribe)
	mux.HandleFunc("GET "+notify.ConfirmPath, h.confirmPage)
	mux.HandleFunc("POST "+notify.ConfirmPath, h.confirm)
}

var linkPage = template.Must(template.New("page").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Ballet · {{.Title}}</title></head>
<body style="font-family: sans-serif; max-width: 36em; margin: 3em auto; line-height: 1.4">
<h1>{{.Title}}</h1>
<p>{{.Text}}</p>
{{if .Button}}<form method="post" action="{{.Action}}"><button type="submit">{{.Button}}</button></form>{{end}}
</body></html>
`))

type linkPageData struct {
	Title, Text, Button, Action string
}

func (h *MailLinks) write(w http.ResponseWriter, status int, p linkPageData) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Referrer-Policy", "no-referrer") // the token is in the URL
	w.WriteHeader(status)
	if err := linkPage.Execute(w, p); err != nil {
		h.Log.Warn("write mail link page", "err", err)
	}
}

func (h *MailLinks) fail(w http.ResponseWriter, err error) {
	switch apperr.Code(err) {
	case apperr.NotFound:
		h.write(w, http.StatusNotFound, linkPageData{Title: "Link not valid", Text: message(err)})
	case apperr.Invalid:
		h.write(w, http.StatusBadRequest, linkPageData{Title: "Link not valid", Text: message(err)})
	default:
		h.Log.Error("mail link", "err", err)
		h.write(w, http.StatusInternalServerError, linkPageData{Title: "Something went wrong", Text: "Try again in a moment."})
	}
}

func (h *MailLinks) check(ctx context.Context, r *http.Request) (subject, cause string, err error) {
	return h.Keys.CheckUnsubscribe(ctx, r.URL.Query().Get("t"))
}

func (h *MailLinks) unsubscribePage(w http.ResponseWriter, r *http.Request) {
	_, cause, err := h.check(r.Context(), r)
	if err != nil {
		h.fail(w, err)
		return
	}
	if cause == notify.UnsubscribeDigest {
		h.write(w, http.StatusOK, linkPageData{Title: "Stop the digest", Text: "Stop mailing you Ballet's digest? " +
			"Your notifications still reach you as you chose.", Button: "Stop the digest", Action: r.URL.RequestURI()})
		return
	}
	h.write(w, http.StatusOK, linkPageData{Title: "Stop these mails", Text: "Stop mailing you about " + cause +
		"? You will still see them in Ballet's notifications.", Button: "Stop mailing me " + cause, Action: r.URL.RequestURI()})
}

func (h *MailLinks) unsubscribe(w http.ResponseWriter, r *http.Request) {
	subject, cause, err := h.check(r.Context(), r)
	if err == nil {
		err = h.Settings.TurnMailOff(r.Context(), subject, cause)
	}
	if err != nil {
		h.fail(w, err)
		return
	}
	if cause == notify.UnsubscribeDigest {
		h.write(w, http.StatusOK, linkPageData{Title: "Done", Text: "Ballet no longer mails you its digest. " +
			"You can turn it back on in your notification settings."})
		return
	}
	h.write(w, http.StatusOK, linkPageData{Title: "Done", Text: "Ballet no longer mails you about " + cause +
		". You can turn it back on in your notification settings."})
}

func (h *MailLinks) confirmPage(w http.ResponseWriter, r *http.Request) {
	if r.URL.Query().Get("t") == "" {
		h.fail(w, apperr.New(apperr.NotFound, "this confirmation link is not valid"))
		return
	}
	h.write(w, http.StatusOK, linkPageData{Title: "Confirm your address", Text: "Let Ballet send your notifications to this address?",
		Button: "Confirm", Action: r.URL.RequestURI()})
}

func (h *MailLinks) confirm(w http.ResponseWriter, r *http.Request) {
	if err := h.Settings.Confirm(r.Context(), r.URL.Query().Get("t")); err != nil {
		h.fail(w, err)
		return
	}
	h.write(w, http.StatusOK, linkPageData{Title: "Address confirmed", Text: "Ballet will mail your notifications here."})
}

// message is an apperr's message.
func message(err error) string {
	var e *apperr.Error
	if errors.As(err, &e) {
		return e.Message
	}
	return err.Error()
}
