package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/ballet/ballet/internal/realtime"
)

const eventsUsage = `Usage:
  ballet events follow [--server URL] [--token T] (--project KEY | --item KEY-N | --org SLUG) [--after SEQ] [--msgpack]

Prints one JSON line per event as it happens (the event as the log stores it),
reconnecting and resuming from the last seq when the connection drops.
--after N replays every event after seq N first (default: only new events);
an N beyond the log's head is an error that names the head.

Exit status: 0 when interrupted, 1 when the token or the stream is refused,
2 for a usage error.

Environment:
  BALLET_TOKEN  the bearer token (default of --token)
`

func eventsCmd(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && isHelp(args[0]) {
		fmt.Fprint(stdout, eventsUsage)
		return 0
	}
	if len(args) == 0 || args[0] != "follow" {
		fmt.Fprint(stderr, eventsUsage)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return eventsFollow(ctx, args[1:], stdout, stderr)
}

func eventsFollow(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("events follow", stderr)
	srv := fs.String("server", "http://127.0.0.1:8080", "Core's URL")
	token := fs.String("token", "", "bearer token (default $BALLET_TOKEN)") // not the default: help would print it
	project := fs.String("project", "", "project key")
	item := fs.String("item", "", "item key (ACME-42)")
	org := fs.String("org", "", "organization slug")
	after := fs.Int64("after", -1, "replay the events after this seq first (default: only new events)")
	msgp := fs.Bool("msgpack", false, "use MessagePack frames instead of JSON")
	if code, done := parseFlags(fs, args, eventsUsage, stdout); done {
		return code
	}
	if *token == "" {
		*token = os.Getenv("BALLET_TOKEN")
	}
	var stream string
	n := 0
	for kind, v := range map[string]string{"project": *project, "item": *item, "org": *org} {
		if v != "" {
			stream, n = kind+":"+v, n+1
		}
	}
	if n != 1 || fs.NArg() > 0 {
		fmt.Fprint(stderr, "ballet events follow: give exactly one of --project, --item, --org\n\n"+eventsUsage)
		return 2
	}
	if *token == "" {
		fmt.Fprintln(stderr, "ballet events follow: no token: pass --token or set BALLET_TOKEN")
		return 2
	}
	enc := json.NewEncoder(stdout)
	enc.SetEscapeHTML(false)
	last := *after
	backoff := 100 * time.Millisecond
	for {
		err := followOnce(ctx, *srv, *token, stream, &last, *msgp, enc)
		if ctx.Err() != nil {
			return 0
		}
		var he *realtime.HandshakeError
		var re *realtime.Error
		switch {
		case errors.As(err, &he) && (he.Status == 401 || he.Status == 403):
			fmt.Fprintln(stderr, "ballet events follow:", err)
			return 1
		case errors.As(err, &re) && (re.Code == realtime.CodeForbidden || re.Code == realtime.CodeInvalidParams || re.Code == realtime.CodeUnauthorized):
			fmt.Fprintln(stderr, "ballet events follow:", err)
			return 1
		case errors.As(err, &re) && re.Code == realtime.CodeLagged:
			backoff = 100 * time.Millisecond // resume at once
		default:
			fmt.Fprintf(stderr, "ballet events follow: %v; reconnecting after seq %d in %v\n", err, max(last, 0), backoff)
		}
		select {
		case <-ctx.Done():
			return 0
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

// followOnce subscribes once and prints until the subscription ends.
func followOnce(ctx context.Context, srv, token, stream string, last *int64, msgp bool, enc *json.Encoder) error {
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	c, err := realtime.Dial(dctx, srv, token, &realtime.DialOptions{MessagePack: msgp})
	cancel()
	if err != nil {
		return err
	}
	defer c.Close()
	sub, err := c.Subscribe(ctx, stream, *last)
	if err != nil {
		return err
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case e, ok := <-sub.C():
			if !ok {
				if sub.LastSeq() > *last {
					*last = sub.LastSeq()
				}
				if err := sub.Err(); err != nil {
					return err
				}
				return errors.New("subscription ended")
			}
			if err := enc.Encode(e); err != nil {
				return err
			}
			*last = e.Seq
		}
	}
}
