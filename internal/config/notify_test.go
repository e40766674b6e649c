package config

import (
	"strings"
	"testing"
)

// Mail's keys: each bad value names its key; mail is off while smtp_url
// is empty.
func TestNotifyErrorsNameTheKey(t *testing.T) {
	const on = "[notify]\nbase_url = \"https://ballet.example.com\"\n[notify.email]\nfrom = \"ballet@example.com\"\n"
	cases := []struct{ toml, want string }{
		{on + "smtp_url = \"http://mail.example.com\"\n", `notify.email.smtp_url: "http://mail.example.com": the scheme must be smtp`},
		{on + "smtp_url = \"smtp://u:secret@mail.example.com\"\n", "notify.email.smtp_url: "},
		{on + "smtp_url = \"smtp://mail.example.com:0\"\n", "notify.email.smtp_url: "},
		{on + "smtp_url = \"smtp://mail.example.com/x\"\n", "notify.email.smtp_url: "},
		{on + "smtp_url = \"smtp://mail.example.com\"\nusername = \"u\"\n", "notify.email.password_ref: username and password_ref go together"},
		{on + "smtp_url = \"smtp://mail.example.com\"\nusername = \"u\"\npassword_ref = \"hunter2\"\n", "notify.email.password_ref: "},
		{on + "smtp_url = \"smtp://mail.example.com\"\ntimeout = \"0s\"\n", "notify.email.timeout: must be a positive duration"},
		{"[notify.email]\nsmtp_url = \"smtp://mail.example.com\"\nfrom = \"ballet@example.com\"\n", "notify.base_url: must be set when notify.email.smtp_url is"},
		{"[notify]\nbase_url = \"https://b.example\"\n[notify.email]\nsmtp_url = \"smtp://mail.example.com\"\n", "notify.email.from: must be set"},
		{"[notify]\nbase_url = \"https://b.example\"\n[notify.email]\nsmtp_url = \"smtp://m.example\"\nfrom = \"not an address\"\n", "notify.email.from: "},
		{"[notify]\nbase_url = \"ballet.example.com\"\n", `notify.base_url: "ballet.example.com" is not an absolute http(s) URL`},
		{"[notify.email]\nsmtp = \"x\"\n", "unknown key notify.email.smtp"},
	}
	for _, c := range cases {
		_, err := Parse(c.toml, "test.toml")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: got %v, want an error containing %q", c.toml, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "secret@") {
			t.Errorf("%q: the error shows the URL's password: %v", c.toml, err)
		}
	}
	for _, ok := range []string{"", on + "smtp_url = \"smtps://mail.example.com:465\"\nusername = \"u\"\npassword_ref = \"env:SMTP_PASSWORD\"\n"} {
		c, err := Parse(ok, "test.toml")
		if err != nil {
			t.Errorf("%q: %v", ok, err)
		}
		if c.Notify.MailOn() != (ok != "") {
			t.Errorf("%q: MailOn %v", ok, c.Notify.MailOn())
		}
	}
}
