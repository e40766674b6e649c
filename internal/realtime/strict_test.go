package realtime

import (
	"bytes"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// TestStrictFrames: a member given twice (the last used to win), text that
// is not valid UTF-8 or an unpaired surrogate escape (both used to become
// U+FFFD) and a miscased parameter name are refused, naming the member, in
// both encodings.
func TestStrictFrames(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		frame string
		want  string
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"ping","method":"subscribe"}`, "method: is given twice"},
		{"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\xff\"}", "method: must be valid UTF-8"},
		{`{"jsonrpc":"2.0","id":"\ud800","method":"ping"}`, "id: holds an unpaired surrogate escape"},
		{`{"jsonrpc":"2.0","id":1,"method":"subscribe","params":{"stream":"project:A","stream":"org:b"}}`, "params.stream: is given twice"},
	} {
		_, e := jsonCodec{}.decodeMessage([]byte(c.frame))
		if e == nil || e.Code != CodeInvalidRequest || !strings.Contains(e.Message, c.want) {
			t.Errorf("%s: %+v, want invalid request: %s", c.frame, e, c.want)
		}
	}
	var p SubscribeParams
	if err := (jsonCodec{}).decodeStrict(rawValue(`{"Stream":"project:A"}`), &p); err == nil || !strings.Contains(err.Error(), `did you mean "stream"`) {
		t.Errorf("miscased param: %v", err)
	}

	// MessagePack: the same frames, written key by key.
	frame := func(kv ...any) []byte {
		var buf bytes.Buffer
		enc := msgpack.NewEncoder(&buf)
		_ = enc.EncodeMapLen(len(kv) / 2)
		for _, v := range kv {
			_ = enc.Encode(v)
		}
		return buf.Bytes()
	}
	params := frame("stream", "project:A", "stream", "org:b")
	for _, c := range []struct {
		frame []byte
		want  string
	}{
		{frame("jsonrpc", "2.0", "id", 1, "method", "ping", "method", "subscribe"), "method: is given twice"},
		{frame("jsonrpc", "2.0", "id", 1, "method", "ping\xff"), "method: must be valid UTF-8"},
		{frame("jsonrpc", "2.0", "id", 1, "method", "subscribe", "params", msgpack.RawMessage(params)), "params.stream: is given twice"},
		{frame("jsonrpc", "2.0", "id", 1, "method", "subscribe", "params", map[string]any{"stream": "project:A", "x\xff": 1}), "params: a key is not valid UTF-8"},
	} {
		_, e := msgpackCodec{}.decodeMessage(c.frame)
		if e == nil || e.Code != CodeInvalidRequest || !strings.Contains(e.Message, c.want) {
			t.Errorf("%q: %+v, want invalid request: %s", c.frame, e, c.want)
		}
	}
	// A well-formed request still decodes.
	m, e := msgpackCodec{}.decodeMessage(frame("jsonrpc", "2.0", "id", 1, "method", "subscribe", "params", map[string]any{"stream": "project:A", "after_seq": 3}))
	if e != nil || m.Method != MethodSubscribe {
		t.Fatalf("%+v %+v", m, e)
	}
}
