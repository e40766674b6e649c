package realtime

import "github.com/ballet/ballet/internal/event"

// EncodeEventForBench encodes one event notification as the server does.
func EncodeEventForBench(msgp bool, sub string, e event.Event) []byte {
	var cd codec = jsonCodec{}
	if msgp {
		cd = msgpackCodec{}
	}
	b, err := cd.marshal(notification{JSONRPC: "2.0", Method: NotifyEvent, Params: EventParams{Subscription: sub, Event: fromEvent(e, msgp)}})
	if err != nil {
		panic(err)
	}
	return b
}
