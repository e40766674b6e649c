package forge

import (
	"fmt"
	"regexp"
	"slices"
	"time"
)

// Found is a pull request a forge lists for a ticket's branch into the
// base, with what Adopt needs to choose among several.
type Found struct {
	PullRequest
	Open, Merged bool
	Body         string // where Ballet's marker is, if Ballet opened it
	CreatedAt    time.Time
}

// Adopt chooses which existing pull request of a ticket's branch
// EnsurePullRequest returns, given branchHead (the branch's current head
// commit). ok is false when none fits and a new one is to be opened.
//
//  1. An open pull request is adopted, whoever opened it (Ballet before a
//     crash, or a person by hand); with several, the one carrying Ballet's
//     marker, then the newest.
//  2. Else a merged or closed one whose head is branchHead: the work on the
//     branch now was already merged (Ballet merged, then crashed before it
//     recorded it), or a person closed it as it is — never open a second.
//  3. Else none: older closed or merged pull requests are history (an
//     earlier iteration of the ticket), and a new one is opened.
func Adopt(found []Found, branchHead string) (Found, bool) {
	by := func(a, b Found) int {
		if ma, mb := HasMarker(a.Body), HasMarker(b.Body); ma != mb {
			if ma {
				return -1
			}
			return 1
		}
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		return b.Number - a.Number
	}
	sorted := slices.Clone(found)
	slices.SortStableFunc(sorted, by)
	for _, f := range sorted {
		if f.Open {
			return f, true
		}
	}
	for _, f := range sorted {
		if branchHead != "" && f.HeadSHA == branchHead {
			return f, true
		}
	}
	return Found{}, false
}

// Marker is the line Ballet writes into the body of every pull request it
// opens, naming the ticket and the flow: invisible in the rendered
// description, found again by HasMarker and ParseMarker.
func Marker(ticket, flowID string) string {
	return fmt.Sprintf("<!-- ballet: ticket=%s flow=%s -->", ticket, flowID)
}

var markerRE = regexp.MustCompile(`<!-- ballet: ticket=(\S+) flow=(\S+) -->`)

// HasMarker reports whether body carries a Ballet marker.
func HasMarker(body string) bool { return markerRE.MatchString(body) }

// ParseMarker returns the ticket and flow a pull request body's marker
// names.
func ParseMarker(body string) (ticket, flowID string, ok bool) {
	m := markerRE.FindStringSubmatch(body)
	if m == nil {
		return "", "", false
	}
	return m[1], m[2], true
}
