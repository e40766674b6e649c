package realtime_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/coder/websocket"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/ballet/ballet/internal/feed"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

func rawDial(t *testing.T, url string) *websocket.Conn {
	t.Helper()
	h := http.Header{"Authorization": {"Bearer " + bootstrap}}
	ws, _, err := websocket.Dial(context.Background(), strings.Replace(url, "http", "ws", 1)+"/api/v1/realtime", &websocket.DialOptions{HTTPHeader: h})
	if err != nil {
		t.Fatal(err)
	}
	ws.SetReadLimit(1 << 20)
	t.Cleanup(func() { ws.CloseNow() })
	return ws
}

type rpcAnswer struct {
	ID     any `json:"id" msgpack:"id"`
	Result any `json:"result" msgpack:"result"`
	Error  *struct {
		Code    int    `json:"code" msgpack:"code"`
		Message string `json:"message" msgpack:"message"`
	} `json:"error" msgpack:"error"`
}

func exchange(t *testing.T, ws *websocket.Conn, typ websocket.MessageType, frame []byte) rpcAnswer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	if err := ws.Write(ctx, typ, frame); err != nil {
		t.Fatal(err)
	}
	rt, b, err := ws.Read(ctx)
	if err != nil {
		t.Fatalf("read after %.60q: %v", frame, err)
	}
	var a rpcAnswer
	if rt == websocket.MessageBinary {
		err = msgpack.Unmarshal(b, &a)
	} else {
		err = json.Unmarshal(b, &a)
	}
	if err != nil {
		t.Fatalf("decode %q: %v", b, err)
	}
	return a
}

func wantCode(t *testing.T, a rpcAnswer, code int, frame string) {
	t.Helper()
	if code == 0 {
		if a.Error != nil {
			t.Fatalf("%.80s: error %+v", frame, *a.Error)
		}
		return
	}
	if a.Error == nil || a.Error.Code != code {
		t.Fatalf("%.80s: got %+v, want code %d", frame, a, code)
	}
}

// Malformed and oversized frames get JSON-RPC errors; the connection stays
// usable; the server never crashes.
func TestMalformedFramesJSON(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		e := newEnv(t, s, feed.Config{})
		e.org("acme")
		e.project("acme", "ACME")
		ws := rawDial(t, e.URL)
		ping := `{"jsonrpc":"2.0","id":7,"method":"ping"}`
		cases := []struct {
			frame string
			code  int
		}{
			{ping, 0},
			{`{not json`, -32700},
			{`{"jsonrpc":"2.0","id":1,"method":"ping"} trailing`, -32700},
			{`[]`, -32600},
			{`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, -32600},
			{`"a string"`, -32600},
			{`{"id":1,"method":"ping"}`, -32600},
			{`{"jsonrpc":"1.0","id":1,"method":"ping"}`, -32600},
			{`{"jsonrpc":"2.0","id":{"x":1},"method":"ping"}`, -32600},
			{`{"jsonrpc":"2.0","id":1,"method":42}`, -32600},
			{`{"jsonrpc":"2.0","id":1}`, -32600},
			{`{"jsonrpc":"2.0","id":1,"method":"nope"}`, -32601},
			{`{"jsonrpc":"2.0","id":1,"method":"subscribe"}`, -32602},
			{`{"jsonrpc":"2.0","id":1,"method":"subscribe","params":{"stream":"project:ACME","extra":1}}`, -32602},
			{`{"jsonrpc":"2.0","id":1,"method":"subscribe","params":{"stream":"project:ACME","after_seq":-1}}`, -32602},
			{`{"jsonrpc":"2.0","id":1,"method":"subscribe","params":{"stream":"project:ACME","after_seq":"x"}}`, -32602},
			{`{"jsonrpc":"2.0","id":1,"method":"subscribe","params":[1]}`, -32602},
			{`{"jsonrpc":"2.0","id":1,"method":"subscribe","params":{"stream":"bogus"}}`, -32602},
			{`{"jsonrpc":"2.0","id":1,"method":"subscribe","params":{"stream":"project:NOPE"}}`, -32003},
			{`{"jsonrpc":"2.0","id":1,"method":"unsubscribe","params":{"subscription":"s99"}}`, -32602},
			{`{"jsonrpc":"2.0","id":"x","method":"subscribe","params":{"stream":"project:ACME"}}`, 0},
			{`{"jsonrpc":"2.0","id":"x","method":"unsubscribe","params":{"subscription":"s1"}}`, 0},
			{`{"jsonrpc":"2.0","id":1,"method":"ping","pad":"` + strings.Repeat("x", 100<<10) + `"}`, -32600}, // > 64 KiB
			{ping, 0},
		}
		for _, c := range cases {
			wantCode(t, exchange(t, ws, websocket.MessageText, []byte(c.frame)), c.code, c.frame)
		}
		// A binary frame on a JSON connection.
		b, _ := msgpack.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "ping"})
		wantCode(t, exchange(t, ws, websocket.MessageBinary, b), -32600, "binary on JSON")
		// A notification gets no answer: the next answer is the ping's.
		if err := ws.Write(context.Background(), websocket.MessageText, []byte(`{"jsonrpc":"2.0","method":"ping"}`)); err != nil {
			t.Fatal(err)
		}
		if a := exchange(t, ws, websocket.MessageText, []byte(`{"jsonrpc":"2.0","id":99,"method":"ping"}`)); a.ID != float64(99) {
			t.Fatalf("answer %+v, want the ping 99's (a notification gets none)", a)
		}
		// Over the hard limit: the library closes the connection (1009); the
		// server keeps serving.
		ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
		defer cancel()
		_ = ws.Write(ctx, websocket.MessageText, bytes.Repeat([]byte("x"), 2<<20))
		if _, _, err := ws.Read(ctx); websocket.CloseStatus(err) != websocket.StatusMessageTooBig {
			t.Fatalf("after 2 MiB: %v", err)
		}
		ws2 := rawDial(t, e.URL)
		wantCode(t, exchange(t, ws2, websocket.MessageText, []byte(ping)), 0, ping)
	})
}

func TestMalformedFramesMessagePack(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		e := newEnv(t, s, feed.Config{})
		ws := rawDial(t, e.URL)
		mp := func(v any) []byte { b, _ := msgpack.Marshal(v); return b }
		cases := []struct {
			name  string
			frame []byte
			code  int
		}{
			{"ping", mp(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "ping"}), 0},
			{"garbage", []byte{0xc1, 0xff, 0x00}, -32700},
			{"not a map", mp([]int{1, 2}), -32700},
			{"truncated", mp(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "ping"})[:5], -32700},
			{"trailing", append(mp(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "ping"}), 0x01), -32700},
			{"no version", mp(map[string]any{"id": 1, "method": "ping"}), -32600},
			{"unknown", mp(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "nope"}), -32601},
			{"bad params", mp(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "subscribe", "params": map[string]any{"stream": 5}}), -32602},
			{"unknown param", mp(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "subscribe", "params": map[string]any{"stream": "project:X", "x": 1}}), -32602},
			{"forbidden", mp(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "subscribe", "params": map[string]any{"stream": "org:nope"}}), -32003},
			{"ping again", mp(map[string]any{"jsonrpc": "2.0", "id": "z", "method": "ping"}), 0},
		}
		for _, c := range cases {
			a := exchange(t, ws, websocket.MessageBinary, c.frame)
			wantCode(t, a, c.code, c.name)
		}
		wantCode(t, exchange(t, ws, websocket.MessageText, []byte(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)), -32600, "text on MessagePack")
	})
}
