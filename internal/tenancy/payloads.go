package tenancy

import (
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/strictjson"
)

// Event payloads of the tenancy changes, one type per event type (Events
// lists them). organization.created carries the Organization,
// project.created the Project.

// Events are the payload types of the events tenancy writes.
var Events = []event.Payload{OrganizationCreated{}, OrganizationUpdated{}, ProjectCreated{}, ProjectUpdated{}, MemberRoleSet{}, MemberRemoved{},
	PlatformPaused{}, PlatformResumed{}, PlatformUpdated{}}

// OrganizationCreated is the payload of organization.created: the
// organization.
type OrganizationCreated Organization

// ProjectCreated is the payload of project.created: the project.
type ProjectCreated Project

func (OrganizationCreated) EventType() string { return "organization.created" }
func (OrganizationUpdated) EventType() string { return "organization.updated" }
func (ProjectCreated) EventType() string      { return "project.created" }
func (ProjectUpdated) EventType() string      { return "project.updated" }
func (MemberRoleSet) EventType() string       { return "member.role_set" }
func (MemberRemoved) EventType() string       { return "member.removed" }
func (PlatformPaused) EventType() string      { return "platform.paused" }
func (PlatformResumed) EventType() string     { return "platform.resumed" }
func (PlatformUpdated) EventType() string     { return "platform.updated" }

// OrganizationUpdated is the payload of organization.updated.
type OrganizationUpdated struct {
	Changes OrganizationChanges `json:"changes"`
}

// OrganizationChanges are an organization's fields that changed, with their
// new values (the name: a slug never changes).
type OrganizationChanges struct {
	Name *string `json:"name,omitempty"`
}

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
	Notify           *Notify                         `json:"notify,omitempty"`
}

func (c *ProjectChanges) empty() bool {
	return c.Name == nil && !c.Repository.Set && c.MergePolicy == nil && c.ConcurrencyLimit == nil && c.Budgets == nil &&
		c.TicketTypes == nil && c.Paused == nil && c.Notify == nil
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

// PlatformPaused is the payload of platform.paused (the kill switch
// pulled): the type says it all.
type PlatformPaused struct{}

// PlatformResumed is the payload of platform.resumed (the kill switch
// released).
type PlatformResumed struct{}

// PlatformUpdated is the payload of platform.updated.
type PlatformUpdated struct {
	Changes PlatformChanges `json:"changes"`
}

// PlatformChanges are the platform settings that changed.
type PlatformChanges struct {
	ConcurrencyLimit int `json:"concurrency_limit"`
}
