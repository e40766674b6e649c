package runproto

// Session is what a leased run's session needs, as the lease carries it:
// nothing more.
type Session struct {
	Ticket            SessionTicket   `json:"ticket"`
	Stage             SessionStage    `json:"stage"`
	Skills            []SessionSkill  `json:"skills"` // exactly the skills the stage allows
	PreviousReport    *SessionReport  `json:"previous_report"`
	AnsweredQuestions []SessionAnswer `json:"answered_questions"`
	// Knowledge are the entries of the organization's knowledge the stage
	// names, as fetched when the run was created (empty: none).
	Knowledge  []SessionEntry `json:"knowledge"`
	Repository *SessionRepo   `json:"repository"` // null: the project names none
	Credential *Credential    `json:"credential"` // null: none (see Credential)
	MCP        SessionMCP     `json:"mcp"`
	Log        SessionLog     `json:"log"`
}

// SessionTicket is the ticket a session works on.
type SessionTicket struct {
	Key                string `json:"key"`
	Type               string `json:"type"`
	Title              string `json:"title"`
	Description        string `json:"description"`
	AcceptanceCriteria string `json:"acceptance_criteria"`
}

// SessionStage is the stage a session runs.
type SessionStage struct {
	ID             string `json:"id"`
	Name           string `json:"name"`
	Instructions   string `json:"instructions"`
	Adapter        string `json:"adapter"`
	Model          string `json:"model"`
	TimeoutSeconds int    `json:"timeout_seconds"`
	Iteration      int    `json:"iteration"`
	MaxIterations  int    `json:"max_iterations"`
}

// SessionSkill is a project skill the stage allows, with its content.
type SessionSkill struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Content     string `json:"content"`
}

// SessionReport is the previous stage's report.
type SessionReport struct {
	Stage   string `json:"stage"`
	Outcome string `json:"outcome"`
	Report  string `json:"report"`
}

// SessionAnswer is an answered question of the ticket.
type SessionAnswer struct {
	Question string `json:"question"`
	Answer   string `json:"answer"`
}

// SessionEntry is a knowledge entry the stage hands its session: Body is
// cut to the first part when Cut (the session reads it whole with the
// MCP tool read_entry).
type SessionEntry struct {
	Space   string `json:"space"`
	Slug    string `json:"slug"`
	Title   string `json:"title"`
	Version int64  `json:"version"`
	Body    string `json:"body"`
	Cut     bool   `json:"cut"`
}

// SessionRepo is the repository a session works on.
type SessionRepo struct {
	Forge         string `json:"forge"`
	URL           string `json:"url"`
	DefaultBranch string `json:"default_branch"`
	Branch        string `json:"branch"` // ballet/<KEY>
}

// Credential is the secret git authenticates with to an http(s)
// repository, resolved by Core from the project's credentials_ref. It is
// never logged and never in an event; String hides it.
type Credential struct {
	Username string `json:"username"`
	Secret   string `json:"secret"`
}

// String hides the secret from a %v of the value.
func (c Credential) String() string { return "credential for " + c.Username + " (hidden)" }

// SessionMCP is Core's MCP endpoint for the session.
type SessionMCP struct {
	URL string `json:"url"`
}

// SessionLog is how many bytes of the run's log Core keeps.
type SessionLog struct {
	Limit int64 `json:"limit"`
}
