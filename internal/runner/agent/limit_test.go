package agent

import (
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"
)

// Each CLI's account of a provider's refusal, as captured from the real
// CLIs against the fake model's rate-limit scenario (docs/runners.md,
// "Provider limits"), is recognised with its kind, status and, when the
// CLI printed it, the reset time; the error stays the CLI's message.
func TestLimitSamples(t *testing.T) {
	for _, c := range []struct {
		sample string
		out    Output
		want   Limit
		err    string // the error starts with it
	}{
		// claude-code, CLAUDE_CODE_MAX_RETRIES=1: one api_retry line, then
		// its final error. It prints no reset time.
		{"claude-limit-429.ndjson", Claude{}.Output(""), Limit{Kind: LimitRate, Status: 429},
			"claude-code: API Error: Request rejected (429) · This request would exceed the rate limit"},
		{"claude-limit-529.ndjson", Claude{}.Output(""), Limit{Kind: LimitOverloaded, Status: 529},
			"claude-code: API Error: 529 Overloaded"},
		// Out of credit: a 400 that claude-code calls billing_error.
		{"claude-limit-quota.ndjson", Claude{}.Output(""), Limit{Kind: LimitQuota, Status: 400},
			"claude-code: Credit balance is too low"},
		// opencode prints the provider's headers: retry-after (2 s) wins
		// over x-ratelimit-reset-requests (40s).
		{"opencode-limit-429.ndjson", OpenCode{}.Output(""), Limit{Kind: LimitRate, Status: 429, After: 2 * time.Second},
			"opencode: APIError: Rate limit reached for fake-model"},
		{"opencode-limit-503.ndjson", OpenCode{}.Output(""), Limit{Kind: LimitOverloaded, Status: 503},
			"opencode: APIError: The server is overloaded"},
		{"opencode-limit-quota.ndjson", OpenCode{}.Output(""), Limit{Kind: LimitQuota, Status: 429, After: time.Second},
			"opencode: APIError: You exceeded your current quota"},
		// opencode's own anthropic provider: the Anthropic API's error.
		{"opencode-limit-anthropic.ndjson", OpenCode{}.Output(""), Limit{Kind: LimitRate, Status: 429, After: time.Second},
			"opencode: APIError: This request would exceed the rate limit"},
	} {
		t.Run(c.sample, func(t *testing.T) {
			read(t, c.out, c.sample)
			got := c.out.Result()
			if got.Limit == nil || *got.Limit != c.want {
				t.Errorf("limit %+v, want %+v", got.Limit, c.want)
			}
			if !strings.HasPrefix(got.Error, c.err) {
				t.Errorf("error %q, want it to start with %q", got.Error, c.err)
			}
			if got.Report != nil {
				t.Errorf("report %+v", got.Report)
			}
		})
	}
}

// What is no provider's limit is none: a plain API error, a session that
// ended well, a later error that is no limit.
func TestNoLimit(t *testing.T) {
	for _, sample := range []string{"claude-done.ndjson", "claude-no-report.ndjson", "opencode-done.ndjson", "opencode-no-report.ndjson"} {
		out := Claude{}.Output("")
		if strings.HasPrefix(sample, "opencode") {
			out = OpenCode{}.Output("")
		}
		read(t, out, sample)
		if l := out.Result().Limit; l != nil {
			t.Errorf("%s: limit %+v", sample, l)
		}
	}
	claude := Claude{}.Output("")
	claude.Line([]byte(`{"type":"assistant","message":{"model":"<synthetic>","content":[{"type":"text","text":"API Error: 500 boom"}]},"error":"server_error","is_api_error_message":true,"api_error_status":500,"api_error_type":"api_error"}`), false)
	claude.Line([]byte(`{"type":"result","is_error":true,"terminal_reason":"api_error","api_error_status":500,"api_error_type":"api_error","result":"API Error: 500 boom"}`), false)
	if r := claude.Result(); r.Limit != nil || r.Error == "" {
		t.Errorf("claude-code's 500: limit %+v, error %q", r.Limit, r.Error)
	}
	oc := OpenCode{}.Output("")
	oc.Line([]byte(`{"type":"error","timestamp":1,"error":{"name":"APIError","data":{"message":"Rate limit","statusCode":429}}}`), false)
	oc.Line([]byte(`{"type":"error","timestamp":2,"error":{"name":"UnknownError","data":{"message":"disk full"}}}`), false)
	if r := oc.Result(); r.Limit != nil || !strings.Contains(r.Error, "disk full") {
		t.Errorf("opencode's later error: limit %+v, error %q", r.Limit, r.Error)
	}
}

