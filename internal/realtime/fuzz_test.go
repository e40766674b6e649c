package realtime

import "testing"

// FuzzDecodeMessage: any frame, in either encoding, decodes to a message or
// a JSON-RPC error with a code and a message; it never panics.
func FuzzDecodeMessage(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"subscribe","params":{"stream":"project:ACME","after_seq":0}}`,
		`{"jsonrpc":"2.0","id":"a","method":"ping"}`,
		`[{"jsonrpc":"2.0"}]`, `{"jsonrpc":"1.0"}`, `{`, ``, `null`, `{"id":{}}`,
		"\x84\xa7jsonrpc\xa32.0\xa2id\x01\xa6method\xa4ping\xa6params\xc0",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, c := range []codec{jsonCodec{}, msgpackCodec{}} {
			m, e := c.decodeMessage(b)
			if e != nil {
				if e.Code == 0 || e.Message == "" {
					t.Fatalf("error without code or message: %+v", e)
				}
				continue
			}
			if m == nil {
				t.Fatal("no message and no error")
			}
		}
	})
}
