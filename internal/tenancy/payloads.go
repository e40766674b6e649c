package tenancy

import "github.com/ballet/ballet/internal/strictjson"

// Event payloads of the tenancy changes. organization.created carries the
// Organization, project.created the Project; the other types carry the
// structs below. The catalogue of every event type's payload is
// server.EventPayloads.

// ProjectUpdated is the payload of project.updated.
type ProjectUpdated struct {
	Changes ProjectChanges `json:"changes"`
}

// ProjectChanges are a project's settings that changed, with their new
// values; the others are absent.
type ProjectChanges struct {
	Name             *string                         `json:"name,omitempty"`
	Repository       strictjson.Nullable[Repository] `json:"repository,omitzero"` // null: removed
	MergePolicy      *MergePolicy                    `json:"merge_policy,omitempty"`
	ConcurrencyLimit *int                            `json:"concurrency_limit,omitempty"`
	Budgets          *Budgets                        `json:"budgets,omitempty"`
	TicketTypes      []string                        `json:"ticket_types,omitempty"`
	Paused           *bool                           `json:"paused,omitempty"`
}

func (c *ProjectChanges) empty() bool {
	return c.Name == nil && !c.Repository.Set && c.MergePolicy == nil && c.ConcurrencyLimit == nil && c.Budgets == nil &&
		c.TicketTypes == nil && c.Paused == nil
}

// MemberRoleSet is the payload of member.role_set.
type MemberRoleSet struct {
	Subject      string `json:"subject"`
	Role         string `json:"role"`
	PreviousRole string `json:"previous_role,omitempty"` // absent when the subject had no role here
	ProjectID    string `json:"project_id"`              // "" for an organization role
}

// MemberRemoved is the payload of member.removed.
type MemberRemoved struct {
	Subject      string `json:"subject"`
	PreviousRole string `json:"previous_role"`
	ProjectID    string `json:"project_id"` // "" for an organization role
}

// PlatformSwitched is the payload of platform.paused and platform.resumed:
// the type says it all.
type PlatformSwitched struct{}

// PlatformUpdated is the payload of platform.updated.
type PlatformUpdated struct {
	Changes PlatformChanges `json:"changes"`
}

// PlatformChanges are the platform settings that changed.
type PlatformChanges struct {
	ConcurrencyLimit int `json:"concurrency_limit"`
}
