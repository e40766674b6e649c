package server

import "github.com/ballet/ballet/internal/event/catalogue"

// EventPayloads is the catalogue of event types (package catalogue): each
// type with a zero value of its payload type. The OpenAPI document gives
// every type its own schema (EventPayload.<type>) and Event is one of
// them, told apart by type. An event whose type is missing here fails the
// API tests, which check every event they write against the document.
var EventPayloads = catalogue.Core

// EventTypes lists the catalogue's event types in order.
func EventTypes() []string { return catalogue.Core.Types() }
