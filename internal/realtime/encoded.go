package realtime

import (
	"encoding/json"
	"sync"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/ballet/ballet/internal/event"
)

// encodedEvents caches each event's wire encoding, so that an event fanned
// out to many subscribers is encoded once per encoding, not once per
// subscriber.
type encodedEvents struct {
	mu    sync.Mutex
	byKey map[encKey][]byte
	order []encKey // oldest first, for eviction
}

type encKey struct {
	id   string // the event's UUIDv7: unique across databases
	msgp bool
}

const maxEncoded = 4096

func newEncodedEvents() *encodedEvents { return &encodedEvents{byKey: map[encKey][]byte{}} }

// get returns the encoded event, encoding it on first use.
func (c *encodedEvents) get(e event.Event, msgp bool) ([]byte, error) {
	k := encKey{e.ID, msgp}
	c.mu.Lock()
	b, ok := c.byKey[k]
	c.mu.Unlock()
	if ok {
		return b, nil
	}
	var err error
	if msgp {
		b, err = msgpackCodec{}.marshal(fromEvent(e, true))
	} else {
		b, err = jsonCodec{}.marshal(fromEvent(e, false))
	}
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if _, ok := c.byKey[k]; !ok {
		c.byKey[k] = b
		c.order = append(c.order, k)
		if len(c.order) > maxEncoded {
			old := c.order[:len(c.order)-maxEncoded]
			for _, o := range old {
				delete(c.byKey, o)
			}
			c.order = append(c.order[:0:0], c.order[len(old):]...)
		}
	}
	c.mu.Unlock()
	return b, nil
}

// rawEventParams are EventParams with the event already encoded.
type rawEventParams struct {
	Subscription string `json:"subscription" msgpack:"subscription"`
	Event        any    `json:"event" msgpack:"event"` // json.RawMessage or msgpack.RawMessage
}

// eventNotification builds the notification of e for subscription id.
func (c *encodedEvents) notification(id string, e event.Event, msgp bool) (notification, error) {
	b, err := c.get(e, msgp)
	if err != nil {
		return notification{}, err
	}
	var raw any = json.RawMessage(b)
	if msgp {
		raw = msgpack.RawMessage(b)
	}
	return notification{JSONRPC: "2.0", Method: NotifyEvent, Params: rawEventParams{Subscription: id, Event: raw}}, nil
}
