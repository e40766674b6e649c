// Package door is the kit Ballet's HTTP doors are built with: Core's REST
// API (internal/server, with MCP's route from internal/mcp), the Knowledge
// service's (internal/knowledge/service), and what the realtime WebSocket
// shares with them on the wire.
//
//   - The route table (Table, Route): one list of routes drives the mux, the
//     OpenAPI operations (Operations, for package openapi) and the
//     authorization-matrix tests, so the three cannot drift apart.
//   - The guard: a route whose handler returns without an access check
//     answers 500, so none can forget it (Call.Checked; a door's own
//     checks call it).
//   - The handler prologue: the door's own authentication (Table.Open),
//     the body limit, long polls (Route.Hold), heavy routes taking turns,
//     protocol routes (Route.Serve), the success status, the one error
//     answer (Table.WriteErr).
//   - The wire (wire.go): the one error shape, each application error
//     code's status, strict body decoding errors, query parameters, and the
//     request's credential (credential.go).
//
// A door declares its request type as a struct embedding *Call and adding
// the caller it resolved (its Principal), and its permission type; the rest
// is shared.
package door
