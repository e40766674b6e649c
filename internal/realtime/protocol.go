package realtime

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/coder/websocket"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"

	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/strictjson"
)

// JSON-RPC error codes.
const (
	CodeParseError     = -32700 // the frame is not JSON / MessagePack
	CodeInvalidRequest = -32600 // not a JSON-RPC 2.0 request (also: too large, wrong frame type, batch)
	CodeMethodNotFound = -32601
	CodeInvalidParams  = -32602
	CodeInternal       = -32603
	CodeLagged         = -32001 // the subscription fell too far behind and ended
	CodeUnavailable    = -32002 // the event feed is not running or the log cannot be read
	CodeForbidden      = -32003 // unknown stream, invisible stream, or no tracker.read on it
	CodeUnauthorized   = -32004 // the connection's credential is no longer valid
	CodeTooMany        = -32005 // too many subscriptions on one connection
)

// Methods and notifications.
const (
	MethodSubscribe   = "subscribe"
	MethodUnsubscribe = "unsubscribe"
	MethodPing        = "ping"
	NotifyEvent       = "event"
	NotifyLagged      = "lagged"
	NotifyEnded       = "ended"
)

// Error is a JSON-RPC error object.
type Error struct {
	Code    int    `json:"code" msgpack:"code"`
	Message string `json:"message" msgpack:"message"`
	Data    any    `json:"data,omitempty" msgpack:"data,omitempty"`
}

func (e *Error) Error() string { return fmt.Sprintf("realtime: %s (code %d)", e.Message, e.Code) }