// Reset reads each API's headers: retry-after first, else the latest reset
// of an exhausted limit.
func TestLimitReset(t *testing.T) {
	now := time.Date(2026, 12, 7, 3, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name string
		h    map[string]string
		want Limit
	}{
		{"none", map[string]string{"content-type": "application/json"}, Limit{}},
		{"retry-after-ms", map[string]string{"retry-after-ms": "1500", "retry-after": "9"}, Limit{After: 1500 * time.Millisecond}},
		{"retry-after seconds", map[string]string{"Retry-After": "30"}, Limit{After: 30 * time.Second}},
		{"retry-after date", map[string]string{"retry-after": now.Add(90 * time.Second).Format(http.TimeFormat)}, Limit{After: 90 * time.Second}},
		{"retry-after date past", map[string]string{"retry-after": now.Add(-time.Minute).Format(http.TimeFormat)}, Limit{}},
		{"retry-after nonsense", map[string]string{"retry-after": "soon"}, Limit{}},
		{"retry-after too far", map[string]string{"retry-after": "999999999"}, Limit{}},
		{"anthropic exhausted", map[string]string{
			"anthropic-ratelimit-requests-remaining": "0", "anthropic-ratelimit-requests-reset": "2026-12-07T03:05:00Z",
			"anthropic-ratelimit-tokens-remaining": "40000", "anthropic-ratelimit-tokens-reset": "2026-12-07T03:09:00Z",
			"anthropic-ratelimit-input-tokens-remaining": "0", "anthropic-ratelimit-input-tokens-reset": "2026-12-07T03:02:00Z",
		}, Limit{At: time.Date(2026, 12, 7, 3, 5, 0, 0, time.UTC)}},
		{"anthropic unified", map[string]string{"anthropic-ratelimit-unified-status": "rejected",
			"anthropic-ratelimit-unified-reset": "1796616000"}, Limit{At: time.Unix(1796616000, 0)}},
		{"anthropic unified allowed", map[string]string{"anthropic-ratelimit-unified-status": "allowed",
			"anthropic-ratelimit-unified-reset": "1796616000"}, Limit{}},
		{"openai", map[string]string{"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "6m0s",
			"x-ratelimit-remaining-tokens": "0", "x-ratelimit-reset-tokens": "20ms"}, Limit{After: 6 * time.Minute}},
		{"openai not exhausted", map[string]string{"x-ratelimit-remaining-requests": "2", "x-ratelimit-reset-requests": "6m0s"}, Limit{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var got Limit
			got.Reset(c.h, now)
			if got != c.want {
				t.Errorf("got %+v, want %+v", got, c.want)
			}
		})
	}
}

func TestLimitRetryAt(t *testing.T) {
	now := time.Date(2026, 12, 7, 3, 0, 0, 500_000_000, time.UTC)
	at := func(s string) *time.Time {
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return &v
	}
	for _, c := range []struct {
		l    Limit
		want *time.Time
	}{
		{Limit{}, nil},
		{Limit{After: 30 * time.Second}, at("2026-12-07T03:00:31Z")}, // rounded up to the second
		{Limit{After: 30 * time.Second, At: now.Add(time.Hour)}, at("2026-12-07T03:00:31Z")},
		{Limit{At: time.Date(2026, 12, 7, 3, 5, 0, 0, time.UTC)}, at("2026-12-07T03:05:00Z")},
		{Limit{At: now.Add(-time.Hour)}, at("2026-12-07T03:00:01Z")}, // past: at once
		{Limit{At: now.Add(8 * 24 * time.Hour)}, nil},                // too far to believe
	} {
		got := c.l.RetryAt(now)
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%+v: %v, want %v", c.l, got, c.want)
		}
	}
}

// Whatever the headers say, Reset does not panic and RetryAt is nil or
// within a week from now, never before it.
func FuzzLimitReset(f *testing.F) {
	f.Add("retry-after", "30", "")
	f.Add("retry-after-ms", "1500.5", "")
	f.Add("retry-after", "Mon, 07 Dec 2026 03:05:00 GMT", "")
	f.Add("anthropic-ratelimit-requests-reset", "2026-12-07T03:05:00Z", "0")
	f.Add("anthropic-ratelimit-unified-reset", "1796616000", "rejected")
	f.Add("x-ratelimit-reset-requests", "6m0s", "0")
	f.Add("x-ratelimit-reset-tokens", "-5s", "")
	now := time.Date(2026, 12, 7, 3, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, name, value, extra string) {
		h := map[string]string{name: value, "anthropic-ratelimit-unified-status": extra,
			"x-ratelimit-remaining-requests": extra, "anthropic-ratelimit-requests-remaining": extra}
		var l Limit
		l.Reset(h, now)
		if l.After < 0 || l.After >= maxLimitWait {
			t.Fatalf("after %v", l.After)
		}
		if at := l.RetryAt(now); at != nil && (at.Before(now) || at.Sub(now) > maxLimitWait+time.Second) {
			t.Fatalf("retry at %v", at)
		}
	})
}

// Whatever line comes, the outputs do not panic, and a limit comes only
// with an error.
func FuzzLimitLines(f *testing.F) {
	for _, s := range []string{"claude-limit-429.ndjson", "claude-limit-quota.ndjson", "opencode-limit-429.ndjson", "opencode-limit-anthropic.ndjson"} {
		for _, l := range sampleLines(f, s) {
			f.Add(string(l))
		}
	}
	f.Fuzz(func(t *testing.T, line string) {
		for _, out := range []Output{Claude{}.Output(""), OpenCode{}.Output("")} {
			out.Line([]byte(line), false)
			if r := out.Result(); r.Limit != nil && r.Error == "" {
				t.Fatalf("%T: a limit without an error: %+v", out, r)
			}
		}
	})
}