func rpcErr(code int, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// SubscribeParams are the params of subscribe.
type SubscribeParams struct {
	// Stream is "project:KEY", "item:KEY-N" or "org:SLUG" (ids work too).
	Stream string `json:"stream" msgpack:"stream"`
	// AfterSeq: replay every visible event after it, then stream live.
	// Omitted: live only, from the feed's current position.
	AfterSeq *int64 `json:"after_seq,omitempty" msgpack:"after_seq,omitempty"`
}

// SubscribeResult answers subscribe.
type SubscribeResult struct {
	Subscription string `json:"subscription" msgpack:"subscription"`
	// Position is the feed's position at subscribe time: events up to it
	// come from the replay, later ones live.
	Position int64 `json:"position" msgpack:"position"`
}

// UnsubscribeParams are the params of unsubscribe.
type UnsubscribeParams struct {
	Subscription string `json:"subscription" msgpack:"subscription"`
}

// EventParams are the params of an event notification.
type EventParams struct {
	Subscription string `json:"subscription" msgpack:"subscription"`
	Event        Event  `json:"event" msgpack:"event"`
}

// EndParams are the params of a lagged or ended notification: the
// subscription is over; LastSeq is the position it reached (every visible
// event up to it was delivered): resume with after_seq = LastSeq.
type EndParams struct {
	Subscription string `json:"subscription" msgpack:"subscription"`
	LastSeq      int64  `json:"last_seq" msgpack:"last_seq"`
	Code         int    `json:"code" msgpack:"code"`
	Message      string `json:"message" msgpack:"message"`
}

// Event is an event exactly as the log stores it, with MessagePack tags
// (occurred_at is a timestamp in both encodings; payload is the stored JSON
// text, embedded as JSON in JSON frames and as a string in MessagePack).
type Event struct {
	Seq            int64           `json:"seq" msgpack:"seq"`
	ID             string          `json:"id" msgpack:"id"`
	OccurredAt     time.Time       `json:"occurred_at" msgpack:"occurred_at"`
	OrganizationID string          `json:"organization_id" msgpack:"organization_id"`
	ProjectID      string          `json:"project_id" msgpack:"project_id"`
	EntityType     string          `json:"entity_type" msgpack:"entity_type"`
	EntityID       string          `json:"entity_id" msgpack:"entity_id"`
	Type           string          `json:"type" msgpack:"type"`
	ActorKind      string          `json:"actor_kind" msgpack:"actor_kind"`
	ActorSub       string          `json:"actor_sub" msgpack:"actor_sub"`
	ActingFor      string          `json:"acting_for" msgpack:"acting_for"`
	Payload        json.RawMessage `json:"payload" msgpack:"-"`
	PayloadText    string          `json:"-" msgpack:"payload"`
}

func fromEvent(e event.Event, msgp bool) Event {
	out := Event{Seq: e.Seq, ID: e.ID, OccurredAt: e.OccurredAt, OrganizationID: e.OrganizationID,
		ProjectID: e.ProjectID, EntityType: e.EntityType, EntityID: e.EntityID, Type: e.Type,
		ActorKind: e.ActorKind, ActorSub: e.ActorSub, ActingFor: e.ActingFor}
	payload := e.Payload
	if len(payload) == 0 {
		payload = json.RawMessage("{}")
	}
	if msgp {
		out.PayloadText = string(payload)
	} else {
		out.Payload = payload
	}
	return out
}

// ToEvent converts back to an event.Event.
func (e Event) ToEvent() event.Event {
	out := event.Event{Seq: e.Seq, ID: e.ID, OccurredAt: e.OccurredAt.UTC(), OrganizationID: e.OrganizationID,
		ProjectID: e.ProjectID, EntityType: e.EntityType, EntityID: e.EntityID, Type: e.Type,
		ActorKind: e.ActorKind, ActorSub: e.ActorSub, ActingFor: e.ActingFor, Payload: e.Payload}
	if len(out.Payload) == 0 && e.PayloadText != "" {
		out.Payload = json.RawMessage(e.PayloadText)
	}
	return out
}

// message is any JSON-RPC 2.0 message, as either encoding decodes it.
// Params and Result stay raw until the method is known.
type message struct {
	JSONRPC string
	HasID   bool
	ID      any
	Method  string
	Params  rawValue
	Result  rawValue
	Error   *Error
}

// rawValue is an undecoded value in the connection's encoding.
type rawValue []byte

// codec is one of the two encodings.
type codec interface {
	frame() websocket.MessageType
	marshal(v any) ([]byte, error)
	// decodeMessage parses one frame; a *Error is a JSON-RPC error to send.
	decodeMessage(b []byte) (*message, *Error)
	// decodeStrict decodes raw params, refusing unknown fields.
	decodeStrict(raw rawValue, v any) error
	// decode decodes a raw value leniently (the client's side).
	decode(raw rawValue, v any) error
}

func codecFor(t websocket.MessageType) codec {
	if t == websocket.MessageBinary {
		return msgpackCodec{}
	}
	return jsonCodec{}
}

type jsonCodec struct{}

func (jsonCodec) frame() websocket.MessageType { return websocket.MessageText }

// marshal does not HTML-escape, so payloads keep the stored text.
func (jsonCodec) marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

func (jsonCodec) decodeMessage(b []byte) (*message, *Error) {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '[' {
		if !jsontext.Value(b).IsValid() {
			return nil, rpcErr(CodeParseError, "parse error: the frame is not valid JSON")
		}
		return nil, rpcErr(CodeInvalidRequest, "batch requests are not supported")
	}
	// Strictly: a member given twice, or text that is not valid UTF-8, is
	// refused rather than resolved (last wins, U+FFFD) behind the client's back.
	var raw map[string]jsontext.Value
	if err := strictjson.Unmarshal(b, &raw); err != nil {
		var se *strictjson.Error
		if errors.As(err, &se) && !se.Malformed {
			if se.Field == "" {
				return nil, rpcErr(CodeInvalidRequest, "invalid request: the message must be a JSON object")
			}
			return nil, rpcErr(CodeInvalidRequest, "invalid request: %v", err)
		}
		return nil, rpcErr(CodeParseError, "parse error: the frame is not valid JSON (%v)", err)
	}
	if raw == nil {
		return nil, rpcErr(CodeInvalidRequest, "invalid request: the message must be a JSON object")
	}
	m := &message{}
	if v, ok := raw["jsonrpc"]; ok && json.Unmarshal(v, &m.JSONRPC) != nil {
		return nil, rpcErr(CodeInvalidRequest, `invalid request: "jsonrpc" must be "2.0"`)
	}
	if v, ok := raw["id"]; ok {
		m.HasID = true
		d := json.NewDecoder(bytes.NewReader(v))
		d.UseNumber()
		if err := d.Decode(&m.ID); err != nil {
			return nil, rpcErr(CodeInvalidRequest, "invalid request: bad id")
		}
		switch m.ID.(type) {
		case nil, string, json.Number:
		default:
			m.ID = nil
			return m, rpcErr(CodeInvalidRequest, "invalid request: id must be a string, a number or null")
		}
	}
	if v, ok := raw["method"]; ok && json.Unmarshal(v, &m.Method) != nil {
		return m, rpcErr(CodeInvalidRequest, `invalid request: "method" must be a string`)
	}
	if v, ok := raw["params"]; ok {
		m.Params = rawValue(v)
	}
	if v, ok := raw["result"]; ok {
		m.Result = rawValue(v)
	}
	if v, ok := raw["error"]; ok && string(v) != "null" {
		m.Error = &Error{}
		if strictjson.Unmarshal(v, m.Error) != nil {
			return m, rpcErr(CodeInvalidRequest, "invalid request: bad error object")
		}
	}
	return m, nil
}

// decodeStrict decodes params strictly (package strictjson): unknown,
// duplicate or miscased members and invalid text are refused, by name.
func (jsonCodec) decodeStrict(raw rawValue, v any) error {
	if len(raw) == 0 || string(raw) == "null" {
		raw = rawValue("{}")
	}
	return strictjson.Unmarshal(raw, v)
}

func (jsonCodec) decode(raw rawValue, v any) error { return json.Unmarshal(raw, v) }

type msgpackCodec struct{}

func (msgpackCodec) decode(raw rawValue, v any) error { return msgpack.Unmarshal(raw, v) }

func (msgpackCodec) frame() websocket.MessageType { return websocket.MessageBinary }

func (msgpackCodec) marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := msgpack.GetEncoder()
	defer msgpack.PutEncoder(enc)
	enc.Reset(&buf)
	enc.UseCompactInts(true)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func (msgpackCodec) decodeMessage(b []byte) (*message, *Error) {
	var raw map[string]msgpack.RawMessage
	dec := msgpack.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&raw); err != nil {
		return nil, rpcErr(CodeParseError, "parse error: the frame is not a MessagePack map")
	}
	if _, err := dec.PeekCode(); err == nil {
		return nil, rpcErr(CodeParseError, "parse error: trailing data after the MessagePack map")
	}
	if raw == nil {
		return nil, rpcErr(CodeInvalidRequest, "invalid request: the message must be a map")
	}
	if err := checkMsgpack(msgpack.NewDecoder(bytes.NewReader(b)), "", 0); err != nil {
		return nil, rpcErr(CodeInvalidRequest, "invalid request: %v", err)
	}
	m := &message{}
	if v, ok := raw["jsonrpc"]; ok && msgpack.Unmarshal(v, &m.JSONRPC) != nil {
		return nil, rpcErr(CodeInvalidRequest, `invalid request: "jsonrpc" must be "2.0"`)
	}
	if v, ok := raw["id"]; ok {
		m.HasID = true
		if err := msgpack.Unmarshal(v, &m.ID); err != nil {
			return nil, rpcErr(CodeInvalidRequest, "invalid request: bad id")
		}
		switch m.ID.(type) {
		case nil, string, int8, int16, int32, int64, uint8, uint16, uint32, uint64, float32, float64:
		default:
			m.ID = nil
			return m, rpcErr(CodeInvalidRequest, "invalid request: id must be a string, a number or nil")
		}
	}
	if v, ok := raw["method"]; ok && msgpack.Unmarshal(v, &m.Method) != nil {
		return m, rpcErr(CodeInvalidRequest, `invalid request: "method" must be a string`)
	}
	if v, ok := raw["params"]; ok {
		m.Params = rawValue(v)
	}
	if v, ok := raw["result"]; ok {
		m.Result = rawValue(v)
	}
	if v, ok := raw["error"]; ok {
		var e *Error
		if msgpack.Unmarshal(v, &e) != nil {
			return m, rpcErr(CodeInvalidRequest, "invalid request: bad error object")
		}
		m.Error = e
	}
	return m, nil
}

// maxMsgpackDepth bounds the nesting checkMsgpack follows; a request needs 2.
const maxMsgpackDepth = 32

// checkMsgpack holds MessagePack frames to what strictjson holds JSON to: a
// map key given twice, or a string that is not valid UTF-8, is refused
// (decoding would let the last key win and keep the invalid text).
func checkMsgpack(dec *msgpack.Decoder, path string, depth int) error {
	if depth > maxMsgpackDepth {
		return fmt.Errorf("%s: nested more than %d levels deep", path, maxMsgpackDepth)
	}
	c, err := dec.PeekCode()
	if err != nil {
		return err
	}
	switch {
	case msgpcode.IsFixedMap(c) || c == msgpcode.Map16 || c == msgpcode.Map32:
		n, err := dec.DecodeMapLen()
		if err != nil {
			return err
		}
		seen := make(map[string]bool, n)
		for range n {
			kc, err := dec.PeekCode()
			if err != nil {
				return err
			}
			if !msgpcode.IsString(kc) && !msgpcode.IsBin(kc) {
				if err := dec.Skip(); err != nil { // a key decoding will refuse
					return err
				}
			} else {
				k, err := dec.DecodeString()
				if err != nil {
					return err
				}
				if !utf8.ValidString(k) {
					return fmt.Errorf("%s: a key is not valid UTF-8", nonEmpty(path))
				}
				if seen[k] {
					return fmt.Errorf("%s: is given twice: a key may appear only once", join(path, k))
				}
				seen[k] = true
				path := join(path, k)
				if err := checkMsgpack(dec, path, depth+1); err != nil {
					return err
				}
				continue
			}
			if err := dec.Skip(); err != nil {
				return err
			}
		}
		return nil
	case msgpcode.IsFixedArray(c) || c == msgpcode.Array16 || c == msgpcode.Array32:
		n, err := dec.DecodeArrayLen()
		if err != nil {
			return err
		}
		for i := range n {
			if err := checkMsgpack(dec, fmt.Sprintf("%s[%d]", path, i), depth+1); err != nil {
				return err
			}
		}
		return nil
	case msgpcode.IsString(c):
		s, err := dec.DecodeString()
		if err != nil {
			return err
		}
		if !utf8.ValidString(s) {
			return fmt.Errorf("%s: must be valid UTF-8", nonEmpty(path))
		}
		return nil
	}
	return dec.Skip()
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func nonEmpty(path string) string {
	if path == "" {
		return "the message"
	}
	return path
}

func (msgpackCodec) decodeStrict(raw rawValue, v any) error {
	if len(raw) == 0 || (len(raw) == 1 && raw[0] == 0xc0) { // absent or nil
		return nil
	}
	dec := msgpack.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields(true)
	return dec.Decode(v)
}

// response and notification are what the server writes.
type response struct {
	JSONRPC string `json:"jsonrpc" msgpack:"jsonrpc"`
	ID      any    `json:"id" msgpack:"id"`
	Result  any    `json:"result,omitempty" msgpack:"result,omitempty"`
	Error   *Error `json:"error,omitempty" msgpack:"error,omitempty"`
}

type notification struct {
	JSONRPC string `json:"jsonrpc" msgpack:"jsonrpc"`
	Method  string `json:"method" msgpack:"method"`
	Params  any    `json:"params" msgpack:"params"`
}

type request struct {
	JSONRPC string `json:"jsonrpc" msgpack:"jsonrpc"`
	ID      any    `json:"id" msgpack:"id"`
	Method  string `json:"method" msgpack:"method"`
	Params  any    `json:"params,omitempty" msgpack:"params,omitempty"`
}
